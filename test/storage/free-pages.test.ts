// Free pages go back to the file system: a new file is created in incremental auto-vacuum mode,
// releaseFreePages gives back as many pages as asked (all without a limit) and the file shrinks
// at the checkpoint; a file made before keeps its mode and releases nothing, without error.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { freePages, openDb, releaseFreePages, type Db } from '../../storage/db.ts';
import { deleteSession, openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { PAGE_OF_TEXT, user } from './factories.ts';

function tempFile(t: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-free-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'albedo.db');
}

/** A session of 600 rows of ~4 KB, deleted again: about 600 pages left free. */
async function freedSession(db: Db): Promise<void> {
  openSession(db, { session: 'big' });
  for (let b = 0; b < 6; b++) {
    await appendRows(db, 'big', Array.from({ length: 100 }, (_v, i) => user(`${b}:${i} ${PAGE_OF_TEXT}`)));
  }
  assert.equal(deleteSession(db, 'big'), true);
}

test('a new file gives its free pages back, as many as asked, and shrinks at the checkpoint', async (t) => {
  const file = tempFile(t);
  const db = openDb(file, { synchronous: 'NORMAL' });
  t.after(() => db.close());
  assert.equal(db.pragma('auto_vacuum', { simple: true }), 2, 'INCREMENTAL');
  await freedSession(db);
  const free = freePages(db);
  assert.ok(free > 400, `${free} free pages`);
  db.pragma('wal_checkpoint(TRUNCATE)');
  const size = fs.statSync(file).size;
  assert.equal(releaseFreePages(db, 100), 100);
  assert.equal(freePages(db), free - 100);
  assert.equal(releaseFreePages(db), free - 100, 'without a limit, all the rest');
  assert.equal(freePages(db), 0);
  assert.equal(releaseFreePages(db), 0, 'nothing left');
  db.pragma('wal_checkpoint(TRUNCATE)');
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  assert.ok(size - fs.statSync(file).size >= free * pageSize, `the file shrank by ${size - fs.statSync(file).size} bytes`);
  assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
});

test('a file created before incremental vacuum keeps its mode and releases nothing', async (t) => {
  const file = tempFile(t);
  // What an earlier build made: tables first, in the default mode (NONE).
  const old = new Database(file);
  old.exec('CREATE TABLE placeholder (x INTEGER)');
  old.close();
  const db = openDb(file, { synchronous: 'NORMAL' });
  t.after(() => db.close());
  assert.equal(db.pragma('auto_vacuum', { simple: true }), 0);
  await freedSession(db);
  assert.ok(freePages(db) > 400);
  assert.equal(releaseFreePages(db), 0);
  assert.ok(freePages(db) > 400, 'the pages stay free for later writes');
});
