// The background indexer off the main thread: indexSlice gives the write lock back (rolling its
// rows back) the moment a request wants it, commits what it did when its time is up, and the
// thread (storage/index-worker.ts) indexes nothing while a request is marked, catches up once
// none is, and leaves the index exact when rows are deleted while it works.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import type { Db } from '../../storage/db.ts';
import { SearchIndexer } from '../../storage/index-worker.ts';
import { hasPending, indexedThrough, indexSlice, searchIndexLag } from '../../storage/search-index.ts';
import { deleteSession, openSession } from '../../storage/sessions.ts';
import { appendRows } from '../../storage/transcript.ts';
import { count, tempDb, tempDbWithPath, user } from './factories.ts';

async function add(db: Db, session: string, texts: string[]): Promise<number[]> {
  return (await appendRows(db, session, texts.map((x) => user(x)))).seqs;
}

const rows = (n: number, word: string): string[] => Array.from({ length: n }, (_v, i) => `${word} row ${i}`);
const indexedRows = (db: Db): number => count(db, 'SELECT count(*) FROM search_rows');
const matches = (db: Db, word: string): number => count(db, `SELECT count(*) FROM transcript_fts WHERE transcript_fts MATCH '"${word}"'`);

/** Polls until `done()` (the thread works at its own pace); fails after a generous deadline. */
async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (done()) return;
    await sleep(50);
  }
  assert.fail(`gave up waiting: ${what}`);
}

test('indexSlice rolls back everything when a request wants the lock mid-slice', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  await add(db, 's', rows(20, 'alpha'));
  let asked = 0;
  // The request "arrives" after three rows were indexed, and is asked about once: the slice
  // must act on that answer rather than look again.
  const r = indexSlice(db, { maxRows: 100, budgetMs: 60_000, yieldNow: () => ++asked === 4 });
  assert.deepEqual(r, { indexed: 0, end: 'yielded' });
  assert.equal(indexedThrough(db), 0);
  assert.equal(indexedRows(db), 0);
  assert.equal(matches(db, 'alpha'), 0);
});

test('indexSlice commits the rows done when its time is up, the cursor on the last of them', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  const seqs = await add(db, 's', rows(20, 'alpha'));
  // A budget of 0 ends the slice after its first row.
  assert.deepEqual(indexSlice(db, { maxRows: 100, budgetMs: 0, yieldNow: () => false }), { indexed: 1, end: 'budget' });
  assert.equal(indexedThrough(db), seqs[0]);
  assert.equal(indexedRows(db), 1);
  // maxRows reached exactly: there may be more, so not caught up yet.
  assert.deepEqual(indexSlice(db, { maxRows: 19, budgetMs: 60_000, yieldNow: () => false }), { indexed: 19, end: 'budget' });
  assert.equal(indexedThrough(db), seqs[19]);
  assert.deepEqual(indexSlice(db, { maxRows: 19, budgetMs: 60_000, yieldNow: () => false }), { indexed: 0, end: 'caught-up' });
  assert.equal(matches(db, 'alpha'), 20);
  assert.equal(searchIndexLag(db), 0);
});

test('the indexer thread indexes nothing while a request is marked, and catches up after', async (t) => {
  const { db, path } = tempDbWithPath(t);
  const errors: string[] = [];
  const indexer = new SearchIndexer(path, { idleMs: 0, sliceMs: 2, onError: (m) => errors.push(m) });
  t.after(() => indexer.close());
  openSession(db, { session: 's' });
  await add(db, 's', rows(200, 'alpha'));
  const waited = indexer.requestStarted();
  assert.equal(waited, undefined, 'no thread yet, so nothing holds the lock');
  indexer.kick(() => hasPending(db));
  assert.ok(indexer.running);
  // Long enough for the thread to start and index everything if it ignored the request.
  await sleep(1500);
  assert.equal(indexedThrough(db), 0);
  indexer.requestEnded();
  await until(() => searchIndexLag(db) === 0, 'the index to catch up');
  assert.equal(matches(db, 'alpha'), 200);
  // New rows wake the caught-up thread.
  await add(db, 's', rows(50, 'beta'));
  indexer.kick(() => hasPending(db));
  await until(() => searchIndexLag(db) === 0, 'the new rows to be indexed');
  assert.equal(matches(db, 'beta'), 50);
  assert.deepEqual(errors, []);
});

test('rows deleted while the thread indexes leave no trace in the index', async (t) => {
  const { db, path } = tempDbWithPath(t);
  const errors: string[] = [];
  const indexer = new SearchIndexer(path, { idleMs: 0, sliceMs: 1, onError: (m) => errors.push(m) });
  t.after(() => indexer.close());
  for (let i = 0; i < 8; i++) {
    openSession(db, { session: `s${i}` });
    await add(db, `s${i}`, rows(150, `word${i}`));
  }
  indexer.kick(() => hasPending(db));
  // Delete every other session while the thread works through the backlog: a deleted row is
  // either not indexed yet or was indexed and is removed by the delete trigger in the same
  // transaction, whichever connection committed first.
  for (let i = 0; i < 8; i += 2) {
    const waited = indexer.requestStarted();
    if (waited !== undefined) await waited;
    try {
      deleteSession(db, `s${i}`);
    } finally {
      indexer.requestEnded();
    }
    await sleep(20);
  }
  indexer.kick(() => hasPending(db));
  await until(() => searchIndexLag(db) === 0, 'the index to catch up');
  for (let i = 0; i < 8; i++) assert.equal(matches(db, `word${i}`), i % 2 === 0 ? 0 : 150, `session s${i}`);
  assert.equal(indexedRows(db), count(db, 'SELECT count(*) FROM transcript'));
  assert.equal(count(db, 'SELECT count(*) FROM search_rows WHERE seq NOT IN (SELECT seq FROM transcript)'), 0);
  assert.deepEqual(errors, []);
});

test('close stops the thread even mid-backlog', async (t) => {
  const { db, path } = tempDbWithPath(t);
  const indexer = new SearchIndexer(path, { idleMs: 0, sliceMs: 1, onError: () => undefined });
  openSession(db, { session: 's' });
  await add(db, 's', rows(2000, 'gamma'));
  indexer.kick(() => hasPending(db));
  await until(() => indexedThrough(db) > 0, 'some indexing');
  await indexer.close();
  assert.equal(indexer.running, false);
  // Whatever was committed is consistent: every row up to the cursor is indexed, none past it.
  const through = indexedThrough(db);
  assert.equal(indexedRows(db), count(db, `SELECT count(*) FROM transcript WHERE seq <= ${through}`));
});

test('close ends a thread that is about to sleep until the next rows', async (t) => {
  const { path } = tempDbWithPath(t);
  // Nothing to index: each thread finds itself caught up and goes to wait for a wake; the stop
  // may land just before that wait, which must not then sleep through it.
  for (const delayMs of [0, 1, 5, 20, 50, 100]) {
    const indexer = new SearchIndexer(path, { idleMs: 0, sliceMs: 1, onError: () => undefined });
    indexer.kick(() => true);
    await sleep(delayMs);
    await indexer.close();
    assert.equal(indexer.running, false, `closed after ${delayMs} ms`);
  }
});
