// Grapheme counting for transcript reads: a fast path for text where every UTF-16 unit is one
// grapheme, Intl.Segmenter otherwise, and the per-row count stored at write time so a read can
// skip to a deep offset from the index alone.
import type { StoredBody } from '../protocol/rows.ts';
import { rowHeader } from './row-text.ts';

/**
 * Text in which every UTF-16 unit is one grapheme, so graphemes count by length: no CR (CR LF is
 * one grapheme), nothing that extends or joins the character before it (marks, Grapheme_Extend,
 * ZWJ/ZWNJ, emoji modifiers, the two spacing vowels U+0E33/U+0EB3), no Prepend characters, no
 * Hangul jamo, regional indicators, or anything outside the BMP. That covers ASCII and most
 * other text (precomposed accents, CJK, Hangul syllables, box drawing, arrows); the rest goes
 * through Intl.Segmenter. Checked against the segmenter for every BMP character that passes.
 */
export const ONE_GRAPHEME_PER_CHAR =
  /^[^\r\u200c\u200d\p{M}\p{Grapheme_Extend}\p{Emoji_Modifier}\p{Regional_Indicator}\u0e33\u0eb3\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\u0d4e\u{10000}-\u{10ffff}\ud800-\udfff]*$/u;

export const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

export function countGraphemes(text: string): number {
  if (ONE_GRAPHEME_PER_CHAR.test(text)) return text.length;
  let n = 0;
  for (const _ of segmenter.segment(text)) n++;
  return n;
}

/**
 * A row's size as transcript_read renders it with its separator after it
 * (`header + "\n" + text + "\n\n"`), minus the separator's 2 and minus the digits of its seq:
 * settling can move a row to a seq with another number of digits, so the reader adds
 * String(seq).length itself. Text ending in CR joins the separator's first LF into one
 * grapheme, hence the -1. A grapheme break always follows the header's LF, so the parts count
 * separately.
 */
export function renderedGraphemesWithoutSeq(body: StoredBody, text: string): number {
  return countGraphemes(rowHeader(0, body)) - 1 + 1 + countGraphemes(text) - (text.endsWith('\r') ? 1 : 0);
}
