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

/** Clears (inks) glyph `cp`'s pixels into the scanlines at pixel (x, y) of the cell's glyph box. */
function ink(buf: Buffer, stride: number, cp: number, x: number, y: number): void {
  const base = glyphIndex(cp) * GLYPH_HEIGHT;
  const byte = 1 + (x >> 3);
  const shift = x & 7;
  for (let r = 0; r < GLYPH_HEIGHT; r++) {
    const bits = GLYPH_ROWS[base + r]!;
    if (bits === 0) continue;
    const at = (y + r) * stride + byte;
    buf[at]! &= ~(bits >> shift);
    // 8-px glyphs straddle two bytes unless the cell starts on a byte boundary.
    if (shift !== 0) buf[at + 1]! &= ~(bits << (8 - shift));
  }
}

/**
 * The frame's scanlines: white (bit 1) with the glyphs inked black, a filter byte of 0 (None)
 * before every row. Exported for the benchmark, which compresses the same bytes alone.
 */
export function drawFrame(frame: Frame): Buffer {
  const g = frame.geometry;
  const stride = scanlineBytes(frame.width);
  const buf = Buffer.alloc(stride * frame.height, 0xff);
  for (let y = 0; y < frame.height; y++) buf[y * stride] = 0;
  const off = glyphOffset(g);
  const cols = frame.columns;
  for (let i = 0; i < frame.cells.length; i++) {
    const cp = frame.cells[i]!;
    if (cp === 0x20) continue;
    ink(buf, stride, cp, (i % cols) * g.advance + off.x, Math.floor(i / cols) * g.pitch + off.y);
  }
  for (const m of frame.marks) ink(buf, stride, m.mark, (m.cell % cols) * g.advance + off.x, Math.floor(m.cell / cols) * g.pitch + off.y);
  return buf;
}

export function renderFrame(frame: Frame): RenderedFrame {
  return {
    png: encodeBilevelPng(drawFrame(frame), frame.width, frame.height),
    width: frame.width,
    height: frame.height,
    key: frameKey(frame.geometry, frame.text),
  };
}
