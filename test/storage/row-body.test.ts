// Large row bodies are stored compressed (storage/transcript/row-body.ts, migration 22) as they are appended;
// rows still stored as text (a file from before migration 22) are packed in idle time
// (storage/transcript/row-packing.ts, migration 23). packBody and unpackBody on their own, then every way a
// row is written, packed, moved, copied and read, with rows large enough to be packed: reads,
// transcript_read, grep (indexed and scanned), key retries, settling, orphans, forks, the packer,
// and a file upgraded from version 21.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import zlib from 'node:zlib';
import type { StoredBody } from '../../protocol/rows.ts';
import { loadSources } from '../../storage/transcript/history.ts';
import { openDb, type Db } from '../../storage/db.ts';
import { migrations } from '../../storage/migrations/index.ts';
import { bodyJson, PACK_MIN_CHARS, PACK_OFF_THREAD_CHARS, packBody, packBodyAsync, unpackBody } from '../../storage/transcript/row-body.ts';
import { catchUpPacking, packingLag, packPending } from '../../storage/transcript/row-packing.ts';
import { grep } from '../../storage/search/grep.ts';
import { catchUpSearchIndex } from '../../storage/search/indexer.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { readTranscript } from '../../storage/transcript/read.ts';
import { appendRows, forkSession } from '../../storage/transcript/write.ts';
import { assistant, commandOutput as output, rowsOf, storeAsText, tempDb, toolResult, user } from './factories.ts';

/** How each of a session's rows is stored: [seq, packed?, stored bytes]. */
function storage(db: Db, sid: number): Array<{ seq: number; packed: boolean; bytes: number }> {
  return (
    db.prepare('SELECT seq, packed IS NOT NULL AS packed, length(body) + coalesce(length(packed), 0) AS bytes FROM transcript WHERE sid = ? ORDER BY seq').all(sid) as Array<{
      seq: number;
      packed: number;
      bytes: number;
    }>
  ).map((r) => ({ seq: r.seq, packed: r.packed === 1, bytes: r.bytes }));
}

/** What grep counts and where, for a session. */
async function found(db: Db, session: string, pattern: string): Promise<{ total: number; seqs: number[] }> {
  const r = await grep(db, { session, pattern, offset: 0, limit: 100 });
  return { total: r.total, seqs: r.matches.map((m) => m.seq) };
}

test('a large body is packed and reads back byte for byte; a small or incompressible one stays text', () => {
  const json = JSON.stringify({ kind: 'tool_result', call_id: 'c', is_error: false, content: [{ type: 'text', text: output('ok') }] });
  const big = packBody(json);
  assert.equal(big.body, '');
  assert.ok(big.packed !== null && big.packed.length < json.length / 3, `packed to ${big.packed?.length} of ${json.length}`);
  assert.equal(unpackBody(7, big.packed), json);
  assert.equal(bodyJson(7, big.body, big.packed), json);

  const small = JSON.stringify({ kind: 'user', origin: 'user', content: [{ type: 'text', text: 'short' }] });
  assert.deepEqual(packBody(small), { body: small, packed: null });

  // Text that does not shrink enough (random bytes as base64) is not worth a zlib call on every read.
  const random = JSON.stringify({ text: Buffer.from(Array.from({ length: PACK_MIN_CHARS * 2 }, () => Math.floor(Math.random() * 256))).toString('base64') });
  assert.deepEqual(packBody(random), { body: random, packed: null });

  // Non-ASCII text survives the UTF-8 round trip.
  const german = JSON.stringify({ text: 'Größe ändert sich, naïve café 🙂 '.repeat(300) });
  const packed = packBody(german);
  assert.notEqual(packed.packed, null);
  assert.equal(unpackBody(1, packed.packed!), german);
});

test('a long body is compressed off the event loop into the same bytes, and an append of one stores it packed', async (t) => {
  const long = JSON.stringify({ text: output('LONG', Math.ceil(PACK_OFF_THREAD_CHARS / 40) + 10) });
  assert.ok(long.length >= PACK_OFF_THREAD_CHARS);
  const off = await packBodyAsync(long);
  assert.deepEqual(off, packBody(long));
  assert.notEqual(off.packed, null);
  assert.deepEqual(await packBodyAsync('{"short":1}'), { body: '{"short":1}', packed: null });

  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const text = output('LONG', 3000);
  await appendRows(db, 's', [user(text)]);
  assert.deepEqual(storage(db, sid).map((r) => r.packed), [true]);
  assert.equal(rowsOf(db, 's')[0]!.text, text);
});

test('new bodies are packed with Brotli; bodies packed with deflate before it read the same everywhere', async (t) => {
  const json = JSON.stringify({ kind: 'tool_result', call_id: 'c', is_error: false, content: [{ type: 'text', text: output('ok') }] });
  const { packed } = packBody(json);
  assert.equal(packed?.[0], 2, 'format 2: Brotli');
  assert.equal(zlib.brotliDecompressSync(packed.subarray(1)).toString('utf8'), json);

  // A row as a daemon before this format stored it: format 1, raw deflate at level 1.
  const db = tempDb(t);
  openSession(db, { session: 's' });
  const big = output('OLDPACK');
  await appendRows(db, 's', [user('build it'), assistant('running', ['c1']), toolResult('c1', big)]);
  const stored = db.prepare<[], string>('SELECT albedo_unpack(seq, packed) FROM transcript WHERE seq = 3').pluck().get()!;
  const deflated = Buffer.concat([Buffer.from([1]), zlib.deflateRawSync(Buffer.from(stored, 'utf8'), { level: 1 })]);
  assert.equal(unpackBody(3, deflated), stored);
  db.prepare('UPDATE transcript SET packed = ? WHERE seq = 3').run(deflated);

  assert.deepEqual(loadSources(db, [{ session: 's', seq: 3 }])[0]!.body, { kind: 'tool_result', call_id: 'c1', is_error: false, content: [{ type: 'text', text: big }] });
  assert.equal(rowsOf(db, 's')[2]!.text, big);
  assert.ok((await readTranscript(db, { session: 's', offset: 0, limit: 100_000 })).text.includes(`#3 tool_result c1\n${big}`));
  const scanned = await found(db, 's', 'OLDPACK line 199');
  catchUpSearchIndex(db);
  assert.deepEqual(await found(db, 's', 'OLDPACK line 199'), scanned);
  assert.deepEqual(scanned, { total: 1, seqs: [3] });
  // A retry under the row's key compares with the old bytes' JSON and answers its seq.
  const keyed = toolResult('c2', output('KEYED'));
  await appendRows(db, 's', [assistant('again', ['c2']), { ...keyed, key: 'k-old' }]);
  const keyedSeq = db.prepare<[], number>("SELECT seq FROM transcript WHERE key = 'k-old'").pluck().get()!;
  const keyedJson = db.prepare<[number], string>('SELECT albedo_unpack(seq, packed) FROM transcript WHERE seq = ?').pluck().get(keyedSeq)!;
  db.prepare('UPDATE transcript SET packed = ? WHERE seq = ?').run(Buffer.concat([Buffer.from([1]), zlib.deflateRawSync(Buffer.from(keyedJson, 'utf8'))]), keyedSeq);
  assert.deepEqual((await appendRows(db, 's', [{ ...keyed, key: 'k-old' }])).seqs, [keyedSeq]);
});

test('a packed body that does not decode fails naming its row', () => {
  const { packed } = packBody(JSON.stringify({ text: output('x') }));
  assert.notEqual(packed, null);
  const unknown = Buffer.from(packed!);
  unknown[0] = 9;
  assert.throws(() => unpackBody(41, unknown), /transcript row 41 is corrupt: packed body has unknown format 9/);
  const truncated = packed!.subarray(0, 20);
  assert.throws(() => unpackBody(42, truncated), /transcript row 42 is corrupt: packed body does not inflate/);
  assert.throws(() => unpackBody(43, Buffer.alloc(0)), /transcript row 43 is corrupt/);
});

test('large rows are stored packed, in a fraction of their bytes, and every reader sees the same rows', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const big = output('BUILD');
  await appendRows(db, 's', [user('build it'), assistant('running', ['c1']), toolResult('c1', big)]);
  const stored = storage(db, sid);
  assert.deepEqual(stored.map((r) => r.packed), [false, false, true]);
  assert.ok(stored[2]!.bytes < big.length / 3, `stored ${stored[2]!.bytes} bytes for ${big.length} characters`);
  assert.equal(packingLag(db), 0, 'nothing left for the packer');

  const [row] = loadSources(db, [{ session: 's', seq: 3 }]);
  assert.deepEqual(row!.body, { kind: 'tool_result', call_id: 'c1', is_error: false, content: [{ type: 'text', text: big }] });
  assert.equal(rowsOf(db, 's')[2]!.text, big);

  const read = await readTranscript(db, { session: 's', offset: 0, limit: 100_000 });
  assert.ok(read.text.includes(`#3 tool_result c1\n${big}`), 'transcript_read renders the packed row with its header');

  // Scanned (the index has not reached the rows), then through the index: the same answer.
  const scanned = await found(db, 's', 'module-16.ts compiled');
  catchUpSearchIndex(db);
  assert.deepEqual(await found(db, 's', 'module-16.ts compiled'), scanned);
  assert.equal(scanned.total, 1);
  assert.deepEqual(scanned.seqs, [3]);
  assert.equal((await found(db, 's', 'BUILD line 199')).total, 1);
});

test('rows stored as text are packed by the packer, read the same, and are not indexed again', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const big = output('BUILD');
  await appendRows(db, 's', [user('build it'), assistant('running', ['c1']), toolResult('c1', big)]);
  storeAsText(db);
  assert.deepEqual(storage(db, sid).map((r) => r.packed), [false, false, false]);
  assert.equal(packingLag(db), 1);

  const reads = async () => ({
    body: loadSources(db, [{ session: 's', seq: 3 }])[0]!.body,
    texts: rowsOf(db, 's').map((r) => r.text),
    read: (await readTranscript(db, { session: 's', offset: 0, limit: 100_000 })).text,
    scanned: await found(db, 's', 'module-16.ts compiled'),
  });
  const before = await reads();
  assert.deepEqual(before.body, { kind: 'tool_result', call_id: 'c1', is_error: false, content: [{ type: 'text', text: big }] });
  assert.equal(before.texts[2], big);
  assert.ok(before.read.includes(`#3 tool_result c1\n${big}`), 'transcript_read renders the row with its header');
  assert.deepEqual(before.scanned, { total: 1, seqs: [3] });

  // Indexed as text, then packed: the index's update trigger sees nothing to re-index (the only
  // changes are the row's columns and the packer's cursor).
  catchUpSearchIndex(db);
  const changes = db.prepare('SELECT total_changes()').pluck();
  const c0 = changes.get() as number;
  assert.equal(catchUpPacking(db), 3);
  assert.equal((changes.get() as number) - c0, 2);
  const stored = storage(db, sid);
  assert.deepEqual(stored.map((r) => r.packed), [false, false, true]);
  assert.ok(stored[2]!.bytes < big.length / 3, `stored ${stored[2]!.bytes} bytes for ${big.length} characters`);
  assert.equal(packingLag(db), 0);
  assert.equal(packPending(db), 0, 'caught up');

  const after = await reads();
  assert.deepEqual(after, before);
  assert.deepEqual(await found(db, 's', 'module-16.ts compiled'), { total: 1, seqs: [3] });
  assert.equal((await found(db, 's', 'BUILD line 199')).total, 1);
});

test('a packing unit stops at its byte budget, after at least one body, and the next one goes on from there', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  await appendRows(db, 's', [user('a'), user(output('ONE')), user('b'), user(output('TWO')), user(output('THREE')), user('c')]);
  storeAsText(db);
  // Each long body is ~9.8k bytes: a budget of 1 takes one, then stops before the next.
  assert.equal(packPending(db, 100, 1), 3, 'rows 1-3, up to the second long body');
  assert.deepEqual(storage(db, sid).map((r) => r.packed), [false, true, false, false, false, false]);
  assert.equal(packPending(db, 100, 1), 1, 'row 4 alone');
  assert.deepEqual(storage(db, sid).map((r) => r.packed), [false, true, false, true, false, false]);
  assert.equal(packPending(db, 100, 30_000), 2, 'rows 5-6');
  assert.deepEqual(storage(db, sid).map((r) => r.packed), [false, true, false, true, true, false]);
  assert.equal(packPending(db, 100, 30_000), 0);
  assert.deepEqual(rowsOf(db, 's').map((r) => r.text), ['a', output('ONE'), 'b', output('TWO'), output('THREE'), 'c']);
});

test('the index skips only a packing that keeps the JSON: a packed rewrite with other content is indexed again', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  await appendRows(db, 's', [user(output('BEFORE'))]);
  catchUpSearchIndex(db);
  const other = packBody(JSON.stringify({ kind: 'user', origin: 'user', content: [{ type: 'text', text: output('AFTER') }] }));
  assert.notEqual(other.packed, null);
  db.prepare("UPDATE transcript SET body = '', packed = ? WHERE seq = 1").run(other.packed);
  assert.equal((await found(db, 's', 'before line 7:')).total, 0);
  assert.deepEqual(await found(db, 's', 'after line 7:'), { total: 1, seqs: [1] });
});

test('a retry of a packed row under its key answers its seq; other content under the key is refused', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const big = output('KEYED');
  const first = await appendRows(db, 's', [user(big, { key: 'k1' })]);
  const again = await appendRows(db, 's', [user(big, { key: 'k1' })]);
  assert.deepEqual(again.seqs, first.seqs);
  assert.equal(storage(db, sid).length, 1);
  await assert.rejects(appendRows(db, 's', [user(`${big}!`, { key: 'k1' })]), { code: 'key_conflict' });
});

test('settling moves packed rows with their contents, and the index follows them', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  // Call, then a packed row the agent wrote before the result came, indexed; then the packed result.
  await appendRows(db, 's', [user('go'), assistant('two things', ['c1']), user(output('TYPED AHEAD'))]);
  catchUpSearchIndex(db);
  const r = await appendRows(db, 's', [toolResult('c1', output('RESULT'))]);
  assert.deepEqual(r.seqs, [3], 'the result takes the slot after its call');
  assert.deepEqual(r.moved, [{ from: 3, to: 4 }, { from: 4, to: 3 }]);
  const rows = rowsOf(db, 's');
  assert.equal(rows[2]!.text, output('RESULT'));
  assert.equal(rows[3]!.text, output('TYPED AHEAD'));
  assert.deepEqual(storage(db, sid).map((x) => x.packed), [false, false, true, true]);
  catchUpSearchIndex(db);
  assert.deepEqual(await found(db, 's', 'typed ahead line 5:'), { total: 1, seqs: [4] });
  assert.deepEqual(await found(db, 's', 'result line 5:'), { total: 1, seqs: [3] });
});

test('an orphan result is packed with its mark, and a fork copies packed rows as they are', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  await appendRows(db, 's', [user('go'), toolResult('nobody', output('ORPHAN'))]);
  const [orphan] = loadSources(db, [{ session: 's', seq: 2 }]);
  assert.equal((orphan!.body as Extract<StoredBody, { kind: 'tool_result' }>).orphan, true);
  assert.equal(storage(db, sid)[1]!.packed, true);

  const fork = forkSession(db, 's', { branch: 'b' });
  const copy = storage(db, fork.sid);
  assert.deepEqual(copy.map((x) => [x.packed, x.bytes]), storage(db, sid).map((x) => [x.packed, x.bytes]));
  assert.deepEqual(rowsOf(db, 'b').map((x) => x.text), rowsOf(db, 's').map((x) => x.text));
});

function tempFile(t: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-packed-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'albedo.db');
}

test('a version-21 file keeps its plain rows readable, and the packer packs its old long rows as well as new ones', async (t) => {
  const file = tempFile(t);
  const v21 = openDb(file, { synchronous: 'NORMAL', migrations: migrations.filter((m) => m.version <= 21) });
  // What a version-21 build stored: the whole JSON as text (insert through the old columns).
  v21.prepare("INSERT INTO sessions (sid, name, created_at) VALUES (1, 's', 1000)").run();
  const old: StoredBody = { kind: 'user', origin: 'user', content: [{ type: 'text', text: output('OLD') }] };
  v21
    .prepare("INSERT INTO transcript (sid, kind, row_class, key, call_id, body, created_at) VALUES (1, 'user', 'user', NULL, NULL, ?, 1000)")
    .run(JSON.stringify(old));
  v21.close();

  const db = openDb(file, { synchronous: 'NORMAL' });
  t.after(() => db.close());
  await appendRows(db, 's', [assistant('later', ['c9']), toolResult('c9', output('NEW'))]);
  assert.deepEqual(storage(db, 1).map((x) => x.packed), [false, false, true], 'new rows are packed as they are written');
  const texts = [output('OLD'), 'later\n→ read_file({"path":"c9.ts"})', output('NEW')];
  assert.deepEqual(rowsOf(db, 's').map((x) => x.text), texts);
  catchUpSearchIndex(db);
  catchUpPacking(db);
  assert.deepEqual(storage(db, 1).map((x) => x.packed), [true, false, true]);
  assert.deepEqual(rowsOf(db, 's').map((x) => x.text), texts);
  assert.deepEqual(await found(db, 's', 'old line 3:'), { total: 1, seqs: [1] });
  assert.deepEqual(await found(db, 's', 'new line 3:'), { total: 1, seqs: [3] });
  assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
});
