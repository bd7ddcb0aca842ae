// Grapheme counting for transcript reads: a fast path for text where every UTF-16 unit is one
// grapheme, Intl.Segmenter otherwise, and the per-row count stored at write time so a read can
// skip to a deep offset from the index alone.
import type { StoredBody } from '../../protocol/rows.ts';
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

/**
 * Per-character answers for counting, built once from the same classes as ONE_GRAPHEME_PER_CHAR:
 * 1 for a BMP unit that is a grapheme on its own, and for an astral pictograph in plane 1
 * (emoji without modifiers or joiners: one grapheme of two units). A loop over these tables
 * runs far faster than the Unicode-class regex on long non-ASCII text. In `bmp`, CONTROL marks
 * such a unit after which nothing joins (a grapheme break always follows it), and VS16 the
 * emoji presentation selector U+FE0F, which extends the character before it unless that is a
 * control (as in ⚠️ or ✅️, common in tool output), so that text need not go to the segmenter.
 */
let tables: { bmp: Uint8Array; plane1: Uint8Array } | undefined;

const CONTROL = 2;
const VS16 = 3;
/** Grapheme_Cluster_Break=Control among the units the tables count: breaks on both sides. */
const CONTROL_CHAR = /^(?:[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]|(?=\p{Cn})\p{Default_Ignorable_Code_Point})$/u;

function countingTables(): { bmp: Uint8Array; plane1: Uint8Array } {
  if (tables !== undefined) return tables;
  const bmp = new Uint8Array(0x10000);
  const plane1 = new Uint8Array(0x10000);
  for (let c = 0; c < 0x10000; c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const ch = String.fromCharCode(c);
    if (c === 0xfe0f) bmp[c] = VS16;
    else if (c === 0x0d || ONE_GRAPHEME_PER_CHAR.test(ch)) bmp[c] = CONTROL_CHAR.test(ch) ? CONTROL : 1;
  }
  const pictograph = /^\p{Extended_Pictographic}$/u;
  for (let c = 0; c < 0x10000; c++) plane1[c] = pictograph.test(String.fromCodePoint(0x10000 + c)) ? 1 : 0;
  tables = { bmp, plane1 };
  return tables;
}

// eslint-disable-next-line no-control-regex -- the ASCII range starts at NUL on purpose
const NON_ASCII_RUNS = /[^\x00-\x7f]+/g;

/**
 * Graphemes of text[from, to) by the tables, or -1 when some character needs the segmenter.
 * ASCII counts one per unit (less CR LF pairs); a native regex finds the non-ASCII runs, so
 * text that is mostly ASCII costs little more than its length check.
 */
function countSimple(text: string, from: number, to: number): number {
  const { bmp, plane1 } = countingTables();
  let n = to - from - crlfPairs(text, from, to);
  NON_ASCII_RUNS.lastIndex = from;
  for (let m = NON_ASCII_RUNS.exec(text); m !== null && m.index < to; m = NON_ASCII_RUNS.exec(text)) {
    const end = Math.min(to, m.index + m[0].length);
    for (let i = m.index; i < end; i++) {
      const c = text.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff) {
        const low = text.charCodeAt(i + 1);
        if (i + 1 >= end || low < 0xdc00 || low > 0xdfff) return -1;
        const cp = ((c - 0xd800) << 10) + (low - 0xdc00) + 0x10000;
        if (cp >= 0x20000 || plane1[cp - 0x10000] === 0) return -1;
        n--; // two units, one grapheme
        i++;
      } else if (bmp[c] === VS16) {
        // Joins the unit before it in this piece (one the tables passed) unless that is a control.
        const before = i > from ? text.charCodeAt(i - 1) : 0;
        if (before > 0x7f ? bmp[before] !== CONTROL : before >= 0x20 && before !== 0x7f) n--;
      } else if (bmp[c] === 0) {
        return -1;
      }
    }
  }
  return n;
}

// eslint-disable-next-line no-control-regex -- the ASCII range starts at NUL on purpose
const ASCII = /^[\x00-\x7f]*$/;

/** CR LF pairs that start in text[from, to - 1). */
function crlfPairs(text: string, from = 0, to = text.length): number {
  let n = 0;
  for (let i = text.indexOf('\r\n', from); i >= 0 && i + 1 < to; i = text.indexOf('\r\n', i + 2)) n++;
  return n;
}

/** Pieces of about this many UTF-16 units are counted separately (see countGraphemes). */
const PIECE_CHARS = 1024;

/**
 * Graphemes of a text. ASCII is counted by length (less CR LF pairs), other text by the
 * tables above. Text with characters the tables cannot answer is cut after LFs (a grapheme
 * break always follows LF) into pieces of about PIECE_CHARS, and only the pieces that need it
 * go through the segmenter, which is slow per grapheme and slower still on long strings.
 */
export function countGraphemes(text: string): number {
  if (ASCII.test(text)) return text.length - crlfPairs(text);
  const simple = countSimple(text, 0, text.length);
  if (simple >= 0) return simple;
  let n = 0;
  let from = 0;
  while (from < text.length) {
    const lf = text.length - from > PIECE_CHARS ? text.indexOf('\n', from + PIECE_CHARS - 1) : -1;
    const to = lf < 0 ? text.length : lf + 1;
    const piece = countSimple(text, from, to);
    if (piece >= 0) n += piece;
    else for (const _ of segmenter.segment(text.slice(from, to))) n++;
    from = to;
  }
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
