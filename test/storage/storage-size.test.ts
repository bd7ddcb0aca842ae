// storage/storage-size.ts: the database's bytes divided among rows, their indexes, payloads and
// the rest, every page counted once; the page walk is reused until it is old.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { STORAGE_PARTS } from '../../protocol/methods.ts';
import { pageWalk, storageSize, PARTS_MAX_AGE_MS, unpackParts, type StorageParts } from '../../storage/storage-size.ts';
import { SearchWorker } from '../../storage/search/worker.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';
import { imageIn, pngBytes, tempDbWithPath, user } from './factories.ts';

const STATE_TABLES = BUILTIN_SET.stateTables;

test('the parts add up to the file with its free pages, and rows, indexes and payloads each get theirs', async (t) => {
  const { db, path } = tempDbWithPath(t);
  openSession(db, { session: 's' });
  const text = 'a line of transcript text that fills pages '.repeat(40);
  await appendRows(db, 's', Array.from({ length: 300 }, (_, i) => user(`${i} ${text}`, { key: `k${i}` })));
  await appendRows(db, 's', [{ kind: 'user', origin: 'user', content: [imageIn(await pngBytes(64, 48), 'image/png')] }]);
  db.pragma('wal_checkpoint(TRUNCATE)');
  const size = await storageSize(db, path, { walk: () => Promise.resolve(pageWalk(db, STATE_TABLES)) });
  const parts = size.parts!;
  assert.deepEqual(Object.keys(parts).sort(), [...STORAGE_PARTS].sort());
  const pages = (db.pragma('page_count', { simple: true }) as number) * (db.pragma('page_size', { simple: true }) as number);
  const sum = Object.values(parts).reduce((a, b) => a + b, 0);
  assert.equal(sum + size.free_bytes, pages, 'every page is in one part or free');
  assert.equal(size.file_bytes, pages);
  assert.ok(parts.rows > 300 * text.length, `rows ${parts.rows}`);
  assert.ok(parts.row_indexes > 0 && parts.row_indexes < parts.rows);
  assert.ok(parts.payloads > 0);
  assert.ok(parts.engine > 0 && parts.other > 0, 'engine tables and the schema have pages');
});

test('a table an extension names as its state counts as strategy state, with its shadow tables', async (t) => {
  const { db } = tempDbWithPath(t);
  openSession(db, { session: 's' });
  db.exec('CREATE VIRTUAL TABLE demo_fts USING fts5(body)');
  db.prepare('INSERT INTO demo_fts (body) VALUES (?)').run('words to index '.repeat(2000));
  const unnamed = pageWalk(db, STATE_TABLES);
  const named = pageWalk(db, [...STATE_TABLES, 'demo_fts']);
  assert.ok(named.strategy_state > unnamed.strategy_state, `${named.strategy_state} > ${unnamed.strategy_state}`);
  assert.equal(named.strategy_state - unnamed.strategy_state, unnamed.other - named.other, 'the FTS table and its shadows moved from other to strategy state');
});

test('without a walk asked for there are no parts; a walk is reused until it is older than the bound; the totals are always current', async (t) => {
  const { db, path } = tempDbWithPath(t);
  openSession(db, { session: 's' });
  const none = await storageSize(db, path, { now: 500 });
  assert.equal(none.parts, null);
  assert.equal(none.measured_at, null);
  let walks = 0;
  const walk = (): Promise<StorageParts> => ((walks += 1), Promise.resolve(pageWalk(db, STATE_TABLES)));
  const first = await storageSize(db, path, { now: 1000, walk });
  await appendRows(db, 's', Array.from({ length: 200 }, (_, i) => user(`row ${i} `.repeat(200))));
  const soon = await storageSize(db, path, { now: 1000 + PARTS_MAX_AGE_MS, walk });
  assert.equal(soon.measured_at, 1000);
  assert.deepEqual(soon.parts, first.parts);
  assert.equal(walks, 1);
  assert.ok(soon.wal_bytes > 0, 'the appends are in the WAL, measured now');
  const later = await storageSize(db, path, { now: 1001 + PARTS_MAX_AGE_MS, walk });
  assert.equal(later.measured_at, 1001 + PARTS_MAX_AGE_MS);
  assert.ok(later.parts!.rows > first.parts!.rows);
  // Without a walk asked for, the last one's parts come back as they are.
  assert.deepEqual((await storageSize(db, path, { now: 10 * PARTS_MAX_AGE_MS })).parts, later.parts);
});

test('the search worker walks the pages on its own connection and finds what the writer does', async (t) => {
  const { db, path } = tempDbWithPath(t);
  openSession(db, { session: 's' });
  await appendRows(db, 's', Array.from({ length: 100 }, (_, i) => user(`row ${i} `.repeat(100))));
  db.pragma('wal_checkpoint(TRUNCATE)');
  const worker = new SearchWorker(path);
  t.after(() => worker.close());
  assert.deepEqual(unpackParts(await worker.pageParts(STATE_TABLES)), pageWalk(db, STATE_TABLES));
});
