// Tool-call ids used again in a session, results matched to the newest open call, orphan
// results (no open call with their id) stored beside their siblings, and forks of all that.
// Plain settling and the refusal of a reused open id are in transcript-append.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlbedoError, type DomainCodeName } from '../../protocol/errors.ts';
import type { Db } from '../../storage/db.ts';
import { deleteSession, openSession } from '../../storage/transcript/sessions.ts';
import { appendRows, forkMap, forkSession, orphanResults } from '../../storage/transcript/write.ts';
import { assistant, count, rowsOf, tempDb, toolResult, user } from './factories.ts';

function fails(code: DomainCodeName, details: Record<string, unknown> = {}) {
  return (e: unknown) => e instanceof AlbedoError && e.code === code && Object.entries(details).every(([k, v]) => e.details?.[k] === v);
}

/** First line of each row's text, in seq order. */
function lines(db: Db, session: string): string[] {
  return rowsOf(db, session).map((r) => r.text.split('\n')[0]!);
}

/** The session's call records: call id, the call's row, the answering result's row. */
function calls(db: Db, sid: number): Array<[string, number, number | null]> {
  return (
    db.prepare('SELECT call_id, seq, result_seq FROM tool_calls WHERE sid = ? ORDER BY seq, call_id').all(sid) as Array<{
      call_id: string;
      seq: number;
      result_seq: number | null;
    }>
  ).map((c) => [c.call_id, c.seq, c.result_seq]);
}

function bodyAt(db: Db, seq: number): Record<string, unknown> {
  return JSON.parse(db.prepare('SELECT body FROM transcript WHERE seq = ?').pluck().get(seq) as string) as Record<string, unknown>;
}

test('an id is used again once its call has its result, and the next result settles beside the new call', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  await appendRows(db, 's', [user('go'), assistant('first', ['c1']), toolResult('c1', 'r1')]); // 1, 2, 3
  const again = await appendRows(db, 's', [assistant('second', ['c1'])]); // 4
  assert.deepEqual(again.seqs, [4]);
  await appendRows(db, 's', [user('typed meanwhile')]); // 5
  const r = await appendRows(db, 's', [toolResult('c1', 'r2')]); // fresh 6, slot after 4
  assert.deepEqual(r.seqs, [5]);
  assert.deepEqual(r.moved, [
    { from: 5, to: 6 },
    { from: 6, to: 5 },
  ]);
  assert.deepEqual(lines(db, 's'), ['go', 'first', 'r1', 'second', 'r2', 'typed meanwhile']);
  assert.deepEqual(calls(db, sid), [
    ['c1', 2, 3],
    ['c1', 4, 5],
  ]);
});

test('settling with a reused id tells the earlier answers of that id apart by their links', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  await appendRows(db, 's', [assistant('A1', ['c1', 'c2'])]); // 1
  await appendRows(db, 's', [toolResult('c1', 'A1 c1')]); // 2
  await appendRows(db, 's', [assistant('A2', ['c1'])]); // 3: c1 is answered, c2 of A1 still runs
  await appendRows(db, 's', [toolResult('c1', 'A2 c1')]); // 4
  await appendRows(db, 's', [user('typed')]); // 5
  // A1's late c2 result: its slot is after A1 and A1's own result at 2 (not A2's, also for c1).
  const r = await appendRows(db, 's', [toolResult('c2', 'A1 c2')]); // fresh 6
  assert.deepEqual(r.seqs, [3]);
  assert.deepEqual(r.moved, [
    { from: 3, to: 4 },
    { from: 4, to: 5 },
    { from: 5, to: 6 },
    { from: 6, to: 3 },
  ]);
  assert.deepEqual(lines(db, 's'), ['A1', 'A1 c1', 'A1 c2', 'A2', 'A2 c1', 'typed']);
  assert.deepEqual(calls(db, sid), [
    ['c1', 1, 2],
    ['c2', 1, 3],
    ['c1', 4, 5],
  ]);
  // Every call with that id is answered now: one more result for it is an orphan and stays put.
  const late = await appendRows(db, 's', [toolResult('c1', 'late')]);
  assert.deepEqual(late.seqs, [7]);
  assert.equal(late.moved, undefined);
  assert.equal(bodyAt(db, 7).orphan, true);
});

test('a result answers the newest open call of its id, also within one batch', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  // An older call of the id is always answered before the id comes back, so "newest open" is
  // the only open one: a late result can never be meant for an older call of its id.
  const r = await appendRows(db, 's', [
    assistant('A1', ['c1']),
    toolResult('c1', 'for A1'),
    assistant('A2', ['c1']),
    toolResult('c1', 'for A2'),
    assistant('A3', ['c1']),
    user('typed'),
    toolResult('c1', 'for A3'),
  ]);
  assert.deepEqual(r.seqs, [1, 2, 3, 4, 5, 7, 6]);
  assert.deepEqual(r.moved, [
    { from: 6, to: 7 },
    { from: 7, to: 6 },
  ]);
  assert.deepEqual(lines(db, 's'), ['A1', 'for A1', 'A2', 'for A2', 'A3', 'for A3', 'typed']);
  assert.deepEqual(calls(db, sid), [
    ['c1', 1, 2],
    ['c1', 3, 4],
    ['c1', 5, 6],
  ]);
  assert.equal(orphanResults(db, sid), 0);
});

test('a result with no open call is stored as an orphan beside its siblings, linked to nothing and counted', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  db.prepare('UPDATE search_index_state SET indexed_through = 1000').run();
  const r = await appendRows(db, 's', [
    user('go'),
    assistant('call', ['c1']),
    toolResult('c1', 'answer'),
    toolResult('nope', 'stray giraffe output', { isError: true }),
    toolResult('c1', 'second answer'),
    user('after'),
  ]);
  assert.deepEqual(r.seqs, [1, 2, 3, 4, 5, 6]);
  assert.equal(r.moved, undefined);
  const rows = rowsOf(db, 's');
  assert.deepEqual(
    rows.map((x) => [x.kind, x.call_id, (JSON.parse(x.body) as { orphan?: boolean }).orphan ?? null]),
    [
      ['user', null, null],
      ['assistant', null, null],
      ['tool_result', 'c1', null],
      ['tool_result', null, true],
      ['tool_result', null, true],
      ['user', null, null],
    ],
  );
  assert.deepEqual(bodyAt(db, 4), {
    kind: 'tool_result',
    call_id: 'nope',
    is_error: true,
    content: [{ type: 'text', text: 'stray giraffe output' }],
    orphan: true,
  });
  assert.deepEqual(calls(db, sid), [['c1', 2, 3]]);
  assert.equal(orphanResults(db, sid), 2);
  // Its text is indexed like any row's.
  assert.equal(rows[3]!.text, 'stray giraffe output');
  assert.deepEqual(db.prepare('SELECT rowid FROM transcript_fts WHERE transcript_fts MATCH ?').pluck().all('"giraffe"'), [4]);
  // A result naming another session's call is an orphan of its own session.
  const other = openSession(db, { session: 'o' });
  await appendRows(db, 'o', [toolResult('c1', 'not mine')]);
  assert.equal(orphanResults(db, other.sid), 1);
  assert.equal(orphanResults(db, sid), 2);
});

test('orphanResults counts from the orphan index alone', (t) => {
  const db = tempDb(t);
  const plan = db
    .prepare(
      "EXPLAIN QUERY PLAN SELECT count(*) FROM transcript INDEXED BY transcript_orphans WHERE sid = ? AND kind = 'tool_result' AND call_id IS NULL",
    )
    .all(1) as Array<{ detail: string }>;
  assert.match(plan.map((p) => p.detail).join('\n'), /USING COVERING INDEX transcript_orphans/);
  assert.equal(orphanResults(db, 1), 0);
});

test('an orphan is never settled, and moves along like any row when a late result settles before it', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  await appendRows(db, 's', [assistant('call', ['c1']), user('typed')]); // 1, 2
  const stray = await appendRows(db, 's', [toolResult('zz', 'stray')]);
  assert.deepEqual(stray.seqs, [3], 'an orphan stays at the end');
  assert.equal(stray.moved, undefined);
  const r = await appendRows(db, 's', [toolResult('c1', 'answer')]); // fresh 4, slot 2
  assert.deepEqual(r.seqs, [2]);
  assert.deepEqual(r.moved, [
    { from: 2, to: 3 },
    { from: 3, to: 4 },
    { from: 4, to: 2 },
  ]);
  assert.deepEqual(lines(db, 's'), ['call', 'answer', 'typed', 'stray']);
  assert.equal(bodyAt(db, 4).orphan, true);
  assert.deepEqual(calls(db, sid), [['c1', 1, 2]]);
  assert.equal(orphanResults(db, sid), 1);
});

test('a retried batch with the same keys stores nothing twice, orphans included', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const batch = [
    assistant('call', ['c1'], { key: 'a' }),
    toolResult('c1', 'answer', { key: 'r1' }),
    toolResult('c1', 'answered twice', { key: 'r2' }),
    toolResult('ghost', 'no such call', { key: 'r3' }),
  ];
  const first = await appendRows(db, 's', batch);
  const again = await appendRows(db, 's', batch);
  assert.deepEqual(again, first);
  assert.equal(count(db, 'SELECT count(*) FROM transcript'), 4);
  assert.deepEqual(calls(db, sid), [['c1', 1, 2]]);
  assert.equal(orphanResults(db, sid), 2);
  // A retried orphan alone, after the id has an open call again, still answers its stored seq.
  await appendRows(db, 's', [assistant('call again', ['c1'])]);
  const retry = await appendRows(db, 's', [toolResult('c1', 'answered twice', { key: 'r2' })]);
  assert.deepEqual(retry.seqs, [3]);
  assert.deepEqual(calls(db, sid), [
    ['c1', 1, 2],
    ['c1', 5, null],
  ]);
  await assert.rejects(
    appendRows(db, 's', [toolResult('ghost', 'other content', { key: 'r3' })]),
    fails('key_conflict', { key: 'r3', seq: 4 }),
  );
});

test('a fork copies call records with their answers, and a result appended in the branch settles there', async (t) => {
  const db = tempDb(t);
  const parent = openSession(db, { session: 'p' });
  await appendRows(db, 'p', [user('go'), assistant('A1', ['c1']), toolResult('c1', 'r1'), assistant('A2', ['c1'])]); // 1-4
  await appendRows(db, 'p', [user('typed')]); // 5
  const f = forkSession(db, 'p', { branch: 'b' });
  const m = forkMap(db, f.sid);
  const b = (seq: number) => m.get(seq)!;
  assert.deepEqual(calls(db, f.sid), [
    ['c1', b(2), b(3)],
    ['c1', b(4), null],
  ]);

  const r = await appendRows(db, 'b', [toolResult('c1', 'answered in the branch')]);
  const fresh = b(5) + 1;
  assert.deepEqual(r.seqs, [b(5)]);
  assert.deepEqual(r.moved, [
    { from: b(5), to: fresh },
    { from: fresh, to: b(5) },
  ]);
  assert.deepEqual(lines(db, 'b'), ['go', 'A1', 'r1', 'A2', 'answered in the branch', 'typed']);
  assert.deepEqual(calls(db, f.sid), [
    ['c1', b(2), b(3)],
    ['c1', b(4), b(5)],
  ]);
  // The parent's call is still open there and is answered in the parent only.
  assert.deepEqual(calls(db, parent.sid), [
    ['c1', 2, 3],
    ['c1', 4, null],
  ]);
  const inParent = await appendRows(db, 'p', [toolResult('c1', 'answered in the parent')]);
  assert.deepEqual(inParent.seqs, [5]);
  assert.deepEqual(lines(db, 'p'), ['go', 'A1', 'r1', 'A2', 'answered in the parent', 'typed']);
  assert.equal(orphanResults(db, f.sid), 0);
});

test('a fork before a call is answered leaves the copy open, and copies orphans as orphans', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  const a = await appendRows(db, 'p', [toolResult('ghost', 'stray'), assistant('call', ['c1']), toolResult('c1', 'answer')]);
  const f = forkSession(db, 'p', { branch: 'b', at: a.seqs[1]! });
  assert.deepEqual(calls(db, f.sid), [['c1', forkMap(db, f.sid).get(a.seqs[1]!)!, null]]);
  assert.equal(orphanResults(db, f.sid), 1);
  await appendRows(db, 'b', [toolResult('c1', 'branch answer')]);
  assert.equal(orphanResults(db, f.sid), 1);
  assert.deepEqual(lines(db, 'b'), ['stray', 'call', 'branch answer']);
});

test('deleting a session with reused ids and orphans removes every call record and row', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  await appendRows(db, 's', [assistant('A1', ['c1']), toolResult('c1', 'r1'), assistant('A2', ['c1']), toolResult('zz', 'stray')]);
  assert.deepEqual(calls(db, sid), [
    ['c1', 1, 2],
    ['c1', 3, null],
  ]);
  assert.equal(deleteSession(db, 's'), true);
  assert.equal(count(db, 'SELECT count(*) FROM tool_calls'), 0);
  assert.equal(count(db, 'SELECT count(*) FROM transcript'), 0);
  assert.equal(orphanResults(db, sid), 0);
});
