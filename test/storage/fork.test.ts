// Forks and excursions: copies with new seqs and a parent map, fork points, excursion markers
// and the one return that answers them, also after settling moved the marker.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlbedoError, type DomainCodeName } from '../../protocol/errors.ts';
import type { Db } from '../../storage/db.ts';
import { ROW_TEXT_SQL } from '../../storage/transcript/row-text.ts';
import { deleteSession, openSession, requireSession } from '../../storage/transcript/sessions.ts';
import { appendRows, forkMap, forkSession, returnFromExcursion } from '../../storage/transcript/write.ts';
import { assistant, count, imageIn, pngBytes, rowsOf, tempDb, toolResult, user } from './factories.ts';

function fails(code: DomainCodeName, details: Record<string, unknown> = {}) {
  return (e: unknown) => e instanceof AlbedoError && e.code === code && Object.entries(details).every(([k, v]) => e.details?.[k] === v);
}

function bodyOf(db: Db, seq: number): { kind: string; body?: Record<string, unknown> } {
  return JSON.parse(db.prepare('SELECT body FROM transcript WHERE seq = ?').pluck().get(seq) as string) as { kind: string; body?: Record<string, unknown> };
}

test('a fork copies the parent rows with new seqs, same contents and keys, and maps them', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p', workspace: '/w' });
  const png = await pngBytes(4, 4);
  const a = await appendRows(db, 'p', [
    user('hi', { key: 'k1', images: [imageIn(png, 'image/png')] }),
    assistant('calling', ['c1']),
    toolResult('c1', 'out'),
  ]);
  const f = forkSession(db, 'p', { branch: 'b' });
  assert.equal(f.rows, 3);
  assert.equal(f.marker_seq, null);
  const parent = rowsOf(db, 'p');
  const branch = rowsOf(db, 'b');
  assert.deepEqual(
    branch.map((r) => [r.kind, r.key, r.text, r.body, r.created_at]),
    parent.map((r) => [r.kind, r.key, r.text, r.body, r.created_at]),
  );
  assert.ok(branch.every((r) => r.seq > a.head), 'copies get fresh seqs after everything stored');
  assert.deepEqual(
    [...forkMap(db, f.sid)],
    parent.map((r, i) => [r.seq, branch[i]!.seq]),
  );
  const rec = requireSession(db, 'b');
  assert.equal(rec.parent, 'p');
  assert.equal(rec.fork_seq, a.head);
  assert.equal(rec.workspace, '/w');
  // Copied calls and references: the payload is named twice, the call has a result in the
  // branch too, and the branch's keys answer retries with the branch's seqs.
  assert.equal(count(db, 'SELECT count(*) FROM payload_refs'), 2);
  assert.equal(count(db, 'SELECT count(*) FROM tool_calls WHERE sid = ?', f.sid), 1);
  const again = await appendRows(db, 'b', [toolResult('c1', 'again')]);
  assert.equal((JSON.parse(rowsOf(db, 'b').at(-1)!.body) as { orphan?: boolean }).orphan, true, "the copied call's result was copied as its answer");
  assert.equal(again.moved, undefined);
  const retry = await appendRows(db, 'b', [user('hi', { key: 'k1', images: [imageIn(png, 'image/png')] })]);
  assert.deepEqual(retry.seqs, [branch[0]!.seq]);
});

test('a fork at an earlier seq copies up to it and a pending call can be answered in the branch', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  const a = await appendRows(db, 'p', [user('one'), assistant('call', ['c1']), user('later')]);
  const f = forkSession(db, 'p', { at: a.seqs[1]!, branch: 'b' });
  assert.equal(f.rows, 2);
  const r = await appendRows(db, 'b', [toolResult('c1', 'branch result')]);
  assert.deepEqual(rowsOf(db, 'b').map((x) => x.text.split('\n')[0]), ['one', 'call', 'branch result']);
  assert.equal(r.moved, undefined);
  assert.equal(rowsOf(db, 'p').length, 3, 'the parent is untouched');
});

test('a fork answers the parent seq for a row even after settling moved it in the branch', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  const a = await appendRows(db, 'p', [assistant('call', ['c1']), user('typed')]);
  const f = forkSession(db, 'p', { branch: 'b' });
  await appendRows(db, 'b', [toolResult('c1', 'res')]);
  const map = forkMap(db, f.sid);
  const typedInBranch = map.get(a.seqs[1]!)!;
  assert.equal(db.prepare(`SELECT ${ROW_TEXT_SQL} FROM transcript WHERE seq = ?`).pluck().get(typedInBranch), 'typed');
});

test('fork points: another session seq, an unknown seq and a taken branch id are refused', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  openSession(db, { session: 'q' });
  await appendRows(db, 'p', [user('p1')]);
  const q = await appendRows(db, 'q', [user('q1')]);
  assert.throws(() => forkSession(db, 'p', { at: q.seqs[0]! }), fails('row_session_mismatch', { seq: q.seqs[0] }));
  assert.throws(() => forkSession(db, 'p', { at: 999 }), fails('unknown_row', { seq: 999 }));
  assert.throws(() => forkSession(db, 'p', { branch: 'q' }), fails('session_exists', { session: 'q' }));
  assert.throws(() => forkSession(db, 'ghost'), fails('unknown_session'));
  assert.equal(count(db, 'SELECT count(*) FROM sessions'), 2, 'failed forks create nothing');
});

test('a fork without a branch id gets a fresh one; an empty parent forks to an empty branch', (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  const f = forkSession(db, 'p');
  assert.match(f.session, /^[0-9a-f-]{36}$/);
  assert.equal(f.rows, 0);
  assert.equal(requireSession(db, f.session).parent, 'p');
});

test('an excursion writes a marker in the parent that the branch does not copy; the return links to it', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  await appendRows(db, 'p', [user('start')]);
  const f = forkSession(db, 'p', { branch: 'x', excursion: true });
  assert.ok(f.marker_seq !== null);
  assert.deepEqual(bodyOf(db, f.marker_seq), { kind: 'notice', body: { notice: 'excursion', branch: 'x' } });
  assert.equal(f.rows, 1);
  assert.deepEqual(rowsOf(db, 'x').map((r) => r.text), ['start']);
  assert.equal(requireSession(db, 'x').excursion_marker, f.marker_seq);

  await appendRows(db, 'x', [user('explored')]);
  const back = returnFromExcursion(db, 'x', 'found the bug');
  assert.equal(back.session, 'p');
  assert.deepEqual(bodyOf(db, back.seq).body, {
    notice: 'excursion_return',
    branch: 'x',
    marker_seq: f.marker_seq,
    outcome: 'found the bug',
  });
  assert.equal(requireSession(db, 'x').returned_seq, back.seq);
  assert.deepEqual(rowsOf(db, 'p').map((r) => r.kind), ['user', 'notice', 'notice']);

  assert.throws(() => returnFromExcursion(db, 'x', 'again'), fails('excursion_returned', { seq: back.seq }));
  assert.equal(rowsOf(db, 'p').length, 3, 'a refused return writes nothing');
});

test('only excursions return, and only while their parent exists', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  forkSession(db, 'p', { branch: 'plain' });
  assert.throws(() => returnFromExcursion(db, 'plain', 'x'), fails('not_an_excursion'));
  forkSession(db, 'p', { branch: 'x', excursion: true });
  deleteSession(db, 'p');
  assert.throws(() => returnFromExcursion(db, 'x', 'x'), fails('unknown_session', { session: 'x' }));
  assert.throws(() => returnFromExcursion(db, 'ghost', 'x'), fails('unknown_session'));
});

test('an excursion started while a tool ran returns to its marker after the result settled', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  // The excursion is started by the running tool: marker after the call, result later.
  await appendRows(db, 'p', [user('go'), assistant('exploring', ['c1'])]); // 1, 2
  const f = forkSession(db, 'p', { branch: 'x', excursion: true, at: 2 }); // marker 3, copies 4, 5
  assert.equal(f.marker_seq, 3);
  const settled = await appendRows(db, 'p', [toolResult('c1', 'excursion started')]); // fresh 6 -> 3
  assert.deepEqual(settled.seqs, [3]);
  assert.deepEqual(settled.moved, [
    { from: 3, to: 6 },
    { from: 6, to: 3 },
  ]);
  assert.equal(requireSession(db, 'x').excursion_marker, 6, 'the branch follows its moved marker');

  const back = returnFromExcursion(db, 'x', 'done');
  assert.equal((bodyOf(db, back.seq).body as { marker_seq: number }).marker_seq, 6);
  assert.equal(bodyOf(db, 6).body?.notice, 'excursion');
});

test('a return notice moved by settling keeps pointing at its moved marker', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  await appendRows(db, 'p', [assistant('exploring', ['c1'])]); // 1
  forkSession(db, 'p', { branch: 'x', excursion: true }); // marker 2, copy 3
  const back = returnFromExcursion(db, 'x', 'outcome'); // 4
  assert.equal(back.seq, 4);
  await appendRows(db, 'p', [toolResult('c1', 'r')]); // fresh 5 -> 2; marker 2 -> 4, return 4 -> 5
  assert.deepEqual(rowsOf(db, 'p').map((r) => [r.seq, r.kind]), [
    [1, 'assistant'],
    [2, 'tool_result'],
    [4, 'notice'],
    [5, 'notice'],
  ]);
  assert.equal(bodyOf(db, 4).body?.notice, 'excursion');
  assert.deepEqual(bodyOf(db, 5).body, { notice: 'excursion_return', branch: 'x', marker_seq: 4, outcome: 'outcome' });
  const rec = requireSession(db, 'x');
  assert.equal(rec.excursion_marker, 4);
  assert.equal(rec.returned_seq, 5);
  // The fork map of the branch follows the parent's moved contents too.
  assert.deepEqual([...forkMap(db, rec.sid)], [[1, 3]]);
});

test('forkMap follows parent contents that settling moved after the fork', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  await appendRows(db, 'p', [assistant('call', ['c1']), user('typed')]); // 1, 2
  const f = forkSession(db, 'p', { branch: 'b' }); // copies 3, 4
  await appendRows(db, 'p', [toolResult('c1', 'r')]); // fresh 5 -> 2; typed 2 -> 5
  assert.deepEqual([...forkMap(db, f.sid)].sort((x, y) => x[0] - y[0]), [
    [1, 3],
    [5, 4],
  ]);
});
