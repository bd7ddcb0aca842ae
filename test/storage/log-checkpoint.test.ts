// The daemon's checkpoints of the write-ahead log (storage/log-checkpoint.ts): SQLite's automatic
// checkpoint, which fsyncs on the event loop inside whichever commit crosses its threshold, is off;
// the checkpointer copies the log into the database file between two writes-out from the thread
// pool, and keeps the log from being overwritten until the database file is on disk.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test, type TestContext } from 'node:test';
import { pino } from 'pino';
import { openDb, type Db } from '../../storage/db.ts';
import { CHECKPOINT_FRAMES, LOG_SIZE_LIMIT, LogCheckpointer, logState, type LogCheckpointerOptions } from '../../storage/log-checkpoint.ts';

interface Setup {
  db: Db;
  file: string;
  cp: LogCheckpointer;
  /** The files written out, in order. */
  synced: string[];
  /** Error lines logged. */
  errors: string[];
}

function setup(t: TestContext, opts: Partial<LogCheckpointerOptions> = {}): Setup {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-ckpt-'));
  const file = path.join(dir, 'albedo.db');
  const db = openDb(file, { synchronous: 'FULL' });
  db.exec('CREATE TABLE filler (id INTEGER PRIMARY KEY, pad BLOB NOT NULL)');
  // The schema's frames out of the way: each test starts from an empty log.
  db.pragma('wal_checkpoint(TRUNCATE)');
  const synced: string[] = [];
  const errors: string[] = [];
  const log = pino({ level: 'error' }, { write: (line: string) => void errors.push(line) });
  const cp = new LogCheckpointer(db, {
    log,
    frames: 200,
    checkEveryMs: 5,
    syncFile: (p) => {
      synced.push(path.basename(p));
      return Promise.resolve();
    },
    ...opts,
  });
  t.after(async () => {
    await cp.close();
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { db, file, cp, synced, errors };
}

/**
 * Commits about `pages` pages of new rows (one 4 KiB row a page), and tells `cp` that something
 * was written, as the daemon's requests and idle work do.
 */
function write(db: Db, pages: number, cp?: LogCheckpointer): void {
  const insert = db.prepare('INSERT INTO filler (pad) VALUES (?)');
  db.transaction(() => {
    for (let i = 0; i < pages; i++) insert.run(Buffer.alloc(4000, i % 256));
  })();
  cp?.wake();
}

/** The log's length in frames (the wal-index's count, which a restart of the log sets back). */
const logFrames = (file: string): number => logState(file).frames;

async function until(what: string, cond: () => boolean): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (cond()) return;
    await sleep(5);
  }
  assert.fail(`timed out waiting for ${what}`);
}

test("the connection's automatic checkpoint is off while the checkpointer runs, and back once it is closed", async (t) => {
  const { db, cp } = setup(t);
  assert.equal(db.pragma('wal_autocheckpoint', { simple: true }), 0);
  await cp.close();
  assert.equal(db.pragma('wal_autocheckpoint', { simple: true }), CHECKPOINT_FRAMES);
});

test('past its threshold the log is copied into the database file: the log written out first, the database file after', async (t) => {
  const { db, cp, synced } = setup(t);
  write(db, 20, cp);
  await sleep(30);
  assert.equal(cp.done, 0, 'under the threshold nothing runs');
  assert.ok(cp.framesWaiting() >= 20, `framesWaiting ${cp.framesWaiting()}`);
  write(db, 250, cp);
  await until('a checkpoint', () => cp.done > 0);
  assert.deepEqual(synced.slice(0, 2), ['albedo.db-wal', 'albedo.db']);
  assert.equal(cp.framesWaiting(), 0);
});

test('without the checkpointer a commit past the threshold checkpoints inside the commit, with it the commit does not', (t) => {
  // The behaviour the checkpointer replaces: SQLite's own checkpoint in the commit itself.
  const { db, file, cp } = setup(t, { checkEveryMs: 60_000 });
  write(db, CHECKPOINT_FRAMES + 50, cp);
  const ours = logState(file);
  assert.ok(ours.frames > CHECKPOINT_FRAMES && ours.copied === 0, `the commit left its frames in the log: ${JSON.stringify(ours)}`);
  const plain = openDb(path.join(path.dirname(file), 'plain.db'), { synchronous: 'FULL' });
  t.after(() => plain.close());
  plain.exec('CREATE TABLE filler (id INTEGER PRIMARY KEY, pad BLOB NOT NULL)');
  write(plain, CHECKPOINT_FRAMES + 50);
  const state = logState(path.join(path.dirname(file), 'plain.db'));
  assert.ok(state.frames > CHECKPOINT_FRAMES && state.copied === state.frames, `SQLite checkpointed the whole log in the commit: ${JSON.stringify(state)}`);
});

test('the log is not written over until the database file is on disk', async (t) => {
  // The first write-out of the database file waits until released; later ones do not.
  let releaseDbSync: (() => void) | undefined;
  let held = false;
  const { db, file, cp } = setup(t, {
    syncFile: (p) => {
      if (p.endsWith('-wal') || held) return Promise.resolve();
      held = true;
      return new Promise<void>((resolve) => (releaseDbSync = resolve));
    },
  });
  write(db, 250, cp);
  await until('the copy done, the database file not yet on disk', () => cp.framesWaiting() === 0);
  const before = logFrames(file);
  // A commit now would restart the log from its first frame if nothing pinned it; the pin makes it append.
  write(db, 3, cp);
  assert.ok(logFrames(file) > before, `the log grew from ${before} to ${logFrames(file)} frames instead of restarting`);
  assert.ok(releaseDbSync !== undefined);
  releaseDbSync();
  await until('the checkpoint finished', () => cp.done === 1);
  // With the pin released, the commit after the next full copy restarts the log.
  await cp.checkpointNow();
  write(db, 3, cp);
  assert.ok(logFrames(file) <= 10, `the log restarted (${logFrames(file)} frames)`);
});

test('under writes without a pause the log starts over once it is HARD_FRAMES long, and its file is cut back', async (t) => {
  // Each write-out takes a while, as a disk's does: the copies never catch up with the writes.
  const { db, file, cp } = setup(t, {
    frames: 50,
    hardFrames: 400,
    syncFile: () => new Promise<void>((resolve) => setTimeout(resolve, 3)),
  });
  let longest = 0;
  for (let i = 0; i < 300; i++) {
    write(db, 8, cp);
    longest = Math.max(longest, logFrames(file));
    await sleep(1);
  }
  assert.ok(cp.done > 0, 'checkpoints ran off the loop');
  assert.ok(cp.onLoop > 0, 'and at the bound one ran on the loop');
  // 2,400 pages were written; without the bound the log held them all. With it, the log holds
  // what is written past 400 frames until a check finds no checkpoint running (a loaded machine
  // stretches that), far from all of it.
  assert.ok(longest < 1200, `the log reached ${longest} frames`);
  assert.equal(db.pragma('journal_size_limit', { simple: true }), LOG_SIZE_LIMIT);
});

test('a quiet daemon is not woken to look at its log: the looks stop once every frame is copied, and a write starts them again', async (t) => {
  const { db, cp } = setup(t);
  await until('the looks stopped on an empty log', () => !cp.watching);
  write(db, 250, cp);
  assert.equal(cp.watching, true);
  await until('a checkpoint', () => cp.done > 0);
  await until('the looks stopped again', () => !cp.watching);
  assert.equal(cp.framesWaiting(), 0);
});

test('checkpointNow copies whatever the log holds, below the threshold too', async (t) => {
  const { db, cp } = setup(t, { checkEveryMs: 60_000 });
  write(db, 5, cp);
  assert.ok(cp.framesWaiting() >= 5);
  await cp.checkpointNow();
  assert.equal(cp.done, 1);
  assert.equal(cp.framesWaiting(), 0);
  await cp.checkpointNow();
  assert.equal(cp.done, 1, 'nothing waiting, nothing run');
});

test('a write-out that fails is logged once and gives the checkpoints back to SQLite; nothing committed is lost', async (t) => {
  const { db, file, cp, errors } = setup(t, { syncFile: () => Promise.reject(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })) });
  write(db, 250, cp);
  await until('the failure logged', () => errors.length > 0);
  assert.equal(errors.length, 1);
  assert.match(errors[0]!, /could not be checkpointed in the background/);
  assert.match(errors[0]!, /"method":"checkpoint"/);
  assert.equal(db.pragma('wal_autocheckpoint', { simple: true }), CHECKPOINT_FRAMES);
  write(db, 250, cp);
  await sleep(30);
  assert.equal(errors.length, 1, 'not tried again');
  assert.equal(cp.done, 0);
  assert.ok(logFrames(file) > 0);
  assert.equal(db.prepare('SELECT count(*) FROM filler').pluck().get(), 500);
});

test('rows survive checkpoints and a reopen', async (t) => {
  const { db, file, cp } = setup(t, { syncFile: undefined });
  for (let i = 0; i < 5; i++) {
    write(db, 40, cp);
    await cp.checkpointNow();
  }
  assert.ok(cp.done >= 4);
  const other = openDb(file);
  t.after(() => other.close());
  assert.equal(other.prepare('SELECT count(*) FROM filler').pluck().get(), 200);
  assert.equal(other.pragma('integrity_check', { simple: true }), 'ok');
});
