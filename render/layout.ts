// Text to cells to frames. Every character the renderer meets becomes zero, one or (a tab) a
// few cells of the 8x13 font; the cells fill rows left to right, wrapping at the last whole
// cell, and the rows fill frames. Drawing and encoding the cells is frame.ts's job.
//
// Rules, in the order they are tried for each code point of the NFC-normalized text:
//   1. A newline (LF, or CR LF as one) is one cell, drawn as ⏎, and not a row break: packed
//      text is what makes a frame carry more text than its image tokens would (DESIGN.md,
//      Rendering), and the ⏎ keeps the line structure readable.
//   2. A tab is TAB_CELLS blank cells, fewer when the row ends first. Tab stops would mean
//      nothing in packed text (lines start anywhere in a row), a fixed width keeps indentation
//      depth readable, and never running into the next row keeps each frame self-contained.
//   3. Other controls draw as their control picture (U+2400 + c, ␡ for DEL); C1 controls have
//      none and draw as U+FFFD.
//   4. A combining mark the font has is drawn over the cell before it (its bitmap OR-ed in);
//      only at the very start of the text, with no cell before it, does it get its own cell.
//   5. Any other character the font has takes one cell.
//   6. A character the font lacks that has no visible form anyway (default-ignorable code
//      points such as ZWJ and variation selectors, emoji skin-tone modifiers) is left out.
//   7. Anything else the font lacks (CJK, emoji, most scripts past the font) draws as U+FFFD;
//      the transcript tools still have the real text.
//
// Frames start on row boundaries and every rule above reads nothing before the current row,
// so a frame's pixels follow from its own text and the geometry alone: that is what lets the
// cache key be a hash of exactly those (frame.ts), and what keeps the leading frames of an
// archive identical when more text is appended to it.
import { clampGeometry, columnsOf, Geometry } from './geometry.ts';
import { hasGlyph, isFontMark } from './glyphs.ts';

/** Cells a tab takes (fewer at the end of a row). */
export const TAB_CELLS = 2;
/** What a newline draws as: RETURN SYMBOL. */
export const NEWLINE_GLYPH = 0x23ce;
/** What a character the font lacks draws as: REPLACEMENT CHARACTER. */
export const MISSING_GLYPH = 0xfffd;
const SPACE = 0x20;

/** A combining mark drawn over a cell. */
export interface FrameMark {
  /** Index of the cell in its frame, row-major. */
  cell: number;
  /** The mark's code point (always one the glyph table has). */
  mark: number;
}

export interface Frame {
  /** Position of the frame in its layout, from 0. */
  index: number;
  /** The stretch of the NFC-normalized text this frame draws. */
  text: string;
  /** Where `text` starts in the normalized text, in UTF-16 code units. */
  start: number;
  /** The geometry it was laid out with (already clamped, when it was). */
  geometry: Geometry;
  /** Cells per row. */
  columns: number;
  /** Rows of cells drawn: `geometry.rows` except in a last, shorter frame. */
  rows: number;
  /** Size of the image, in pixels: columns × advance by rows × pitch. */
  width: number;
  height: number;
  /** The code point drawn in each cell, row-major; each one the glyph table has. */
  cells: Uint16Array;
  /** Marks drawn over cells, in cell order. */
  marks: readonly FrameMark[];
}

export interface LayoutOptions {
  /** The upstream's largest image edge in pixels; the geometry is clamped to it (clampGeometry). */
  maxEdgePx?: number;
}

const INVISIBLE = /^[\p{Default_Ignorable_Code_Point}\p{Emoji_Modifier}]$/u;

function controlPicture(cp: number): number {
  const picture = cp === 0x7f ? 0x2421 : cp < 0x20 ? 0x2400 + cp : MISSING_GLYPH;
  return hasGlyph(picture) ? picture : MISSING_GLYPH;
}

function isControl(cp: number): boolean {
  return cp < 0x20 || (cp >= 0x7f && cp < 0xa0);
}

/**
 * Lays `text` out into frames of `geometry` (clamped to `maxEdgePx` when given). Empty text
 * (or text of nothing but left-out characters) gives no frames. The frames' `text` fields,
 * joined, are the whole normalized text.
 */
export function layout(text: string, geometry: Geometry, options: LayoutOptions = {}): Frame[] {
  return [...layoutFrames(text, geometry, options)];
}

/**
 * `layout`, one frame at a time: a caller can stop after the frames it needs, or hand the loop
 * a turn between frames (a long archive is hundreds of frames). Only the frame being filled is
 * held as cells, never the whole text's. The text may come in pieces, laid out as if joined
 * (the frames and their offsets are the same) but never joined: each piece after the first must
 * start with a newline or follow one that ends with a newline.
 */
export function* layoutFrames(text: string | Iterable<string>, geometry: Geometry, options: LayoutOptions = {}): Generator<Frame, void, undefined> {
  const g = options.maxEdgePx === undefined ? Geometry.parse(geometry) : clampGeometry(geometry, options.maxEdgePx);
  const columns = columnsOf(g);
  const perFrame = columns * g.rows;

  let index = 0;
  /** Where the frame being filled starts in the normalized text. */
  let start = 0;
  /** Its normalized text in the segments before the current one. */
  let carried = '';
  let cells = new Uint16Array(perFrame);
  let marks: FrameMark[] = [];
  /** Cells of the frame being filled. */
  let n = 0;
  const frame = (frameText: string, filled: Uint16Array): Frame => {
    const rows = Math.ceil(n / columns);
    return { index, text: frameText, start, geometry: g, columns, rows, width: columns * g.advance, height: rows * g.pitch, cells: filled, marks };
  };
  /** Where the current segment starts in the normalized text. */
  let base = 0;
  for (const segment of newlineSegments(typeof text === 'string' ? [text] : text)) {
    const norm = segment.normalize('NFC');
    /** Where the frame being filled starts in this segment (0 when it started before it). */
    let from = 0;
    for (let i = 0; i < norm.length;) {
      const cp = norm.codePointAt(i)!;
      let len = cp > 0xffff ? 2 : 1;
      let glyph: number;
      let span = 1;
      if (cp === 0x0a) glyph = NEWLINE_GLYPH;
      else if (cp === 0x0d && norm.charCodeAt(i + 1) === 0x0a) {
        glyph = NEWLINE_GLYPH;
        len = 2;
      } else if (cp === 0x09) {
        glyph = SPACE;
        span = Math.min(TAB_CELLS, columns - (n % columns));
      } else if (isControl(cp)) glyph = controlPicture(cp);
      else if (hasGlyph(cp)) {
        // Over the cell before it, which may be the last of a full frame not yet given out
        // (a frame is only given out when its successor's first cell arrives, so n is 0 here
        // only at the very start of the text).
        if (isFontMark(cp) && n > 0) {
          marks.push({ cell: n - 1, mark: cp });
          i += len;
          continue;
        }
        glyph = cp;
      } else if (INVISIBLE.test(String.fromCodePoint(cp))) {
        i += len;
        continue;
      } else glyph = MISSING_GLYPH;
      // A full frame is given out when its next cell arrives: the character that starts the
      // next row ends it, and whatever was left out or drawn over before that stays in its
      // text. A tab never runs into the next row, so a row always starts at a character's
      // first cell.
      if (n === perFrame) {
        yield frame(carried + norm.slice(from, i), cells);
        index++;
        start = base + i;
        carried = '';
        from = i;
        cells = new Uint16Array(perFrame);
        marks = [];
        n = 0;
      }
      for (let k = 0; k < span; k++) cells[n++] = glyph;
      i += len;
    }
    carried += norm.slice(from);
    base += norm.length;
  }
  if (n > 0) yield frame(carried, cells.slice(0, n));
}

/** Characters normalized at a time, about: a long archive is never normalized in one call. */
const SEGMENT_CHARS = 1 << 16;

/**
 * The joined `pieces` in segments of about SEGMENT_CHARS that each end just after a newline or
 * just before one (where a piece ends), the last wherever the text ends. A newline composes
 * with nothing and nothing reorders across it, so the segments normalized one by one and joined
 * are the whole text normalized. A CR that ends a piece goes with the next one, so that a CR LF
 * split between two pieces is still one newline.
 */
function* newlineSegments(pieces: Iterable<string>): Generator<string, void, undefined> {
  // A CR at a piece's end waits for the next piece, whose LF it may pair with.
  let carried = '';
  for (const piece of pieces) {
    let text = carried + piece;
    carried = '';
    if (text.endsWith('\r')) {
      carried = '\r';
      text = text.slice(0, -1);
    }
    for (let at = 0; at < text.length;) {
      const newline = text.indexOf('\n', at + SEGMENT_CHARS);
      const end = newline < 0 ? text.length : newline + 1;
      yield text.slice(at, end);
      at = end;
    }
  }
  if (carried !== '') yield carried;
}

/** What a frame shows, as text: each cell's code point followed by the marks drawn over it. */
export function drawnText(frame: Frame): string {
  let out = '';
  let m = 0;
  for (let i = 0; i < frame.cells.length; i++) {
    out += String.fromCharCode(frame.cells[i]!);
    for (; m < frame.marks.length && frame.marks[m]!.cell === i; m++) out += String.fromCharCode(frame.marks[m]!.mark);
  }
  return out;
}
