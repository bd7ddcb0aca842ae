// A laid-out frame drawn into 1-bit scanlines and encoded as PNG, and the cache key that names
// the result. The key is computed from the frame's text and geometry alone (no drawing), so a
// caller can look a frame up before deciding to render it.
import { createHash } from 'node:crypto';
import type { Geometry } from './geometry.ts';
import { GLYPH_HEIGHT, GLYPH_ROWS, GLYPH_TABLE_VERSION, GLYPH_WIDTH, glyphIndex } from './glyphs.ts';
import type { Frame } from './layout.ts';
import { encodeBilevelPng, scanlineBytes } from './png.ts';

export interface RenderedFrame {
  /** The PNG file. */
  png: Buffer;
  /** Pixels. */
  width: number;
  height: number;
  /** frameKey of the frame: what the image is cached under. */
  key: string;
}

/**
 * sha256 (hex) of the geometry, the glyph table version and the frame's text: everything its
 * pixels depend on (layout.ts explains why the text before the frame does not matter). The
 * version is a parameter only so tests can show that it counts.
 */
export function frameKey(geometry: Geometry, text: string, tableVersion: string = GLYPH_TABLE_VERSION): string {
  const head = `${tableVersion}\n${geometry.advance},${geometry.pitch},${geometry.frameWidth},${geometry.rows}\n`;
  return createHash('sha256').update(head).update(text).digest('hex');
}

/** Where the glyph sits inside its cell: centred, rounded towards the top left. */
export function glyphOffset(g: Geometry): { x: number; y: number } {
  return { x: (g.advance - GLYPH_WIDTH) >> 1, y: (g.pitch - GLYPH_HEIGHT) >> 1 };
}

/** GLYPH_ROWS inverted: a glyph row as stored in a white scanline (ink is bit 0). */
const WHITE_ROWS = GLYPH_ROWS.map((b) => ~b & 0xff);
/**
 * Per glyph, the first and one past the last row with ink in it (0, 0 for a blank glyph): rows
 * outside are already white, and most glyphs leave four or more of their 13 rows blank.
 */
const INK_FROM = new Uint8Array(GLYPH_ROWS.length / GLYPH_HEIGHT);
const INK_TO = new Uint8Array(GLYPH_ROWS.length / GLYPH_HEIGHT);
for (let g = 0; g < INK_FROM.length; g++) {
  let from = GLYPH_HEIGHT;
  let to = 0;
  for (let r = 0; r < GLYPH_HEIGHT; r++) {
    if (GLYPH_ROWS[g * GLYPH_HEIGHT + r] === 0) continue;
    from = Math.min(from, r);
    to = r + 1;
  }
  INK_FROM[g] = to === 0 ? 0 : from;
  INK_TO[g] = to;
}

/** Inks glyph `cp`'s pixels into the scanlines with its glyph box's top left at pixel (x, y). */
function ink(buf: Uint8Array, stride: number, cp: number, x: number, y: number): void {
  const base = glyphIndex(cp) * GLYPH_HEIGHT;
  const byte = 1 + (x >> 3);
  const shift = x & 7;
  for (let r = 0; r < GLYPH_HEIGHT; r++) {
    const bits = GLYPH_ROWS[base + r]!;
    if (bits === 0) continue;
    const at = (y + r) * stride + byte;
    buf[at]! &= ~(bits >> shift);
    // 8-px glyphs straddle two bytes unless they start on a byte boundary.
    if (shift !== 0) buf[at + 1]! &= ~(bits << (8 - shift));
  }
}

/**
 * Draws the frame's scanlines into `buf` (at least stride × height bytes): white (bit 1) with
 * the glyphs inked black, a filter byte of 0 (None) before every row.
 *
 * Cell by cell, over only the rows of each glyph that have ink (the white fill drew the rest).
 * When every glyph box starts on a byte boundary (8-px cells) each byte belongs to one cell and
 * is simply stored; otherwise each glyph row is shifted and AND-ed into the two bytes it spans.
 * Measured (CPU time, full frames of archive text), this order is faster for every shape than
 * drawing a pixel row at a time across a whole row of cells, and a bit stream that stores every
 * byte once was slower still for 8-px cells.
 */
function drawInto(frame: Frame, buf: Uint8Array): void {
  const g = frame.geometry;
  const stride = scanlineBytes(frame.width);
  buf.fill(0xff, 0, stride * frame.height);
  for (let y = 0; y < frame.height; y++) buf[y * stride] = 0;
  const off = glyphOffset(g);
  const cols = frame.columns;
  const cells = frame.cells;
  const aligned = g.advance % 8 === 0 && off.x % 8 === 0;
  const step = g.advance >> 3;
  for (let i = 0; i < cells.length; i++) {
    const glyph = glyphIndex(cells[i]!);
    const from = INK_FROM[glyph]!;
    const to = INK_TO[glyph]!;
    if (to === 0) continue;
    const base = glyph * GLYPH_HEIGHT;
    const row = (i / cols) | 0;
    const col = i - row * cols;
    const top = (row * g.pitch + off.y + from) * stride + 1;
    if (aligned) {
      let at = top + (off.x >> 3) + col * step;
      for (let r = from; r < to; r++, at += stride) buf[at] = WHITE_ROWS[base + r]!;
      continue;
    }
    const x = col * g.advance + off.x;
    const shift = x & 7;
    let at = top + (x >> 3);
    for (let r = from; r < to; r++, at += stride) {
      const bits = GLYPH_ROWS[base + r]!;
      buf[at]! &= ~(bits >> shift);
      if (shift !== 0) buf[at + 1]! &= ~(bits << (8 - shift));
    }
  }
  for (const m of frame.marks) ink(buf, stride, m.mark, (m.cell % cols) * g.advance + off.x, Math.floor(m.cell / cols) * g.pitch + off.y);
}

/** The frame's scanlines (see drawInto), in a buffer of their own: for tests and the benchmark. */
export function drawFrame(frame: Frame): Buffer {
  // A plain Uint8Array, like the scratch buffer, so drawInto's element accesses only ever see one
  // kind of array (a Buffer is a subclass, and mixing the two made drawing measurably slower).
  const buf = new Uint8Array(scanlineBytes(frame.width) * frame.height);
  drawInto(frame, buf);
  return Buffer.from(buf.buffer, buf.byteOffset, buf.length);
}

/**
 * Scanlines of the frame being encoded. deflateSync has read them by the time it returns, so
 * one buffer, grown as needed, serves every frame and spares a large allocation per frame.
 */
let scratch = new Uint8Array(0);

export function renderFrame(frame: Frame): RenderedFrame {
  const size = scanlineBytes(frame.width) * frame.height;
  if (scratch.length < size) scratch = new Uint8Array(size);
  drawInto(frame, scratch);
  return {
    png: encodeBilevelPng(scratch.subarray(0, size), frame.width, frame.height),
    width: frame.width,
    height: frame.height,
    key: frameKey(frame.geometry, frame.text),
  };
}
