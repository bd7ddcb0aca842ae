// Image payloads: strict decoding, format checks against the claimed media type, the size
// limit, references by hash, storage, pins and garbage collection.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { AlbedoError, type DomainCodeName } from '../../protocol/errors.ts';
import { collectPayloadGarbage, getPayload, pinPayload, prepareImage, putPayload, unpinPayloads } from '../../storage/images/payloads.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { count, imageIn, jpegBytes, pngBytes, tempDb } from './factories.ts';

const LIMIT = { maxBytes: 1024 * 1024 };

function fails(code: DomainCodeName, message?: RegExp) {
  return (e: unknown) => e instanceof AlbedoError && e.code === code && (message === undefined || message.test(e.message));
}

test('a PNG upload is hashed and measured and its bytes are handed back for storing', async (t) => {
  const db = tempDb(t);
  const bytes = await pngBytes(7, 3);
  const prepared = await prepareImage(imageIn(bytes, 'image/png'), LIMIT, db);
  assert.deepEqual(prepared.part, {
    type: 'image',
    hash: createHash('sha256').update(bytes).digest('hex'),
    media_type: 'image/png',
    width: 7,
    height: 3,
  });
  assert.ok(prepared.bytes?.equals(bytes));
});

test('base64 split over lines is accepted', async (t) => {
  const db = tempDb(t);
  const bytes = await jpegBytes(8, 8);
  const wrapped = bytes.toString('base64').replace(/.{60}/g, '$&\r\n');
  const prepared = await prepareImage({ type: 'image', media_type: 'image/jpeg', data: wrapped }, LIMIT, db);
  assert.equal(prepared.part.width, 8);
});

test('bytes already stored are not handed back again', async (t) => {
  const db = tempDb(t);
  const bytes = await pngBytes(4, 4);
  const first = await prepareImage(imageIn(bytes, 'image/png'), LIMIT, db);
  putPayload(db, first.part.hash, 'image/png', 4, 4, bytes);
  const again = await prepareImage(imageIn(bytes, 'image/png'), LIMIT, db);
  assert.equal(again.bytes, null);
  assert.deepEqual(again.part, first.part);
});

test('bytes that are not an image but claim PNG are an invalid_image', async (t) => {
  const db = tempDb(t);
  const junk = Buffer.from('this is certainly not a png file, just some text');
  await assert.rejects(prepareImage(imageIn(junk, 'image/png'), LIMIT, db), fails('invalid_image', /not a valid PNG/));
});

test('JPEG bytes claiming PNG are an invalid_image that says what they are', async (t) => {
  const db = tempDb(t);
  const jpeg = await jpegBytes(4, 4);
  await assert.rejects(
    prepareImage(imageIn(jpeg, 'image/png'), LIMIT, db),
    fails('invalid_image', /^image data is not a valid PNG \(it looks like JPEG\)$/),
  );
});

test('base64 that does not round-trip is rejected', async (t) => {
  const db = tempDb(t);
  const b64 = (await pngBytes(4, 4)).toString('base64');
  const unpadded = b64.replace(/=+$/, '');
  assert.notEqual(unpadded, b64, 'fixture needs padding');
  await assert.rejects(
    prepareImage({ type: 'image', media_type: 'image/png', data: unpadded }, LIMIT, db),
    fails('invalid_image', /base64/),
  );
});

test('an image over the limit is image_too_large with its size and the limit', async (t) => {
  const db = tempDb(t);
  const bytes = await pngBytes(64, 64);
  await assert.rejects(
    prepareImage(imageIn(bytes, 'image/png'), { maxBytes: bytes.length - 1 }, db),
    (e: unknown) =>
      fails('image_too_large')(e) &&
      (e as AlbedoError).details?.bytes === bytes.length &&
      (e as AlbedoError).details?.limit_bytes === bytes.length - 1,
  );
  const ok = await prepareImage(imageIn(bytes, 'image/png'), { maxBytes: bytes.length }, db);
  assert.equal(ok.part.width, 64, 'exactly at the limit is accepted');
});

test('a part by hash resolves to the stored payload; an unknown hash is unknown_payload', async (t) => {
  const db = tempDb(t);
  const bytes = await pngBytes(6, 2);
  const hash = createHash('sha256').update(bytes).digest('hex');
  await assert.rejects(prepareImage({ type: 'image', hash }, LIMIT, db), fails('unknown_payload'));
  putPayload(db, hash, 'image/png', 6, 2, bytes);
  const ref = await prepareImage({ type: 'image', hash }, LIMIT, db);
  assert.deepEqual(ref, { part: { type: 'image', hash, media_type: 'image/png', width: 6, height: 2 }, bytes: null });
  const got = getPayload(db, hash);
  assert.ok(got?.data.equals(bytes));
  assert.equal(got?.media_type, 'image/png');
});

test('garbage collection keeps pinned payloads until they are unpinned', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const a = await pngBytes(2, 2);
  const b = await pngBytes(3, 3);
  const ha = createHash('sha256').update(a).digest('hex');
  const hb = createHash('sha256').update(b).digest('hex');
  putPayload(db, ha, 'image/png', 2, 2, a);
  putPayload(db, hb, 'image/png', 3, 3, b);
  pinPayload(db, sid, ha);
  pinPayload(db, sid, ha);
  assert.equal(count(db, 'SELECT count(*) FROM payload_refs'), 1, 'pinning twice records one pin');
  assert.equal(collectPayloadGarbage(db), 1);
  assert.ok(getPayload(db, ha));
  assert.equal(getPayload(db, hb), undefined);
  assert.equal(unpinPayloads(db, sid), 1);
  assert.equal(collectPayloadGarbage(db), 1);
  assert.equal(getPayload(db, ha), undefined);
});
