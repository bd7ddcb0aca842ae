// Reads a rendered frame back into text the way an OCR of a known font would: the PNG decoded
// by sharp (not by our encoder's inverse), each cell cut out of the pixels and matched against
// the glyph table. Glyphs that look alike (Latin A and Cyrillic А) read as the lowest code point
// with that bitmap, so comparisons go through `canonicalText` on both sides.
import sharp from 'sharp';
import type { Geometry } from '../../render/geometry.ts';
import { GLYPH_HEIGHT, GLYPH_ROWS, GLYPH_WIDTH, glyphCodePoints, glyphIndex, isFontMark } from '../../render/glyphs.ts';

type Bitmap = number[];

const key = (b: Bitmap): string => b.join(',');

function bitmapOf(cp: number): Bitmap {
  const at = glyphIndex(cp) * GLYPH_HEIGHT;
  if (at < 0) throw new Error(`U+${cp.toString(16)} is not in the glyph table`);
  return [...GLYPH_ROWS.subarray(at, at + GLYPH_HEIGHT)];
}

const ALL = glyphCodePoints();
const MARKS = ALL.filter(isFontMark);
const BITMAPS = new Map(ALL.map((cp) => [cp, bitmapOf(cp)]));
/** Lowest code point for each distinct bitmap. */
const BY_BITMAP = new Map<string, number>();
for (const cp of ALL) if (!BY_BITMAP.has(key(BITMAPS.get(cp)!))) BY_BITMAP.set(key(BITMAPS.get(cp)!), cp);

const or = (a: Bitmap, b: Bitmap): Bitmap => a.map((r, i) => r | b[i]!);
const within = (a: Bitmap, b: Bitmap): boolean => a.every((r, i) => (r & ~b[i]!) === 0);

/** Code points whose bitmaps OR-ed together give exactly `cell`, or null; see readCell. */
function decompose(cell: Bitmap, marksLeft: number): number[] | null {
  const single = BY_BITMAP.get(key(cell));
  if (single !== undefined) return [single];
  if (marksLeft === 0) return null;
  for (const m of MARKS) {
    const mb = BITMAPS.get(m)!;
    if (!within(mb, cell)) continue;
    // One mark: any base the mark may overlap, tried in full.
    for (const b of ALL) {
      const bb = BITMAPS.get(b)!;
      if (within(bb, cell) && key(or(bb, mb)) === key(cell)) return [BY_BITMAP.get(key(bb))!, m];
    }
    // More marks: what is left once this one's pixels are taken away, checked after.
    const rest = decompose(cell.map((r, i) => r & ~mb[i]!), marksLeft - 1);
    if (rest !== null && key(rest.reduce((acc, cp) => or(acc, BITMAPS.get(cp)!), mb)) === key(cell)) return [...rest, m];
  }
  return null;
}

/**
 * A cell's bitmap as text: the glyph it is, or else a glyph with up to three marks drawn over
 * it (the lowest that give exactly these pixels); throws on anything else.
 */
function readCell(cell: Bitmap): string {
  const cps = decompose(cell, 3);
  if (cps === null) throw new Error(`a cell that is no glyph of the table: ${key(cell)}`);
  return String.fromCharCode(...cps);
}

/**
 * The text a cell-by-cell reading of `s` gives: each cell (a code point and the marks over it)
 * replaced by what readCell makes of its combined bitmap. Use on expected text before comparing.
 */
export function canonicalText(s: string): string {
  let out = '';
  const cps = [...s].map((c) => c.codePointAt(0)!);
  for (let i = 0; i < cps.length;) {
    let b = bitmapOf(cps[i]!);
    let j = i + 1;
    for (; j < cps.length && isFontMark(cps[j]!); j++) b = or(b, bitmapOf(cps[j]!));
    out += readCell(b);
    i = j;
  }
  return out;
}

export interface ReadFrame {
  width: number;
  height: number;
  /** One string per row of cells, `columns` cells each (blank cells read as spaces). */
  rows: string[];
}

/** Decodes `png` with sharp and reads every cell of `geometry`'s grid; stray ink anywhere throws. */
export async function readFrame(png: Buffer, geometry: Geometry): Promise<ReadFrame> {
  const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
  const { width, height, channels } = info;
  if (width % geometry.advance !== 0 || height % geometry.pitch !== 0) throw new Error(`${width}x${height} is not a whole grid of ${geometry.advance}x${geometry.pitch} cells`);
  const dark = (x: number, y: number): boolean => {
    const v = data[(y * width + x) * channels]!;
    if (v !== 0 && v !== 255) throw new Error(`pixel (${x}, ${y}) is ${v}, neither black nor white`);
    return v === 0;
  };
  // Centred in the cell, rounded towards the top left (as docs/render.md says; computed here
  // rather than taken from the renderer, so a renderer that drifted would be caught).
  const off = { x: (geometry.advance - GLYPH_WIDTH) >> 1, y: (geometry.pitch - GLYPH_HEIGHT) >> 1 };
  const rows: string[] = [];
  for (let r = 0; r < height / geometry.pitch; r++) {
    let row = '';
    for (let c = 0; c < width / geometry.advance; c++) {
      const x0 = c * geometry.advance;
      const y0 = r * geometry.pitch;
      const cell: Bitmap = [];
      for (let y = 0; y < geometry.pitch; y++) {
        let bits = 0;
        for (let x = 0; x < geometry.advance; x++) {
          const inGlyph = x >= off.x && x < off.x + GLYPH_WIDTH && y >= off.y && y < off.y + GLYPH_HEIGHT;
          if (inGlyph) bits = (bits << 1) | (dark(x0 + x, y0 + y) ? 1 : 0);
          else if (dark(x0 + x, y0 + y)) throw new Error(`ink outside the glyph box of cell (${r}, ${c}) at (${x}, ${y})`);
        }
        if (y >= off.y && y < off.y + GLYPH_HEIGHT) cell.push(bits);
      }
      row += readCell(cell);
    }
    rows.push(row);
  }
  return { width, height, rows };
}
