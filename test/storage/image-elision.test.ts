// Image elision in storage: batches over the scheduled range, marks added without touching the
// rest of a row, references and payloads dropped together, other sessions and user uploads
// left alone, and a job cut short between batches finished on the next open.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createHash } from 'node:crypto';
import { openDb, type Db } from '../../storage/db.ts';
import { getPayload, putPayload } from '../../storage/images/payloads.ts';
import { elideBatch, elisionStats, pendingElisions, scheduleElision } from '../../storage/images/elision.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendNotice, appendRows } from '../../storage/transcript/write.ts';
import { readTranscript } from '../../storage/transcript/read.ts';
import { ELIDED_IMAGE_TEXT } from '../../storage/transcript/row-text.ts';
import { assistant, count, imageIn, pngBytes, rowsOf, tempDbWithPath, toolResult, user } from './factories.ts';
import { recordingDb } from './recording-db.ts';

/** A session of `n` turns, each a user input, a call and a result with its own screenshot. */
async function screenshots(db: Db, session: string, n: number, offset = 0): Promise<number[]> {
  openSession(db, { session });
  const resultSeqs: number[] = [];
  for (let i = offset; i < offset + n; i++) {
    const upload = i % 4 === 0 ? [imageIn(await pngBytes(30 + i, 20, { r: 1, g: 2, b: i }), 'image/png')] : [];
    const { seqs } = await appendRows(db, session, [
      user(`look at view ${i}`, { images: upload }),
      assistant(`checking ${i}`, [`c${i}`]),
      toolResult(`c${i}`, `view ${i} rendered`, { images: [imageIn(await pngBytes(40 + i, 30), 'image/png')] }),
    ]);
    resultSeqs.push(seqs[2]!);
  }
  return resultSeqs;
}

function sidOf(db: Db, session: string): number {
  return db.prepare('SELECT sid FROM sessions WHERE name = ?').pluck().get(session) as number;
}

function bodyOf(db: Db, seq: number): string {
  return db.prepare('SELECT body FROM transcript WHERE seq = ?').pluck().get(seq) as string;
}

test('a job elides tool-output images below its seq in batches; payloads go with their last reference', async (t) => {
  const { db } = tempDbWithPath(t);
  const results = await screenshots(db, 's', 10);
  await screenshots(db, 'other', 3, 50);
  const sid = sidOf(db, 's');
  const payloadsBefore = count(db, 'SELECT count(*) FROM payloads');
  const below = results[7]!; // results 0-6 are covered; 7-9 stay
  const bodyBefore = bodyOf(db, results[8]!);
  scheduleElision(db, sid, below);
  assert.deepEqual(pendingElisions(db), [{ sid, name: 's' }]);

  const first = elideBatch(db, sid, 3);
  assert.ok(first.rows >= 1 && first.rows <= 3, 'a batch holds at most its row bound (fewer when its time slice ran out)');
  assert.equal(first.done, false);
  assert.equal(elisionStats(db, sid).pending, true);
  let rowsDone = first.rows;
  for (;;) {
    const b = elideBatch(db, sid, 3);
    assert.ok(b.rows <= 3);
    rowsDone += b.rows;
    if (b.done) break;
  }
  assert.equal(rowsDone, 7, 'seven covered rows, each handled once');
  assert.deepEqual(pendingElisions(db), []);

  const rows = rowsOf(db, 's');
  for (const seq of results) {
    const row = rows.find((r) => r.seq === seq)!;
    const covered = seq < below;
    assert.equal(row.text.includes(ELIDED_IMAGE_TEXT), covered, `row #${seq} text`);
    assert.equal(count(db, 'SELECT count(*) FROM payload_refs WHERE seq = ?', seq), covered ? 0 : 1);
  }
  assert.equal(bodyOf(db, results[8]!), bodyBefore, 'a row above the range is untouched');
  // User uploads keep their images and references, and the other session is untouched.
  for (const r of rows.filter((x) => x.kind === 'user' && x.body.includes('"image"'))) {
    assert.equal(r.text.includes(ELIDED_IMAGE_TEXT), false);
    assert.equal(count(db, 'SELECT count(*) FROM payload_refs WHERE seq = ?', r.seq), 1);
  }
  assert.ok(rowsOf(db, 'other').every((r) => !r.text.includes(ELIDED_IMAGE_TEXT)));
  const stats = elisionStats(db, sid);
  assert.equal(stats.imagesElided, 7);
  assert.equal(stats.payloadsDeleted, 7);
  assert.equal(count(db, 'SELECT count(*) FROM payloads'), payloadsBefore - 7);
  assert.equal(stats.bytesFreed > 0, true);
  assert.equal(count(db, 'SELECT count(*) FROM payload_refs r LEFT JOIN payloads p ON p.hash = r.hash WHERE p.hash IS NULL'), 0);

  // Rendered reads show the marker, and the stored size follows the new text.
  const read = await readTranscript(db, { session: 's', offset: 0, limit: 100_000 });
  assert.equal(read.text.split(ELIDED_IMAGE_TEXT).length - 1, 7);
  // A deep page skips whole rows by their stored sizes: it matches the full rendering only if
  // the sizes follow the rewritten text.
  const graphemes = [...new Intl.Segmenter().segment(read.text)].map((g) => g.segment);
  const offset = graphemes.length - 120;
  const page = await readTranscript(db, { session: 's', offset, limit: 60 });
  assert.equal(page.text, graphemes.slice(offset, offset + 60).join(''));
});

test('the mark is the only change: key order, the rest of the body and retries of the row stay the same', async (t) => {
  const { db } = tempDbWithPath(t);
  const results = await screenshots(db, 's', 2);
  const before = JSON.parse(bodyOf(db, results[0]!)) as Record<string, unknown>;
  scheduleElision(db, sidOf(db, 's'), results[1]!);
  elideBatch(db, sidOf(db, 's'));
  const afterJson = bodyOf(db, results[0]!);
  const after = JSON.parse(afterJson) as { content: Record<string, unknown>[] };
  assert.deepEqual(Object.keys(after), Object.keys(before));
  const image = after.content.find((p) => p.type === 'image')!;
  assert.equal(image.elided, true);
  const { elided: _e, ...unmarked } = image;
  assert.deepEqual({ ...after, content: after.content.map((p) => (p === image ? unmarked : p)) }, before);
  // The client retrying the same row (same key) still gets its stored seq, not a conflict.
  const again = await appendRows(db, 's', [toolResult('c0', 'view 0 rendered', { key: undefined, images: [imageIn(await pngBytes(40, 30), 'image/png')] })]);
  assert.equal(again.seqs.length, 1);
});

test('a job cut short by a crash is finished after reopening; scheduling a handled range again does nothing', async (t) => {
  const { db, path } = tempDbWithPath(t);
  const results = await screenshots(db, 's', 6);
  const sid = sidOf(db, 's');
  scheduleElision(db, sid, results[5]!);
  elideBatch(db, sid, 2);
  // A second connection stands in for the next start (the first never finishes its job).
  const next = openDb(path, { synchronous: 'NORMAL' });
  try {
    assert.deepEqual(pendingElisions(next), [{ sid, name: 's' }]);
    while (!elideBatch(next, sid, 2).done);
    assert.equal(elisionStats(next, sid).imagesElided, 5);
    const rewrites = next.prepare('SELECT rewrites FROM sessions WHERE sid = ?').pluck().get(sid);
    scheduleElision(next, sid, results[2]!);
    assert.deepEqual(pendingElisions(next), [], 'an older boundary than the one handled is no job');
    assert.equal(elideBatch(next, sid).rows, 0);
    assert.equal(next.prepare('SELECT rewrites FROM sessions WHERE sid = ?').pluck().get(sid), rewrites);
  } finally {
    next.close();
  }
});

test('a fitted copy goes with the last row that read its original; while one still does, it stays', async (t) => {
  const { db } = tempDbWithPath(t);
  openSession(db, { session: 's' });
  const big = await pngBytes(90, 60, { r: 9, g: 9, b: 9 });
  const small = await pngBytes(45, 30, { r: 9, g: 9, b: 9 });
  const { seqs } = await appendRows(db, 's', [user('go'), assistant('shot', ['c1']), toolResult('c1', 'page', { images: [imageIn(big, 'image/png')] })]);
  const fromHash = (JSON.parse(bodyOf(db, seqs[2]!)) as { content: { type: string; hash?: string }[] }).content.find((p) => p.type === 'image')!.hash!;
  const toHash = createHash('sha256').update(small).digest('hex');
  putPayload(db, toHash, 'image/png', 45, 30, small);
  appendNotice(db, sidOf(db, 's'), { notice: 'image_fit', from_hash: fromHash, to: { type: 'image', hash: toHash, media_type: 'image/png', width: 45, height: 30 }, reason: 'test' });
  // The same original uploaded again later by the user: it keeps the original (and so the fit's use).
  const again = await appendRows(db, 's', [user('and this one', { images: [imageIn(big, 'image/png')] })]);
  const sid = sidOf(db, 's');
  scheduleElision(db, sid, seqs[2]! + 1);
  elideBatch(db, sid);
  assert.ok(getPayload(db, fromHash), 'the original is still named by the later upload');
  assert.ok(getPayload(db, toHash), 'its fitted copy stays');
  // Once nothing names the original, its fitted copy goes in the same batch.
  db.prepare('DELETE FROM payload_refs WHERE seq = ?').run(again.seqs[0]);
  db.prepare('UPDATE image_elision SET done_below = 0, pending_below = ? WHERE sid = ?').run(seqs[2]! + 1, sid);
  db.prepare('INSERT INTO payload_refs (hash, seq) VALUES (?, ?)').run(fromHash, seqs[2]);
  const b = elideBatch(db, sid);
  assert.equal(getPayload(db, fromHash), undefined);
  assert.equal(getPayload(db, toHash), undefined, 'the fitted copy went with it');
  assert.equal(b.payloadsDeleted, 2);
  assert.equal(count(db, 'SELECT count(*) FROM payload_refs r LEFT JOIN payloads p ON p.hash = r.hash WHERE p.hash IS NULL'), 0);
});

test("a job's next rows are found from the image references, not by walking every row of the range", async (t) => {
  const { db: plain } = tempDbWithPath(t);
  const { db, executed } = recordingDb(plain);
  openSession(db, { session: 's' });
  // A long history without a single image: only the references can say so quickly.
  for (let i = 0; i < 20; i++) await appendRows(db, 's', Array.from({ length: 100 }, (_, k) => (k % 2 === 0 ? user(`turn ${i}.${k}`) : assistant(`reply ${i}.${k}`))));
  const sid = sidOf(db, 's');
  scheduleElision(db, sid, 1_000_000);
  assert.equal(elideBatch(db, sid).done, true);
  const scans = executed.filter((sql) => /FROM payload_refs r/.test(sql));
  assert.ok(scans.length > 0, 'the batch looked for rows with references');
  for (const sql of scans) {
    const plan = plain.prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`).all(0, 1, sid, 1).map((r) => r.detail);
    assert.match(plan[0] ?? '', /^SEARCH r USING (COVERING )?INDEX payload_refs_seq/, `the references drive the scan: ${plan.join(' | ')}`);
  }
});
