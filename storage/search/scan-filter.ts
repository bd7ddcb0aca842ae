// A first look at the rows a search scans because the index has not reached them yet
// (scanMatches, grep.ts). Deriving a row's text means parsing its JSON, checking it and rendering
// it, and folding the text: tens of µs a row. Most rows do not hold the pattern, and for most
// patterns that can be told from the row's raw JSON with one case-insensitive substring search.
//
// Why the JSON can be trusted: every letter and digit of a row's text comes from a string or a
// number in its body, written by JSON.stringify, which escapes only quotes, backslashes and
// control characters. So a run of ASCII letters and digits in the folded text is in the JSON, in
// some case, unless
//   - the text holds a character whose folding gives an ASCII letter (FOLDS_TO_ASCII: 'ß' folds
//     to "ss", the Kelvin sign to "k"), so the JSON spells it otherwise; such a row is derived;
//   - the run is one the rendering writes (a marker, a notice's words, an image's `WxH`): a
//     pattern whose anchor such a run could hold is not filtered at all.
// The filter may keep a row that does not match (the derivation decides); it never drops one
// that does (test/storage/scan-filter.test.ts checks both, and FOLDS_TO_ASCII against every code point).
import { renderedWords } from '../transcript/row-text.ts';
import { fold } from './fold.ts';

/**
 * Every code point above ASCII whose fold (fold.ts) holds an ASCII letter or digit: ß ẞ ſ, the
 * ligatures ﬀ-ﬆ, the Kelvin sign, İ, ŉ, ǰ and ẖ ẗ ẘ ẙ ẚ.
 */
export const FOLDS_TO_ASCII = /[\u00df\u0130\u0149\u017f\u01f0\u1e96-\u1e9a\u1e9e\u212a\ufb00-\ufb06]/;

/** Anchors shorter than this would match too many rows to be worth the look. */
const MIN_ANCHOR = 3;

let rendered: string | undefined;

/**
 * A test of a row's raw body JSON that is false only when the row's text cannot contain
 * `needle` (already folded); null when the needle has no anchor the JSON can be searched for.
 */
export function bodyMayMatch(needle: string): ((json: string) => boolean) | null {
  // The needle's longest run of ASCII letters and digits: every match holds it.
  let anchor = '';
  for (const run of needle.match(/[a-z0-9]+/g) ?? []) if (run.length > anchor.length) anchor = run;
  if (anchor.length < MIN_ANCHOR) return null;
  // A run only the rendering writes: its words, or part of an image's `${width}x${height}`.
  rendered ??= fold(renderedWords());
  if (rendered.includes(anchor) || /^\d*x\d*$/.test(anchor)) return null;
  const inJson = new RegExp(anchor, 'i');
  return (json) => inJson.test(json) || FOLDS_TO_ASCII.test(json);
}
