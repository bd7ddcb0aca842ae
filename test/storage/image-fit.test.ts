// The fit cache and the oversize search: what the search lists (each occurrence, notice rows
// included, only over the limits, only in range, in windows), and that the cache never keeps a
// payload alive: collecting an unnamed payload takes its cache rows with it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cachedFit, fitChecked, FIT_SCAN_ROWS, oversizedImages, saveFit, saveFitChecked, type SqlLimits } from '../../storage/images/fit.ts';
import { collectPayloadGarbage, hasPayload, putPayload } from '../../storage/images/payloads.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendNotice, appendRows } from '../../storage/transcript/write.ts';
import { imageIn, pngBytes, tempDb, user } from './factories.ts';
import { recordWriteLevels } from './recording-db.ts';

const LIMITS: SqlLimits = { edgePx: 100, pixels: null, bytes: 1e9 };

test('the search lists every row naming an image over the limits, fit notices too, within its range', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const big = await pngBytes(150, 20);
  const small = await pngBytes(50, 20);
  const { seqs } = await appendRows(db, 's', [
    user('big', { images: [imageIn(big, 'image/png')] }),
    user('small', { images: [imageIn(small, 'image/png')] }),
    user('big again', { images: [imageIn(big, 'image/png')] }),
  ]);
  const found = oversizedImages(db, sid, 0, seqs[2]!, LIMITS);
  assert.deepEqual(found.refs.map((r) => [r.seq, r.width, r.height]), [
    [seqs[0], 150, 20],
    [seqs[2], 150, 20],
  ]);
  assert.equal(found.next, seqs[2]);
  assert.deepEqual(oversizedImages(db, sid, seqs[0]!, seqs[1]!, LIMITS).refs, []);
  // A fit notice names its result: an oversized result is listed at the notice's seq.
  const bigHash = found.refs[0]!.hash;
  const fitted = { type: 'image' as const, hash: 'c'.repeat(64), media_type: 'image/png', width: 120, height: 16 };
  putPayload(db, fitted.hash, 'image/png', 120, 16, Buffer.from('x'));
  const notice = appendNotice(db, sid, { notice: 'image_fit', from_hash: bigHash, to: fitted, reason: 'test' });
  assert.deepEqual(oversizedImages(db, sid, seqs[2]!, notice, LIMITS).refs.map((r) => [r.seq, r.hash]), [[notice, fitted.hash]]);
  // By bytes alone (the fake fitted payload is 1 byte), and by pixels (the small one has 1000).
  const seqsOf = (l: SqlLimits) => oversizedImages(db, sid, 0, notice, l).refs.map((r) => r.seq);
  assert.deepEqual(seqsOf({ edgePx: 1000, pixels: null, bytes: small.length - 1 }), [...seqs]);
  assert.deepEqual(seqsOf({ edgePx: 1000, pixels: 1000, bytes: 1e9 }), [seqs[0], seqs[2], notice]);
});

test('a long range is searched in windows of the session index', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const rows = Array.from({ length: FIT_SCAN_ROWS + 10 }, (_, i) => user(`row ${i}`));
  const { seqs } = await appendRows(db, 's', rows);
  const head = seqs[seqs.length - 1]!;
  const first = oversizedImages(db, sid, 0, head, LIMITS);
  assert.equal(first.next, seqs[FIT_SCAN_ROWS - 1]);
  assert.equal(oversizedImages(db, sid, first.next, head, LIMITS).next, head);
});

test('cached fits never keep a payload: collecting it drops the cache row', async (t) => {
  const db = tempDb(t);
  putPayload(db, 'a'.repeat(64), 'image/png', 9000, 9000, Buffer.from('a'));
  putPayload(db, 'b'.repeat(64), 'image/png', 8000, 8000, Buffer.from('b'));
  saveFit(db, 'a'.repeat(64), 'k', 'b'.repeat(64));
  assert.deepEqual(cachedFit(db, 'a'.repeat(64), 'k'), { type: 'image', hash: 'b'.repeat(64), media_type: 'image/png', width: 8000, height: 8000 });
  assert.equal(cachedFit(db, 'a'.repeat(64), 'other limits'), undefined);
  assert.equal(collectPayloadGarbage(db), 2, 'neither payload is named by a row or a pin');
  assert.equal(hasPayload(db, 'b'.repeat(64)), false);
  assert.equal(db.prepare('SELECT count(*) FROM image_fits').pluck().get(), 0);
});

test('how far a session is known to fit is remembered without an fsync, on a connection at FULL too', (t) => {
  const db = tempDb(t);
  db.pragma('synchronous = FULL');
  const { sid } = openSession(db, { session: 's' });
  const levels = recordWriteLevels(db, 'image_fit_checked');
  saveFitChecked(db, sid, 'limits', 42, 3);
  assert.deepEqual(levels, [1], 'written at NORMAL');
  assert.equal(db.pragma('synchronous', { simple: true }), 2, 'and the level put back');
  assert.deepEqual(fitChecked(db, sid, 'limits'), { through: 42, rewrites: 3 });
});
