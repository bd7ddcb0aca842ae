// The PCF reader over tiny fonts written here in each storage variant the format allows (byte
// order, bit order, row padding, compressed or full metrics), so every variant is checked, not
// only the one xfonts-base ships. The real font is exercised by the glyph table test.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parsePcf } from '../../../scripts/font/pcf.ts';
import { glyphTable } from '../../../scripts/font/build-glyph-table.ts';

interface Variant {
  byteMsb: boolean;
  bitMsb: boolean;
  /** log2 of the row padding in bytes. */
  pad: 0 | 1 | 2 | 3;
  /** log2 of the scan unit in bytes. */
  scan: 0 | 1 | 2;
  compressed: boolean;
}

/** Two 8x13 glyphs ('A' and U+0301) and one 5-pixel-wide glyph ('i'), as row bit strings. */
const GLYPHS: Array<{ code: number; lsb: number; rsb: number; ascent: number; descent: number; rows: string[] }> = [
  { code: 0x41, lsb: 0, rsb: 8, ascent: 11, descent: 2, rows: ['00000000', '00000000', '00011000', '00100100', '01000010', '01000010', '01000010', '01111110', '01000010', '01000010', '01000010', '00000000', '00000000'] },
  { code: 0x301, lsb: 0, rsb: 8, ascent: 11, descent: 2, rows: ['00000000', '00001000', '00010000', '00000000', '00000000', '00000000', '00000000', '00000000', '00000000', '00000000', '00000000', '00000000', '00000000'] },
  // Narrower than its cell and starting one pixel in: the table must place it at x = 1..5.
  { code: 0x69, lsb: 1, rsb: 6, ascent: 9, descent: 0, rows: ['00100', '00000', '01100', '00100', '00100', '00100', '00100', '00100', '11111'] },
];

function writeFont(v: Variant): Buffer {
  const format = v.pad | (v.byteMsb ? 4 : 0) | (v.bitMsb ? 8 : 0) | (v.scan << 4);
  const int32 = (n: number): Buffer => {
    const b = Buffer.alloc(4);
    if (v.byteMsb) b.writeInt32BE(n);
    else b.writeInt32LE(n);
    return b;
  };
  const int16 = (n: number): Buffer => {
    const b = Buffer.alloc(2);
    if (v.byteMsb) b.writeInt16BE(n);
    else b.writeInt16LE(n);
    return b;
  };
  const le32 = (n: number): Buffer => {
    const b = Buffer.alloc(4);
    b.writeInt32LE(n);
    return b;
  };

  // Properties: two, so the records need two bytes of padding before the string pool.
  const pool = Buffer.from('CHARSET_REGISTRY\0ISO10646\0FONT_ASCENT\0', 'latin1');
  const prop = (name: number, isString: boolean, value: number): Buffer => Buffer.concat([int32(name), Buffer.from([isString ? 1 : 0]), int32(value)]);
  const properties = Buffer.concat([le32(format), int32(2), prop(0, true, 17), prop(26, false, 11), Buffer.alloc(2), int32(pool.length), pool]);

  const metricsBody = GLYPHS.map((g) =>
    v.compressed
      ? Buffer.from([g.lsb + 0x80, g.rsb + 0x80, 8 + 0x80, g.ascent + 0x80, g.descent + 0x80])
      : Buffer.concat([int16(g.lsb), int16(g.rsb), int16(8), int16(g.ascent), int16(g.descent), int16(0)])
  );
  const metricsFormat = format | (v.compressed ? 0x100 : 0);
  const metrics = Buffer.concat([le32(metricsFormat), v.compressed ? int16(GLYPHS.length) : int32(GLYPHS.length), ...metricsBody]);

  const padBytes = 1 << v.pad;
  const scanUnit = 1 << v.scan;
  const bitmapsOf = GLYPHS.map((g) => {
    const widthPx = g.rsb - g.lsb;
    const rowBytes = Math.ceil(Math.ceil(widthPx / 8) / padBytes) * padBytes;
    return Buffer.concat(
      g.rows.map((bits) => {
        const row = Buffer.alloc(rowBytes);
        for (let x = 0; x < widthPx; x++) if (bits[x] === '1') row[x >> 3]! |= v.bitMsb ? 0x80 >> (x & 7) : 1 << (x & 7);
        if (v.byteMsb !== v.bitMsb && scanUnit > 1) { for (let u = 0; u + scanUnit <= row.length; u += scanUnit) row.subarray(u, u + scanUnit).reverse(); }
        return row;
      }),
    );
  });
  const offsets: number[] = [];
  let total = 0;
  for (const b of bitmapsOf) {
    offsets.push(total);
    total += b.length;
  }
  const sizes = [0, 1, 2, 3].map((p) => (p === v.pad ? total : 0));
  const bitmaps = Buffer.concat([le32(format), int32(GLYPHS.length), ...offsets.map(int32), ...sizes.map(int32), ...bitmapsOf]);

  // Encodings: byte1 0..3, byte2 0x01..0x69; every code but our three is "no glyph".
  const [min2, max2, min1, max1] = [0x01, 0x69, 0, 3];
  const index: Buffer[] = [];
  for (let b1 = min1; b1 <= max1; b1++) {
    for (let b2 = min2; b2 <= max2; b2++) {
      const g = GLYPHS.findIndex((x) => x.code === b1 * 256 + b2);
      const u = Buffer.alloc(2);
      if (v.byteMsb) u.writeUInt16BE(g < 0 ? 0xffff : g);
      else u.writeUInt16LE(g < 0 ? 0xffff : g);
      index.push(u);
    }
  }
  const encodings = Buffer.concat([le32(format), int16(min2), int16(max2), int16(min1), int16(max1), int16(0x41), ...index]);

  const tables: Array<[number, number, Buffer]> = [
    [1, format, properties],
    [4, metricsFormat, metrics],
    [8, format, bitmaps],
    [32, format, encodings],
  ];
  let at = 8 + tables.length * 16;
  const toc: Buffer[] = [];
  for (const [type, f, body] of tables) {
    toc.push(le32(type), le32(f), le32(body.length), le32(at));
    at += body.length;
  }
  return Buffer.concat([le32(0x70636601), le32(tables.length), ...toc, ...tables.map((t) => t[2])]);
}

const VARIANTS: Variant[] = [
  { byteMsb: true, bitMsb: true, pad: 2, scan: 0, compressed: true }, // what xfonts-base ships
  { byteMsb: false, bitMsb: false, pad: 0, scan: 0, compressed: false },
  { byteMsb: false, bitMsb: true, pad: 1, scan: 1, compressed: true },
  { byteMsb: true, bitMsb: false, pad: 3, scan: 2, compressed: false },
];

describe('PCF reader', () => {
  for (const v of VARIANTS) {
    test(`reads properties, metrics, bitmaps and encodings (${JSON.stringify(v)})`, () => {
      const font = parsePcf(writeFont(v));
      assert.equal(font.properties.get('CHARSET_REGISTRY'), 'ISO10646');
      assert.equal(font.properties.get('FONT_ASCENT'), 11);
      assert.deepEqual([...font.glyphs.keys()].sort((a, b) => a - b), [0x41, 0x69, 0x301]);
      assert.equal(font.defaultChar, 0x41);
      for (const g of GLYPHS) {
        const got = font.glyphs.get(g.code)!;
        assert.deepEqual(got.metrics, { leftBearing: g.lsb, rightBearing: g.rsb, width: 8, ascent: g.ascent, descent: g.descent });
        assert.deepEqual(
          got.rows.map((r) => r.toString(2).padStart(g.rsb - g.lsb, '0')),
          g.rows,
        );
      }
    });
  }

  test('the table places a narrow glyph at its bearing and pads its missing rows', () => {
    const table = glyphTable(parsePcf(writeFont(VARIANTS[0]!)));
    // U+0041, U+0069 and U+0301 are not consecutive: three ranges of one glyph each.
    assert.equal(table.readUInt16BE(0), 3);
    const rows = (k: number): string[] => [...table.subarray(2 + 3 * 4 + k * 13, 2 + 3 * 4 + (k + 1) * 13)].map((b) => b.toString(2).padStart(8, '0'));
    // 'i' has ascent 9 and no descent: two blank rows above, two below, shifted right by 1.
    assert.deepEqual(rows(1), ['00000000', '00000000', '00010000', '00000000', '00110000', '00010000', '00010000', '00010000', '00010000', '00010000', '01111100', '00000000', '00000000']);
  });

  test('a file that is not PCF, or that lacks a table, is refused', () => {
    assert.throws(() => parsePcf(Buffer.from('not a font at all')), /bad magic/);
    const broken = writeFont(VARIANTS[0]!);
    broken.writeInt32LE(2, 8 + 3 * 16); // the encodings table now claims to be accelerators
    assert.throws(() => parsePcf(broken), /no encodings table/);
  });
});
