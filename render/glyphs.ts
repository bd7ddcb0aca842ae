// The 8x13 glyph table, decoded once into flat arrays the renderer indexes directly: which code
// points the font draws, their 13 row bytes, and which of them are combining marks. How text
// maps onto these glyphs (controls, missing characters, marks) is layout.ts's business.
import { GLYPH_TABLE_BASE64, GLYPH_TABLE_VERSION } from './glyph-table-data.ts';

export { GLYPH_TABLE_VERSION };

/** Glyph size in pixels; every glyph fills the whole cell (the font is a character-cell font). */
export const GLYPH_WIDTH = 8;
export const GLYPH_HEIGHT = 13;

/** The table's raw bytes, as committed (tests hash them against GLYPH_TABLE_VERSION). */
export const GLYPH_TABLE_BYTES: Buffer = Buffer.from(GLYPH_TABLE_BASE64, 'base64');

/** Glyph number by code point (the font has nothing past U+FFFF); -1 where the font has none. */
const indexOf = new Int32Array(0x10000).fill(-1);
/** GLYPH_HEIGHT bytes per glyph, one row each, leftmost pixel in the high bit. */
const rows: Uint8Array = (() => {
  const t = GLYPH_TABLE_BYTES;
  const ranges = t.readUInt16BE(0);
  let glyph = 0;
  for (let r = 0; r < ranges; r++) {
    const first = t.readUInt16BE(2 + r * 4);
    const n = t.readUInt16BE(4 + r * 4);
    for (let i = 0; i < n; i++) indexOf[first + i] = glyph++;
  }
  const start = 2 + ranges * 4;
  if (t.length !== start + glyph * GLYPH_HEIGHT) throw new Error('glyph table is truncated or padded');
  return t.subarray(start);
})();

const MARK = /^\p{M}$/u;
/** 1 where the font's glyph is a combining mark, to be drawn over the cell before it. */
const markFlag = new Uint8Array(0x10000);
for (let cp = 0; cp < 0x10000; cp++) if (indexOf[cp]! >= 0 && MARK.test(String.fromCharCode(cp))) markFlag[cp] = 1;

// Layout draws these whatever the text is (blank cells, newlines, missing characters), and the
// renderer indexes rows without checking: a table without them is a build error, said at load.
for (const cp of [0x20, 0x23ce, 0xfffd]) {
  if (indexOf[cp]! < 0) throw new Error(`the glyph table has no U+${cp.toString(16).toUpperCase()}; rebuild it from a font that does`);
}

/** Glyph number for a code point, or -1 when the font lacks it. */
export function glyphIndex(cp: number): number {
  return cp < 0x10000 ? indexOf[cp]! : -1;
}

export function hasGlyph(cp: number): boolean {
  return glyphIndex(cp) >= 0;
}

/** True for a code point the font draws as a combining mark. */
export function isFontMark(cp: number): boolean {
  return cp < 0x10000 && markFlag[cp] === 1;
}

/** The flat row bytes of every glyph: glyph g's rows are [g·13, g·13 + 13). Do not modify. */
export const GLYPH_ROWS: Uint8Array = rows;

/** Every code point the table draws, ascending. */
export function glyphCodePoints(): number[] {
  const out: number[] = [];
  for (let cp = 0; cp < 0x10000; cp++) if (indexOf[cp]! >= 0) out.push(cp);
  return out;
}
