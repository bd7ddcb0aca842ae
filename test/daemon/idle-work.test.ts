// The daemon's work between requests (daemon/idle-work.ts) on a real database file: nothing runs
// while a request is in flight or one arrived moments ago; once quiet, long bodies still stored
// as text get packed, rows indexed and the index merged, and the log is checkpointed only after
// a longer quiet, once the rest is done; lcm summaries a compaction left waiting are indexed after
// the rows.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import pino from 'pino';
import { BACKLOG_ROWS, freePagesKept, IdleWork, LONG_QUIET_MS, QUIET_MS, STARVED_MS, type IdleWorkHost } from '../../daemon/idle-work.ts';
import { freePages, type Db } from '../../storage/db.ts';
import { packingLag } from '../../storage/transcript/row-packing.ts';
import { mergeSummaryIndex } from '../../storage/state/lcm-tree.ts';
import { indexedThrough, mergeSearchIndex, searchIndexLag } from '../../storage/search/indexer.ts';
import { deleteSession, openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { commandOutput, PAGE_OF_TEXT, storeAsText, tempDb, user } from '../storage/factories.ts';
import { writeTree } from '../storage/lcm-trees.ts';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(what: string, cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/**
 * A host whose requests the test plays: `busy` while one is in flight, `moving` while its bytes
 * are, `touch` when one ends.
 */
function host(): { busy: boolean; moving: boolean; last: number; touch(): void; view: IdleWorkHost } {
  const h = {
    busy: false,
    moving: false,
    last: -1e9,
    touch() {
      h.last = performance.now();
    },
    view: { busy: () => h.busy, moving: () => h.moving, lastRequestAt: () => h.last },
  };
  return h;
}

async function dbWithRows(t: TestContext, n: number): Promise<Db> {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  await appendRows(db, 's', Array.from({ length: n }, (_v, i) => user(`row ${i} of the backlog, about widget-${i % 5}`)));
  return db;
}

function work(t: TestContext, db: Db, h: ReturnType<typeof host>, indexer = true): IdleWork {
  const w = new IdleWork(db, h.view, { indexer, log: pino({ level: 'silent' }) });
  t.after(() => w.stop());
  return w;
}

test('nothing runs while a request is in flight', async (t) => {
  const db = await dbWithRows(t, 50);
  const h = host();
  h.busy = true;
  const w = work(t, db, h);
  w.rowsAdded();
  await sleep(QUIET_MS * 4);
  assert.deepEqual(w.done, { pack: 0, index: 0, merge: 0, summaries: 0, summaryMerge: 0, release: 0, checkpoint: 0, flush: 0 });
  assert.equal(searchIndexLag(db), 50);
  h.busy = false;
  h.touch();
  await until('the backlog indexed', () => searchIndexLag(db) === 0);
});

test('a backlog of BACKLOG_ROWS is indexed while requests are in flight, but not while bytes are moving', async (t) => {
  const db = await dbWithRows(t, BACKLOG_ROWS + 200);
  const h = host();
  h.busy = true;
  h.moving = true;
  h.touch();
  const w = work(t, db, h);
  w.rowsAdded();
  await sleep(QUIET_MS * 4);
  assert.equal(w.done.index, 0, 'no unit while a request is arriving');
  h.moving = false;
  // Still in flight, never quiet: the backlog is indexed anyway, down to where quiet takes over.
  await until('the backlog below BACKLOG_ROWS', () => searchIndexLag(db) < BACKLOG_ROWS);
  const done = w.done.index;
  assert.ok(done > 0);
  // Below the bound the units wait for quiet again, as for an agent's few rows.
  await sleep(QUIET_MS * 4);
  assert.ok(w.done.index <= done + 1, `${w.done.index - done} more index units while busy below the bound`);
  assert.ok(searchIndexLag(db) > 0);
  h.busy = false;
  h.touch();
  await until('the rest indexed once quiet', () => searchIndexLag(db) === 0);
});

test('between the calls of a client calling every few milliseconds, a backlog waits STARVED_MS for quiet, then runs without it', async (t) => {
  const db = await dbWithRows(t, 2 * BACKLOG_ROWS + 200);
  const h = host();
  const w = work(t, db, h);
  w.rowsAdded();
  await until('a unit in quiet', () => w.done.index > 0);
  // From here a call ends every 5 ms: never quiet, never in flight.
  const calling = setInterval(() => h.touch(), 5);
  t.after(() => clearInterval(calling));
  h.touch();
  const calledAt = performance.now();
  const inQuiet = w.done.index + w.done.merge;
  // No unit starts before STARVED_MS: every look taken before then (read first, then the clock,
  // so a slow machine only takes fewer looks) finds none.
  let looks = 0;
  for (;;) {
    const units = w.done.index + w.done.merge;
    if (performance.now() - calledAt >= STARVED_MS - 20) break;
    assert.equal(units, inQuiet, 'no unit between calls before the backlog starves');
    looks++;
    await sleep(5);
  }
  assert.ok(looks > 0);
  await until('units between calls, once starved', () => w.done.index + w.done.merge > inQuiet);
  assert.ok(performance.now() - h.last < QUIET_MS, 'still calling');
});

test('a client calling every few milliseconds keeps the work waiting', async (t) => {
  const db = await dbWithRows(t, 50);
  const h = host();
  const w = work(t, db, h);
  w.rowsAdded();
  for (let i = 0; i < 20; i++) {
    h.touch();
    await sleep(QUIET_MS / 4);
  }
  assert.equal(w.done.index, 0);
  assert.equal(indexedThrough(db), 0);
});

test('once quiet, rows are indexed, the index merged, then the log checkpointed', async (t) => {
  const db = await dbWithRows(t, 400);
  const h = host();
  const w = work(t, db, h);
  let lagAtCheckpoint = -1;
  let mergeableAtCheckpoint: boolean | undefined;
  const pragma = db.pragma.bind(db);
  // Sees the state at the moment the checkpoint is taken.
  db.pragma = (source: string, options?: { simple?: boolean }) => {
    if (source.startsWith('wal_checkpoint')) {
      lagAtCheckpoint = searchIndexLag(db);
      mergeableAtCheckpoint = mergeSearchIndex(db, 1);
    }
    return pragma(source, options);
  };
  h.touch();
  w.rowsAdded();
  await until('a checkpoint', () => w.done.checkpoint > 0);
  assert.equal(lagAtCheckpoint, 0, 'indexing finished before the checkpoint');
  assert.equal(mergeableAtCheckpoint, false, 'merging finished before the checkpoint');
  assert.ok(w.done.index >= 2 && w.done.merge >= 1, JSON.stringify(w.done));
  assert.ok(performance.now() - h.last >= LONG_QUIET_MS);
  const [log] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number; checkpointed: number }>;
  assert.equal(log?.checkpointed, log?.log, 'the whole log was copied back');
});

test("once the rows are indexed, lcm summaries a compaction left waiting go into their index, every session's, and get merged", async (t) => {
  const db = await dbWithRows(t, 100);
  const a = openSession(db, { session: 's' });
  const b = openSession(db, { session: 'b' });
  // Enough summaries for several units and segments, as a large pass leaves them.
  const leaves = (from: number, word: string) => Array.from({ length: 150 }, (_v, i) => ({ first: from + i, last: from + i, summary: `${word} leaf ${i}: ${'the agent edited the parser and ran the tests. '.repeat(20)}` }));
  writeTree(db, a.sid, { leaves: leaves(1, 'alpha') });
  writeTree(db, b.sid, { leaves: leaves(200, 'bravo') });
  const waiting = (): number => db.prepare('SELECT count(*) FROM lcm_nodes WHERE indexed = 0').pluck().get() as number;
  const segments = (): number => db.prepare('SELECT count(*) FROM lcm_summary_fts_data WHERE id >= 1000').pluck().get() as number;
  assert.equal(waiting(), 300);
  // Where the rows' index stood each time a summary was marked indexed.
  db.exec(`CREATE TEMP TABLE rows_indexed_then (through INTEGER);
    CREATE TEMP TRIGGER summary_indexed AFTER UPDATE OF indexed ON main.lcm_nodes BEGIN
      INSERT INTO rows_indexed_then SELECT indexed_through FROM search_index_state;
    END;`);
  const h = host();
  const w = work(t, db, h);
  h.touch();
  w.rowsAdded();
  await until('a checkpoint', () => w.done.checkpoint > 0);
  const head = db.prepare('SELECT max(seq) FROM transcript').pluck().get();
  assert.deepEqual(db.prepare('SELECT DISTINCT through FROM rows_indexed_then').pluck().all(), [head], 'the rows were indexed first');
  assert.equal(waiting(), 0);
  assert.ok(w.done.summaries >= 3 && w.done.summaryMerge >= 1, JSON.stringify(w.done));
  assert.equal(mergeSummaryIndex(db, 1), false, 'nothing left to merge');
  assert.ok(segments() > 0);
  const hits = db.prepare('SELECT count(*) FROM lcm_summary_fts WHERE lcm_summary_fts MATCH \'"bravo leaf"\'').pluck().get();
  assert.equal(hits, 150);
});

test('units that commit without an fsync have the log written out from the thread pool, one flush at a time', async (t) => {
  const db = await dbWithRows(t, 400);
  const h = host();
  const w = work(t, db, h);
  h.touch();
  w.rowsAdded();
  await until('the backlog indexed', () => searchIndexLag(db) === 0);
  await until('a flush of the log', () => w.done.flush > 0);
  assert.ok(w.done.flush <= w.done.index + w.done.merge + w.done.pack + w.done.release, JSON.stringify(w.done));
  // Quiet with nothing committed since: no more flushes.
  await until('a checkpoint', () => w.done.checkpoint > 0);
  await sleep(QUIET_MS * 2);
  const flushes = w.done.flush;
  await sleep(LONG_QUIET_MS);
  assert.equal(w.done.flush, flushes);
});

test('a log flush that fails is logged once and not tried again; the background work goes on', async (t) => {
  const db = await dbWithRows(t, 400);
  const h = host();
  const lines: Array<{ level: number; method?: string; msg: string; err?: { message: string } }> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
  let attempts = 0;
  const failing = (): Promise<void> => {
    attempts++;
    return Promise.reject(new Error('EIO: the disk went away'));
  };
  const w = new IdleWork(db, h.view, { indexer: true, log, flushLog: failing });
  t.after(() => w.stop());
  h.touch();
  w.rowsAdded();
  await until('the backlog indexed', () => searchIndexLag(db) === 0);
  await until('the log flush tried', () => attempts > 0);
  // More rows, more unsynced units: the broken flush is not tried again.
  await appendRows(db, 's', Array.from({ length: 200 }, (_v, i) => user(`late row ${i}`)));
  h.touch();
  w.rowsAdded();
  await until('the new rows indexed', () => searchIndexLag(db) === 0);
  await sleep(QUIET_MS * 2);
  assert.equal(attempts, 1);
  assert.equal(w.done.flush, 0);
  const errors = lines.filter((l) => l.level >= 50);
  assert.equal(errors.length, 1, JSON.stringify(lines));
  assert.equal(errors[0]!.method, 'idle-work');
  assert.match(errors[0]!.err?.message ?? '', /the disk went away/);
});

test('with the indexer off, long bodies stored as text are still packed; the checkpoint waits for the long quiet', async (t) => {
  const db = await dbWithRows(t, 40);
  await appendRows(db, 's', Array.from({ length: 5 }, (_v, i) => user(commandOutput(`LONG ${i}`))));
  storeAsText(db);
  assert.equal(packingLag(db), 5);
  const h = host();
  const w = work(t, db, h, false);
  h.touch();
  w.rowsAdded();
  await sleep(QUIET_MS * 3);
  if (performance.now() - h.last < LONG_QUIET_MS) assert.equal(w.done.checkpoint, 0, 'not before the long quiet');
  await until('a checkpoint', () => w.done.checkpoint > 0);
  assert.deepEqual({ index: w.done.index, merge: w.done.merge, summaries: w.done.summaries }, { index: 0, merge: 0, summaries: 0 });
  assert.ok(w.done.pack >= 1);
  assert.equal(packingLag(db), 0);
  assert.equal(db.prepare('SELECT count(*) FROM transcript WHERE packed IS NOT NULL').pluck().get(), 5);
  assert.equal(searchIndexLag(db), 45);
});

test('a packing backlog (an upgraded file) takes turns with indexing, so rows get indexed while others are still being packed', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  for (let b = 0; b < 3; b++) await appendRows(db, 's', Array.from({ length: 100 }, (_v, i) => user(commandOutput(`BACKLOG ${b}:${i}`))));
  storeAsText(db);
  assert.equal(packingLag(db), 300);
  const h = host();
  const w = work(t, db, h);
  // The order units run in, seen through their counters.
  const order: string[] = [];
  for (const kind of ['pack', 'index'] as const) {
    let n = 0;
    Object.defineProperty(w.done, kind, {
      get: () => n,
      set: (v: number) => {
        n = v;
        order.push(kind);
      },
    });
  }
  h.touch();
  w.rowsAdded();
  await until('a checkpoint', () => w.done.checkpoint > 0);
  assert.equal(packingLag(db), 0);
  assert.equal(searchIndexLag(db), 0);
  const firstIndex = order.indexOf('index');
  assert.ok(firstIndex > 0 && order.lastIndexOf('pack') > firstIndex, `units ran in the order ${order.join(' ')}`);
});

test('the packer runs from the start until it has caught up once; later appends (packed as written) do not wake it', async (t) => {
  const db = await dbWithRows(t, 30);
  const h = host();
  const w = work(t, db, h);
  h.touch();
  w.rowsAdded();
  await until('a checkpoint', () => w.done.checkpoint > 0);
  const packUnits = w.done.pack;
  assert.ok(packUnits >= 1);
  await appendRows(db, 's', [user(commandOutput('LATER'))]);
  assert.equal(packingLag(db), 0, 'the append packed its row');
  const checkpoints = w.done.checkpoint;
  h.touch();
  w.rowsAdded();
  await until('the next checkpoint', () => w.done.checkpoint > checkpoints);
  assert.equal(w.done.pack, packUnits);
  assert.equal(searchIndexLag(db), 0);
});

test('after a long quiet, free pages beyond a reserve (a 32nd of the pages in use) go back to the file system', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'big' });
  for (let b = 0; b < 20; b++) {
    await appendRows(db, 'big', Array.from({ length: 100 }, (_v, i) => user(`${b}:${i} ${PAGE_OF_TEXT}`)));
  }
  assert.equal(deleteSession(db, 'big'), true);
  assert.ok(freePages(db) > freePagesKept(db) + 500, `${freePages(db)} free pages`);
  const h = host();
  const w = work(t, db, h, false);
  h.touch();
  w.requestDone();
  await sleep(QUIET_MS * 2);
  if (performance.now() - h.last < LONG_QUIET_MS) assert.equal(w.done.release, 0, 'not before the long quiet');
  await until('a checkpoint', () => w.done.checkpoint > 0);
  assert.ok(w.done.release >= 1);
  const used = (db.pragma('page_count', { simple: true }) as number) - freePages(db);
  assert.equal(freePages(db), Math.floor(used / 32));
  assert.ok(freePages(db) > 0, 'a reserve is kept');
});

test('stop cancels what was scheduled', async (t) => {
  const db = await dbWithRows(t, 30);
  const h = host();
  const w = work(t, db, h);
  w.rowsAdded();
  w.stop();
  w.rowsAdded();
  await sleep(QUIET_MS * 3);
  assert.deepEqual(w.done, { pack: 0, index: 0, merge: 0, summaries: 0, summaryMerge: 0, release: 0, checkpoint: 0, flush: 0 });
});
