// A reader for X11 PCF bitmap fonts, enough to lift a character-cell font into our glyph table:
// the properties, metrics, bitmaps and encodings tables. Accelerators, ink metrics, glyph names
// and scalable widths are skipped; nothing here knows about the table we write (see
// build-glyph-table.ts).
//
// The format, in short: a "\x01fcp" header and a table of contents (type, format, size, offset,
// all little-endian). Each table starts again with its format word (always little-endian),
// whose bits say how the rest of that table is stored: byte order of its integers (bit 2),
// bit order inside bitmap bytes (bit 3), padding of each bitmap row (bits 0-1: 1, 2, 4 or 8
// bytes) and the scan unit that byte order applies to in bitmaps (bits 4-5). Metrics come
// "compressed" (five biased bytes) when bit 8 is set.

const PCF_MAGIC = 0x70636601;

const TABLE = {
  properties: 1 << 0,
  metrics: 1 << 2,
  bitmaps: 1 << 3,
  encodings: 1 << 5,
} as const;

const FORMAT_COMPRESSED_METRICS = 0x100;
const FORMAT_BYTE_MSB = 1 << 2;
const FORMAT_BIT_MSB = 1 << 3;
/** An encodings entry meaning "no glyph for this code". */
const NO_GLYPH = 0xffff;

export interface PcfMetrics {
  /** Pixels from the origin to the bitmap's left edge (may be negative). */
  leftBearing: number;
  /** Pixels from the origin to the bitmap's right edge. */
  rightBearing: number;
  /** Advance in pixels. */
  width: number;
  /** Rows above the baseline. */
  ascent: number;
  /** Rows below the baseline. */
  descent: number;
}

export interface PcfGlyph {
  metrics: PcfMetrics;
  /**
   * One entry per bitmap row (ascent + descent rows), each the row's pixels as an integer with
   * the leftmost pixel in bit (bitmap width - 1): MSB-first, padding stripped.
   */
  rows: number[];
}

export interface PcfFont {
  /** Integer and string properties by name (FONT, FONT_ASCENT, CHARSET_REGISTRY, COPYRIGHT...). */
  properties: Map<string, string | number>;
  /** Glyphs by code: byte1 * 256 + byte2, which is the Unicode code point for ISO10646 fonts. */
  glyphs: Map<number, PcfGlyph>;
  /** The code the font names for missing characters, or undefined when it names none. */
  defaultChar: number | undefined;
}

/** A view over one table that reads integers in the table's own byte order. */
class TableReader {
  private pos: number;
  readonly format: number;
  private readonly msb: boolean;

  constructor(
    private readonly buf: Buffer,
    offset: number,
  ) {
    this.format = buf.readInt32LE(offset);
    this.msb = (this.format & FORMAT_BYTE_MSB) !== 0;
    this.pos = offset + 4;
  }

  get offset(): number {
    return this.pos;
  }

  seek(pos: number): void {
    this.pos = pos;
  }

  int32(): number {
    const v = this.msb ? this.buf.readInt32BE(this.pos) : this.buf.readInt32LE(this.pos);
    this.pos += 4;
    return v;
  }

  int16(): number {
    const v = this.msb ? this.buf.readInt16BE(this.pos) : this.buf.readInt16LE(this.pos);
    this.pos += 2;
    return v;
  }

  uint16(): number {
    const v = this.msb ? this.buf.readUInt16BE(this.pos) : this.buf.readUInt16LE(this.pos);
    this.pos += 2;
    return v;
  }

  uint8(): number {
    const v = this.buf.readUInt8(this.pos);
    this.pos += 1;
    return v;
  }
}

interface TocEntry {
  type: number;
  format: number;
  size: number;
  offset: number;
}

function readToc(buf: Buffer): TocEntry[] {
  if (buf.length < 8 || buf.readUInt32LE(0) !== PCF_MAGIC) throw new Error('not a PCF font (bad magic)');
  const count = buf.readInt32LE(4);
  const toc: TocEntry[] = [];
  for (let i = 0; i < count; i++) {
    const at = 8 + i * 16;
    toc.push({ type: buf.readInt32LE(at), format: buf.readInt32LE(at + 4), size: buf.readInt32LE(at + 8), offset: buf.readInt32LE(at + 12) });
  }
  return toc;
}

function table(buf: Buffer, toc: readonly TocEntry[], type: number, name: string): TableReader {
  const entry = toc.find((t) => t.type === type);
  if (entry === undefined) throw new Error(`PCF font has no ${name} table`);
  if (entry.offset + entry.size > buf.length) throw new Error(`PCF ${name} table runs past the end of the file`);
  const r = new TableReader(buf, entry.offset);
  if (r.format !== entry.format) throw new Error(`PCF ${name} table format ${r.format} differs from its table of contents (${entry.format})`);
  return r;
}

function readProperties(buf: Buffer, r: TableReader): Map<string, string | number> {
  const n = r.int32();
  const raw: Array<{ name: number; isString: boolean; value: number }> = [];
  for (let i = 0; i < n; i++) raw.push({ name: r.int32(), isString: r.uint8() !== 0, value: r.int32() });
  // The property records are padded to a multiple of four bytes before the string pool.
  if ((n & 3) !== 0) r.seek(r.offset + 4 - (n & 3));
  const poolSize = r.int32();
  const pool = r.offset;
  const str = (at: number): string => {
    if (at < 0 || at >= poolSize) throw new Error('PCF property string offset out of range');
    const end = buf.indexOf(0, pool + at);
    return buf.toString('latin1', pool + at, end < 0 ? pool + poolSize : end);
  };
  const props = new Map<string, string | number>();
  for (const p of raw) props.set(str(p.name), p.isString ? str(p.value) : p.value);
  return props;
}

function readMetrics(r: TableReader): PcfMetrics[] {
  const compressed = (r.format & FORMAT_COMPRESSED_METRICS) !== 0;
  const n = compressed ? r.int16() : r.int32();
  const out: PcfMetrics[] = [];
  for (let i = 0; i < n; i++) {
    if (compressed) {
      out.push({ leftBearing: r.uint8() - 0x80, rightBearing: r.uint8() - 0x80, width: r.uint8() - 0x80, ascent: r.uint8() - 0x80, descent: r.uint8() - 0x80 });
    } else {
      const m = { leftBearing: r.int16(), rightBearing: r.int16(), width: r.int16(), ascent: r.int16(), descent: r.int16() };
      r.uint16(); // attributes, unused
      out.push(m);
    }
  }
  return out;
}

/** Reverses the bit order of one byte. */
function reverseBits(b: number): number {
  let out = 0;
  for (let i = 0; i < 8; i++) out |= ((b >> i) & 1) << (7 - i);
  return out;
}

function readBitmaps(buf: Buffer, r: TableReader, metrics: readonly PcfMetrics[]): number[][] {
  const n = r.int32();
  if (n !== metrics.length) throw new Error(`PCF has ${metrics.length} metrics but ${n} bitmaps`);
  const offsets: number[] = [];
  for (let i = 0; i < n; i++) offsets.push(r.int32());
  const sizes = [r.int32(), r.int32(), r.int32(), r.int32()];
  const padIndex = r.format & 3;
  const pad = 1 << padIndex;
  const scanUnit = 1 << ((r.format >> 4) & 3);
  const bitMsb = (r.format & FORMAT_BIT_MSB) !== 0;
  const byteMsb = (r.format & FORMAT_BYTE_MSB) !== 0;
  const data = r.offset;
  const dataSize = sizes[padIndex]!;
  if (data + dataSize > buf.length) throw new Error('PCF bitmap data runs past the end of the file');

  return metrics.map((m, g) => {
    const widthPx = m.rightBearing - m.leftBearing;
    const height = m.ascent + m.descent;
    const rowBytes = Math.ceil(Math.ceil(widthPx / 8) / pad) * pad;
    const start = data + offsets[g]!;
    const rows: number[] = [];
    for (let y = 0; y < height; y++) {
      const row = Buffer.from(buf.subarray(start + y * rowBytes, start + (y + 1) * rowBytes));
      // Byte order only matters inside a scan unit, and only when it differs from bit order
      // (the X server's own rule: such a font was written by a machine of the other sex).
      if (byteMsb !== bitMsb && scanUnit > 1) {
        for (let u = 0; u + scanUnit <= row.length; u += scanUnit) row.subarray(u, u + scanUnit).reverse();
      }
      let bits = 0;
      for (let x = 0; x < widthPx; x++) {
        const byte = row[x >> 3]!;
        const b = bitMsb ? byte : reverseBits(byte);
        const on = (b >> (7 - (x & 7))) & 1;
        bits = bits * 2 + on;
      }
      rows.push(bits);
    }
    return rows;
  });
}

function readEncodings(r: TableReader): { codes: Array<[number, number]>; defaultChar: number } {
  const minByte2 = r.int16();
  const maxByte2 = r.int16();
  const minByte1 = r.int16();
  const maxByte1 = r.int16();
  const defaultChar = r.int16() & 0xffff;
  const codes: Array<[number, number]> = [];
  for (let b1 = minByte1; b1 <= maxByte1; b1++) {
    for (let b2 = minByte2; b2 <= maxByte2; b2++) {
      const glyph = r.uint16();
      if (glyph !== NO_GLYPH) codes.push([b1 * 256 + b2, glyph]);
    }
  }
  return { codes, defaultChar };
}

/** Parses an uncompressed PCF file (gunzip a .pcf.gz first). */
export function parsePcf(buf: Buffer): PcfFont {
  const toc = readToc(buf);
  const properties = readProperties(buf, table(buf, toc, TABLE.properties, 'properties'));
  const metrics = readMetrics(table(buf, toc, TABLE.metrics, 'metrics'));
  const bitmaps = readBitmaps(buf, table(buf, toc, TABLE.bitmaps, 'bitmaps'), metrics);
  const { codes, defaultChar } = readEncodings(table(buf, toc, TABLE.encodings, 'encodings'));
  const glyphs = new Map<number, PcfGlyph>();
  for (const [code, g] of codes) {
    const m = metrics[g];
    const rows = bitmaps[g];
    if (m === undefined || rows === undefined) throw new Error(`PCF encoding of ${code} points at missing glyph ${g}`);
    glyphs.set(code, { metrics: m, rows });
  }
  return { properties, glyphs, defaultChar: glyphs.has(defaultChar) ? defaultChar : undefined };
}
