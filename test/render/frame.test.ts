// Frame encoding and cache keys: the PNG is a well-formed 1-bit grayscale file whose pixels are
// the ones sharp would have written, and the key changes with each thing the pixels depend on
// and with nothing else.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as zlib from 'node:zlib';
import sharp from 'sharp';
import { frameKey, GLYPH_TABLE_VERSION, layout, renderFrame, SHAPES } from '../../render/index.ts';
import { drawFrame } from '../../render/frame.ts';
import { bilevelToGray, crc32, scanlineBytes } from '../../render/png.ts';

interface Chunk {
  type: string;
  data: Buffer;
  crc: number;
}

function chunks(png: Buffer): Chunk[] {
  const out: Chunk[] = [];
  for (let at = 8; at < png.length;) {
    const len = png.readUInt32BE(at);
    out.push({ type: png.toString('latin1', at + 4, at + 8), data: png.subarray(at + 8, at + 8 + len), crc: png.readUInt32BE(at + 8 + len) });
    at += 12 + len;
  }
  return out;
}

const TEXT = '¶user: what does parse() return for ""?\n¶ai: null, see src/parse.ts:3\n'.repeat(80);

describe('frame PNG', () => {
  test('is 1-bit grayscale, with valid chunk CRCs, and the frame size', () => {
    const [f] = layout(TEXT, SHAPES.claude);
    const r = renderFrame(f!);
    assert.deepEqual([...r.png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    const cs = chunks(r.png);
    assert.deepEqual(cs.map((c) => c.type), ['IHDR', 'IDAT', 'IEND']);
    const ihdr = cs[0]!.data;
    assert.deepEqual([ihdr.readUInt32BE(0), ihdr.readUInt32BE(4), ihdr[8], ihdr[9], ihdr[12]], [f!.width, f!.height, 1, 0, 0]);
    assert.deepEqual([r.width, r.height], [f!.width, f!.height]);
    for (const c of cs) assert.equal(c.crc, crc32(Buffer.concat([Buffer.from(c.type, 'latin1'), c.data])), c.type);
    // Every scanline uses filter None.
    const raw = zlib.inflateSync(cs[1]!.data);
    const stride = scanlineBytes(f!.width);
    assert.equal(raw.length, stride * f!.height);
    for (let y = 0; y < f!.height; y++) assert.equal(raw[y * stride], 0);
  });

  test('crc32 agrees with the published check value', () => {
    // The CRC-32 of "123456789" is 0xCBF43926 (the standard check value of this polynomial).
    assert.equal(crc32(Buffer.from('123456789')), 0xcbf43926);
    // And with zlib's, which the encoder uses where Node has it, on other bytes.
    const bytes = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7919) & 0xff));
    if (typeof zlib.crc32 === 'function') assert.equal(crc32(bytes), zlib.crc32(bytes));
  });

  test("sharp decodes it to the same pixels as sharp's own 1-bit PNG of the same bitmap", async () => {
    const [f] = layout(TEXT, SHAPES.gpt);
    const ours = renderFrame(f!).png;
    const gray = bilevelToGray(drawFrame(f!), f!.width, f!.height);
    // Both black and white are there (the conversion did not flatten the bitmap).
    assert.ok(gray.includes(0) && gray.includes(255));
    const theirs = await sharp(gray, { raw: { width: f!.width, height: f!.height, channels: 1 } }).toColourspace('b-w').png({ colours: 2, palette: false }).toBuffer();
    const decode = async (png: Buffer): Promise<Buffer> => (await sharp(png).toColourspace('b-w').raw().toBuffer({ resolveWithObject: true })).data;
    const [a, b] = await Promise.all([decode(ours), decode(theirs)]);
    assert.ok(a.equals(b));
    assert.ok(a.equals(gray));
  });
});

describe('frame cache key', () => {
  const g = SHAPES.claude;
  const base = frameKey(g, 'some text');

  test('is stable: the same geometry and text give the same key, and it is a sha256', () => {
    assert.equal(frameKey({ ...g }, 'some text'), base);
    assert.match(base, /^[0-9a-f]{64}$/);
    const [f] = layout('some text', g);
    assert.equal(renderFrame(f!).key, base);
    assert.equal(GLYPH_TABLE_VERSION.length, 16);
  });

  test('changes with the text, each field of the geometry and the glyph table version', () => {
    const keys = [
      base,
      frameKey(g, 'some text', '0000000000000000'),
      frameKey(g, 'some text!'),
      frameKey({ ...g, advance: g.advance + 1 }, 'some text'),
      frameKey({ ...g, pitch: g.pitch + 1 }, 'some text'),
      frameKey({ ...g, frameWidth: g.frameWidth - 1 }, 'some text'),
      frameKey({ ...g, rows: g.rows - 1 }, 'some text'),
    ];
    assert.equal(new Set(keys).size, keys.length);
  });

  test('does not depend on where the frame stands in its layout', () => {
    // The same 30-cell stretch as the first and as the second frame of two texts.
    const small = { advance: 8, pitch: 13, frameWidth: 80, rows: 3 };
    const chunk = 'x'.repeat(30);
    const [, second] = layout(`${'y'.repeat(30)}${chunk}`, small);
    const [first] = layout(chunk, small);
    assert.equal(renderFrame(second!).key, renderFrame(first!).key);
    assert.ok(renderFrame(second!).png.equals(renderFrame(first!).png));
  });
});
