// fitImage on real images made with sharp: the size it picks (aspect kept, never up), the
// format it keeps, the byte limit it meets by quality or size, EXIF orientation, and failure.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import sharp from 'sharp';
import { fitImage, ImageFitError, MAX_FIT_ATTEMPTS, type FitLimits } from '../../daemon/image-resize.ts';
import { jpegBytes, pngBytes } from '../storage/factories.ts';

const NONE: FitLimits = { edgePx: 1_000_000, pixels: null, bytes: 1e12 };

/** Pseudo-random pixels: they compress like a photo, not like a flat colour. */
function noise(width: number, height: number, seed = 1): sharp.Sharp {
  const raw = Buffer.alloc(width * height * 3);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < raw.length; i++) {
    // xorshift32
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    raw[i] = x & 0xff;
  }
  return sharp(raw, { raw: { width, height, channels: 3 } });
}

async function formatOf(data: Buffer): Promise<{ format: string | undefined; width: number; height: number }> {
  const m = await sharp(data).metadata();
  return { format: m.format, width: m.width, height: m.height };
}

test('the longest edge is fitted with the aspect kept, and the PNG stays a PNG of the size it reports', async () => {
  const data = await pngBytes(3000, 1000);
  const out = await fitImage({ data, media_type: 'image/png', width: 3000, height: 1000 }, { ...NONE, edgePx: 900 });
  assert.deepEqual([out.width, out.height, out.media_type, out.attempts], [900, 300, 'image/png', 1]);
  assert.deepEqual(await formatOf(out.data), { format: 'png', width: 900, height: 300 });
});

test('a pixel limit scales both edges by the same factor, rounding down', async () => {
  const data = await pngBytes(1000, 700);
  const out = await fitImage({ data, media_type: 'image/png', width: 1000, height: 700 }, { ...NONE, pixels: 70_000 });
  assert.ok(out.width * out.height <= 70_000);
  assert.deepEqual([out.width, out.height], [316, 221]);
});

test('an image over the byte limit only keeps its size (never scaled up or down) when quality is enough', async () => {
  const data = await noise(400, 300).jpeg({ quality: 100 }).toBuffer();
  const limit = Math.floor(data.length / 2);
  const out = await fitImage({ data, media_type: 'image/jpeg', width: 400, height: 300 }, { ...NONE, bytes: limit });
  assert.ok(out.data.length <= limit, `${out.data.length} > ${limit}`);
  assert.deepEqual(await formatOf(out.data), { format: 'jpeg', width: 400, height: 300 });
});

test('a PNG over the byte limit is still a PNG under it, scaled down with its aspect kept', async () => {
  const data = await noise(300, 200).png().toBuffer();
  const limit = 30_000;
  const out = await fitImage({ data, media_type: 'image/png', width: 300, height: 200 }, { ...NONE, bytes: limit });
  assert.ok(out.data.length <= limit, `${out.data.length} > ${limit}`);
  const got = await formatOf(out.data);
  assert.equal(got.format, 'png');
  assert.ok(got.width < 300 && got.width > 50, `${got.width}x${got.height}`);
  assert.ok(Math.abs(got.width / got.height - 1.5) < 0.02);
  assert.ok(out.attempts > 1 && out.attempts <= MAX_FIT_ATTEMPTS);
});

test('JPEG, WebP and GIF keep their format', async () => {
  const cases: Array<[string, Buffer, string]> = [
    ['image/jpeg', await jpegBytes(800, 400), 'jpeg'],
    ['image/webp', await sharp({ create: { width: 800, height: 400, channels: 3, background: '#0a0' } }).webp().toBuffer(), 'webp'],
    ['image/gif', await sharp({ create: { width: 800, height: 400, channels: 3, background: '#00a' } }).gif().toBuffer(), 'gif'],
  ];
  for (const [media_type, data, format] of cases) {
    const out = await fitImage({ data, media_type, width: 800, height: 400 }, { ...NONE, edgePx: 200 });
    assert.equal(out.media_type, media_type);
    assert.deepEqual(await formatOf(out.data), { format, width: 200, height: 100 });
  }
});

test('an image shot sideways (EXIF orientation 6) comes out upright, fitted on its upright edges', async () => {
  const data = await noise(400, 200).withMetadata({ orientation: 6 }).jpeg().toBuffer();
  const out = await fitImage({ data, media_type: 'image/jpeg', width: 400, height: 200 }, { ...NONE, edgePx: 100 });
  assert.deepEqual([out.width, out.height], [50, 100]);
  const m = await sharp(out.data).metadata();
  assert.deepEqual([m.width, m.height, m.orientation], [50, 100, undefined]);
});

test('limits no encode can meet fail with ImageFitError after a bounded number of attempts', async () => {
  const data = await pngBytes(300, 200);
  await assert.rejects(fitImage({ data, media_type: 'image/png', width: 300, height: 200 }, { ...NONE, bytes: 10 }), (err: unknown) => {
    assert.ok(err instanceof ImageFitError);
    assert.match(err.message, new RegExp(`within ${MAX_FIT_ATTEMPTS} attempts`));
    return true;
  });
  await assert.rejects(fitImage({ data: Buffer.from('not an image'), media_type: 'image/png', width: 3, height: 2 }, NONE), ImageFitError);
});
