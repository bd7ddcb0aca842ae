// Commits whose fsync is owed (storage/db.ts commitOwed, durable): a compaction's commits, the
// notes it rewrites and the image elision after it no longer wait for the disk on the event loop
// (a loaded disk held one such fsync 135-155 ms, every session waiting); the daemon pays the
// fsync off the loop, once for every commit owed meanwhile, before the request goes out.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { finishElision } from '../../daemon/image-elision.ts';
import { commitOwed, durable, openDb, owedCommitState, type Db } from '../../storage/db.ts';
import { elisionStats, scheduleElision } from '../../storage/images/elision.ts';
import { loadNotes } from '../../storage/state/notes.ts';
import { loadRollingState } from '../../storage/state/rolling.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import type { Strategy } from '../../strategies/contract.ts';
import { notesLayer } from '../../strategies/notes/notes.ts';
import { prepareRequest } from '../../strategies/prepare.ts';
import { rolling } from '../../strategies/rolling/rolling.ts';
import { argsFor, RecordingSummarizer, sessionWithTurns, setupFor } from '../strategies/engine-fixtures.ts';
import { assistant, imageIn, pngBytes, toolResult, user } from './factories.ts';

/** A database file opened at FULL, as the daemon opens its own, with a second connection's view of it. */
function fullDb(t: TestContext): { db: Db; fresh: () => Db } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-owed-'));
  const file = path.join(dir, 'albedo.db');
  const db = openDb(file, { synchronous: 'FULL' });
  const others: Db[] = [];
  t.after(() => {
    for (const o of others) o.close();
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return {
    db,
    fresh: () => {
      const o = openDb(file, { synchronous: 'FULL' });
      others.push(o);
      return o;
    },
  };
}

const level = (db: Db): unknown => db.pragma('synchronous', { simple: true });

/** The synchronous level each write transaction of `db` ran at, from now on. */
function recordTransactionLevels(db: Db): number[] {
  const levels: number[] = [];
  const transaction = db.transaction.bind(db);
  db.transaction = ((fn: (...args: unknown[]) => unknown) =>
    transaction((...args: unknown[]) => {
      levels.push(level(db) as number);
      return fn(...args);
    })) as Db['transaction'];
  return levels;
}

test('an owed commit runs at NORMAL on a FULL connection, and durable pays its fsync once for all owed', async (t) => {
  const { db, fresh } = fullDb(t);
  assert.equal(level(db), 2);
  const seen = commitOwed(db, () => {
    openSession(db, { session: 'a' });
    return level(db);
  });
  assert.equal(seen, 1, 'the commit itself does not wait for an fsync');
  assert.equal(level(db), 2, 'the connection keeps its own level');
  commitOwed(db, () => openSession(db, { session: 'b' }));
  assert.deepEqual(owedCommitState(db), { pending: 2, flushes: 0 });
  // Two waiters meanwhile share one flush.
  await Promise.all([durable(db), durable(db)]);
  assert.deepEqual(owedCommitState(db), { pending: 0, flushes: 1 });
  // Nothing owed: nothing flushed.
  await durable(db);
  assert.equal(owedCommitState(db).flushes, 1);
  assert.deepEqual(fresh().prepare('SELECT name FROM sessions ORDER BY sid').pluck().all(), ['a', 'b']);
  // A throw rolls the transaction back and owes nothing.
  assert.throws(() =>
    commitOwed(db, () => {
      openSession(db, { session: 'lost' });
      throw new Error('boom');
    }), /boom/);
  assert.equal(owedCommitState(db).pending, 0);
  assert.equal(level(db), 2);
});

test('a compaction commits its state and the notes without an fsync on the loop, and is on disk when prepareRequest resolves', async (t) => {
  const { db, fresh } = fullDb(t);
  await sessionWithTurns(db, 's', 30);
  // The strategy's own commit runs inside the engine's commit: record the level it sees there.
  const commitLevels: unknown[] = [];
  const observed: Strategy = {
    ...rolling,
    async compact(input, first, opts) {
      const out = await rolling.compact(input, first, opts);
      const commit = out.commit;
      return { ...out, commit: () => (commitLevels.push(level(db)), commit?.()) };
    },
  };
  const levels = recordTransactionLevels(db);
  const setup = setupFor({ window: 8000, strategy: observed, summarizer: new RecordingSummarizer(), layers: [notesLayer({ budgetTokens: 500 })] });
  const out = await prepareRequest(setup, argsFor(db, 's', { force: true }));
  assert.equal(out.compacted, true);
  assert.deepEqual(commitLevels, [1]);
  assert.ok(levels.length >= 2, `the engine's commit and the notes' saves ran as transactions: ${levels.length}`);
  assert.deepEqual(levels.filter((l) => l !== 1), [], 'no write transaction of the compaction waited for an fsync');
  assert.equal(owedCommitState(db).pending, 0, 'what was owed was flushed before the request was handed back');
  assert.ok(owedCommitState(db).flushes >= 1);
  const other = fresh();
  const sid = argsFor(db, 's').session.sid;
  assert.ok(loadRollingState(other, sid) !== undefined, 'the summary is there for another connection');
  const notes = loadNotes(other, sid);
  assert.ok(notes !== undefined && 'text' in notes && notes.text !== '', 'so are the notes');
});

test('an elision job owes its batches and has paid for them when finishElision resolves', async (t) => {
  const { db } = fullDb(t);
  openSession(db, { session: 's' });
  let last = 0;
  for (let i = 0; i < 6; i++) {
    const { seqs } = await appendRows(db, 's', [
      user(`look at view ${i}`),
      assistant(`checking ${i}`, [`c${i}`]),
      toolResult(`c${i}`, `view ${i} rendered`, { images: [imageIn(await pngBytes(40 + i, 30), 'image/png')] }),
    ]);
    last = seqs[2]!;
  }
  const sid = argsFor(db, 's').session.sid;
  scheduleElision(db, sid, last);
  const levels = recordTransactionLevels(db);
  const done = await finishElision(db, sid);
  assert.equal(done.images, 5);
  assert.ok(levels.length >= 1 && levels.every((l) => l === 1), `batches at NORMAL: ${JSON.stringify(levels)}`);
  assert.equal(owedCommitState(db).pending, 0);
  assert.equal(elisionStats(db, sid).pending, false);
});

test('an append owes its fsync and has paid it when it resolves; a failing batch owes nothing', async (t) => {
  const { db, fresh } = fullDb(t);
  openSession(db, { session: 's' });
  const levels = recordTransactionLevels(db);
  const flushes = owedCommitState(db).flushes;
  // Two sessions' appends at once may share a flush.
  await Promise.all([appendRows(db, 's', [user('first')]), appendRows(db, 's', [user('second')])]);
  assert.deepEqual(levels, [1, 1]);
  assert.equal(owedCommitState(db).pending, 0);
  assert.ok(owedCommitState(db).flushes - flushes >= 1);
  assert.equal(fresh().prepare('SELECT count(*) FROM transcript').pluck().get(), 2);
  await assert.rejects(appendRows(db, 's', [toolResult('c1', 'x'), user('y', { key: 'k' }), user('z', { key: 'k' })]), { code: 'key_conflict' });
  assert.equal(fresh().prepare('SELECT count(*) FROM transcript').pluck().get(), 2, 'nothing of the failed batch was stored');
  assert.equal(owedCommitState(db).pending, 0);
  assert.equal(level(db), 2);
});
