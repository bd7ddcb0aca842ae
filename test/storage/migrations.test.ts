// Schema upgrades of databases written by older builds: a file built with the older migrations
// and filled the way those builds wrote it, then opened by this build, keeps every row and works.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { AlbedoError } from '../../protocol/errors.ts';
import type { StoredBody } from '../../protocol/rows.ts';
import { migrateExtension, openDb, type Db } from '../../storage/db.ts';
import { migrations } from '../../storage/migrations/index.ts';
import { ROW_TEXT_SQL, rowText } from '../../storage/transcript/row-text.ts';
import { appendRows, orphanResults } from '../../storage/transcript/write.ts';
import { OPENS_UNIT } from '../../storage/transcript/user-rows.ts';
import { assistant, rowsOf, toolResult, user } from './factories.ts';

function tempFile(t: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-migrate-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'albedo.db');
}

/** Inserts a row the way version-5 builds did (text derived from the body, call_id on results). */
function put(db: Db, sid: number, body: StoredBody, key: string | null = null): number {
  const rowClass = body.kind === 'user' ? 'user' : 'other';
  const callId = body.kind === 'tool_result' ? body.call_id : null;
  return Number(
    db
      .prepare('INSERT INTO transcript (sid, kind, row_class, key, call_id, body, text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
      .run(sid, body.kind, rowClass, key, callId, JSON.stringify(body), rowText(body), 1000).lastInsertRowid,
  );
}

const call = (text: string, ids: string[]): StoredBody => ({
  kind: 'assistant',
  content: [{ type: 'text', text }, ...ids.map((id) => ({ type: 'tool_call' as const, id, name: 'bash', arguments: { cmd: id } }))],
});
const result = (id: string, text: string): StoredBody => ({ kind: 'tool_result', call_id: id, is_error: false, content: [{ type: 'text', text }] });
const said = (text: string): StoredBody => ({ kind: 'user', origin: 'user', content: [{ type: 'text', text }] });

test('migration 6 upgrades a version-5 database with rows and calls, linking each call to its result', async (t) => {
  const file = tempFile(t);
  const v5 = openDb(file, { synchronous: 'NORMAL', migrations: migrations.filter((m) => m.version <= 5) });
  v5.prepare("INSERT INTO sessions (sid, name, created_at) VALUES (1, 'p', 1000)").run();
  put(v5, 1, said('fix it')); // 1
  put(v5, 1, call('two calls', ['c1', 'c2'])); // 2
  put(v5, 1, result('c1', 'out 1')); // 3
  put(v5, 1, said('typed'), 'k'); // 4
  put(v5, 1, call('third call', ['c3'])); // 5
  const calls = v5.prepare('INSERT INTO tool_calls (sid, call_id, seq) VALUES (?, ?, ?)');
  calls.run(1, 'c1', 2);
  calls.run(1, 'c2', 2);
  calls.run(1, 'c3', 5);
  // A fork of rows 1-3, as version-5 forks copied them.
  v5.prepare("INSERT INTO sessions (sid, name, created_at, parent_sid, fork_seq) VALUES (2, 'b', 1000, 1, 3)").run();
  for (const [parentSeq, body] of [[1, said('fix it')], [2, call('two calls', ['c1', 'c2'])], [3, result('c1', 'out 1')]] as const) {
    const seq = put(v5, 2, body);
    v5.prepare('INSERT INTO fork_rows (seq, parent_seq) VALUES (?, ?)').run(seq, parentSeq);
  }
  calls.run(2, 'c1', 7);
  calls.run(2, 'c2', 7);
  const before = v5.prepare('SELECT seq, sid, kind, row_class, key, call_id, body, text, created_at, graphemes FROM transcript ORDER BY seq').all();
  const forksBefore = v5.prepare('SELECT * FROM fork_rows ORDER BY seq').all();
  assert.equal(v5.prepare('SELECT max(version) FROM schema_migrations').pluck().get(), 5);
  v5.close();

  const db = openDb(file, { synchronous: 'NORMAL' });
  t.after(() => db.close());
  assert.ok(db.prepare('SELECT 1 FROM schema_migrations WHERE version = 6').get() !== undefined, 'migration 6 ran');
  // Text is derived from the body since migration 16 and reads as it was stored.
  const rowsNow = db.prepare(`SELECT seq, sid, kind, row_class, key, call_id, body, ${ROW_TEXT_SQL} AS text, created_at, graphemes FROM transcript ORDER BY seq`);
  assert.deepEqual(rowsNow.all(), before, 'every row kept as it was');
  assert.deepEqual(db.prepare('SELECT * FROM fork_rows ORDER BY seq').all(), forksBefore);
  assert.deepEqual(db.prepare('SELECT sid, call_id, seq, result_seq FROM tool_calls ORDER BY sid, seq, call_id').all(), [
    { sid: 1, call_id: 'c1', seq: 2, result_seq: 3 },
    { sid: 1, call_id: 'c2', seq: 2, result_seq: null },
    { sid: 1, call_id: 'c3', seq: 5, result_seq: null },
    { sid: 2, call_id: 'c1', seq: 7, result_seq: 8 },
    { sid: 2, call_id: 'c2', seq: 7, result_seq: null },
  ]);
  assert.deepEqual(db.pragma('foreign_key_check'), []);
  assert.deepEqual(db.pragma('integrity_check'), [{ integrity_check: 'ok' }]);

  // The upgraded file behaves like a new one: a late result settles beside its call and the
  // moved call record follows its row; an answered id can be used again, an open one cannot.
  const late = await appendRows(db, 'p', [toolResult('c2', 'out 2')]);
  assert.deepEqual(late.seqs, [4]);
  assert.deepEqual(late.moved, [
    { from: 4, to: 5 },
    { from: 5, to: 9 },
    { from: 9, to: 4 },
  ]);
  assert.deepEqual(rowsOf(db, 'p').map((r) => r.text.split('\n')[0]), ['fix it', 'two calls', 'out 1', 'out 2', 'typed', 'third call']);
  assert.deepEqual(db.prepare("SELECT seq, result_seq FROM tool_calls WHERE sid = 1 AND call_id = 'c3'").all(), [{ seq: 9, result_seq: null }]);
  await appendRows(db, 'p', [assistant('again', ['c1'])]);
  await assert.rejects(
    appendRows(db, 'p', [assistant('again', ['c3'])]),
    (e: unknown) => e instanceof AlbedoError && e.code === 'duplicate_tool_call' && e.details?.seq === 9,
  );
  assert.deepEqual((await appendRows(db, 'p', [user('typed', { key: 'k' })])).seqs, [5], 'the moved key still answers');
  // The branch's copied answer still counts: another result for c1 there is an orphan, and
  // c2's answer settles beside its call, before that orphan.
  const branch = await appendRows(db, 'b', [toolResult('c1', 'again'), toolResult('c2', 'out 2 in the branch')]);
  assert.deepEqual(branch.seqs, [12, 11]);
  assert.equal(orphanResults(db, 2), 1);
  assert.deepEqual(rowsOf(db, 'b').map((r) => [r.seq, r.text, (JSON.parse(r.body) as { orphan?: boolean }).orphan ?? false]), [
    [6, 'fix it', false],
    [7, 'two calls\n→ bash({"cmd":"c1"})\n→ bash({"cmd":"c2"})', false],
    [8, 'out 1', false],
    [11, 'out 2 in the branch', false],
    [12, 'again', true],
  ]);
  assert.deepEqual(db.prepare('SELECT seq, result_seq FROM tool_calls WHERE sid = 2 AND call_id = ?').all('c2'), [
    { seq: 7, result_seq: 11 },
  ]);
});

test('migration 10 moves the last prompt out of the sessions row and the next prepare stores it again', async (t) => {
  const file = tempFile(t);
  const v9 = openDb(file, { synchronous: 'NORMAL', migrations: migrations.filter((m) => m.version < 10) });
  v9.prepare("INSERT INTO sessions (name, created_at, last_model, last_instructions, last_tools) VALUES ('s', 1, 'm1', 'be brief', '[]')").run();
  v9.prepare("INSERT INTO sessions (name, created_at) VALUES ('bare', 1)").run();
  v9.close();

  const db = openDb(file);
  t.after(() => db.close());
  const { lastPrompt } = await import('../../storage/log/prepared-requests.ts');
  assert.deepEqual(lastPrompt(db, 1), { model: 'm1', instructions: 'be brief', tools: [] });
  assert.deepEqual(lastPrompt(db, 2), { model: null, instructions: '', tools: [] });
  assert.equal(db.prepare('SELECT hash FROM session_prompts WHERE sid = 1').pluck().get(), '', 'no hash: the next prepare writes the prompt');
  const columns = db.prepare("SELECT name FROM pragma_table_info('sessions')").pluck().all();
  assert.ok(!columns.includes('last_instructions') && !columns.includes('last_tools'));
});

test('migration 15 empties the row index for the indexer to refill with the full fold', async (t) => {
  const file = tempFile(t);
  const v14 = openDb(file, { synchronous: 'NORMAL', migrations: migrations.filter((m) => m.version <= 14) });
  const sid = Number(v14.prepare("INSERT INTO sessions (name, created_at) VALUES ('s', 1)").run().lastInsertRowid);
  put(v14, sid, said('die Straße'));
  put(v14, sid, said('STRASSE'));
  v14.prepare('UPDATE search_index_state SET indexed_through = 2').run();
  v14.prepare("INSERT INTO transcript_fts(rowid, text) VALUES (1, 'die straße'), (2, 'strasse')").run();
  v14.close();

  const db = openDb(file);
  t.after(() => db.close());
  const { indexedThrough, indexPending } = await import('../../storage/search/indexer.ts');
  const { grep } = await import('../../storage/search/grep.ts');
  assert.equal(indexedThrough(db), 0, 'the cursor starts over');
  assert.equal(db.prepare('SELECT count(*) FROM search_rows').pluck().get(), 0);
  const find = async (pattern: string): Promise<number> => (await grep(db, { pattern, offset: 0, limit: 10 })).total;
  assert.equal(await find('straße'), 2, 'scanned with the new fold');
  assert.equal(indexPending(db), 2);
  assert.equal(await find('straße'), 2, 'indexed with the new fold');
  assert.equal(await find('ß'), 2);
});

test('migration 16 stores row text once: reads, user rows, grep hits and previews are what the stored text gave', async (t) => {
  const file = tempFile(t);
  const v15 = openDb(file, { synchronous: 'NORMAL', migrations: migrations.filter((m) => m.version <= 15) });
  const sid = Number(v15.prepare("INSERT INTO sessions (name, created_at) VALUES ('s', 1)").run().lastInsertRowid);
  const other = Number(v15.prepare("INSERT INTO sessions (name, created_at) VALUES ('o', 1)").run().lastInsertRowid);
  const image: StoredBody = {
    kind: 'user',
    origin: 'user',
    content: [{ type: 'text', text: 'see the chart' }, { type: 'image', hash: 'ab'.repeat(32), media_type: 'image/png', width: 640, height: 480 }],
  };
  const notice: StoredBody = { kind: 'notice', body: { notice: 'capabilities_changed', context: 'Now with zebra tools' } };
  put(v15, sid, said('Die Größe der Datei')); // 1
  put(v15, sid, call('reading it', ['c1'])); // 2
  put(v15, sid, result('c1', 'STRASSE 12\nab')); // 3
  put(v15, sid, image); // 4
  put(v15, sid, notice); // 5
  // What a build before the nesting bound stored: deep arguments in the body and, unclamped, in the text.
  const levels = 70;
  const deep = { kind: 'assistant', content: [{ type: 'tool_call', id: 'c2', name: 'bash', arguments: JSON.parse(`${'{"a":'.repeat(levels)}"bottom"${'}'.repeat(levels)}`) as unknown }] };
  const deepText = `→ bash(${JSON.stringify(deep.content[0]!.arguments)})`;
  v15
    .prepare("INSERT INTO transcript (sid, kind, row_class, body, text, created_at) VALUES (?, 'assistant', 'other', ?, ?, 1000)")
    .run(sid, JSON.stringify(deep), deepText); // 6
  put(v15, sid, said('größe matters, zebra')); // 7
  // A body no reader can decode: the migration keeps its text instead of failing.
  v15.prepare("INSERT INTO transcript (sid, kind, row_class, body, text, created_at) VALUES (?, 'user', 'user', '{not json', 'corrupt but größe', 1000)").run(other); // 8
  put(v15, other, said('Größe elsewhere')); // 9
  // Rows 1-5 indexed as the v15 indexer did; the rest are scanned.
  v15.exec(`INSERT INTO transcript_fts(rowid, text, sid) SELECT seq, albedo_fold(text), sid FROM transcript WHERE seq <= 5;
    INSERT INTO search_rows(seq, sid, tail, chars) SELECT seq, sid, albedo_fold_tail(text), albedo_fold_chars(text) FROM transcript WHERE seq <= 5;
    UPDATE search_index_state SET indexed_through = 5`);
  const stored = v15.prepare('SELECT seq, text FROM transcript ORDER BY seq').all() as Array<{ seq: number; text: string }>;
  v15.close();
  // The same file with every row's old text kept beside it: how the readers answered before.
  const keptFile = path.join(path.dirname(file), 'kept.db');
  fs.copyFileSync(file, keptFile);

  const db = openDb(file);
  t.after(() => db.close());
  const kept = openDb(keptFile);
  t.after(() => kept.close());
  const keep = kept.prepare('UPDATE transcript SET legacy_text = ? WHERE seq = ?');
  for (const r of stored) keep.run(r.text, r.seq);

  const columns = db.prepare("SELECT name FROM pragma_table_info('transcript')").pluck().all();
  assert.ok(!columns.includes('text'), 'the text column is gone');
  assert.deepEqual(db.prepare('SELECT seq FROM transcript WHERE legacy_text IS NOT NULL ORDER BY seq').pluck().all(), [6, 8], 'only rows the body does not derive keep text');
  assert.deepEqual(db.prepare(`SELECT seq, ${ROW_TEXT_SQL} AS text FROM transcript ORDER BY seq`).all(), stored);

  const { readTranscript } = await import('../../storage/transcript/read.ts');
  const { userRowsAfter } = await import('../../storage/transcript/user-rows.ts');
  const { grep } = await import('../../storage/search/grep.ts');
  const { indexPending } = await import('../../storage/search/indexer.ts');
  const answers = async (d: Db): Promise<unknown[]> => {
    const out: unknown[] = [await readTranscript(d, { session: 's', offset: 0, limit: 100_000 }), userRowsAfter(d, sid, 0, 100)];
    for (const pattern of ['GRÖSSE', 'strasse', 'bottom', 'zebra', '[image', 'ab', 'z', 'ß']) {
      out.push(await grep(d, { pattern, offset: 0, limit: 50 }), await grep(d, { pattern, offset: 0, limit: 50, session: 's' }));
    }
    return out;
  };
  const before = await answers(kept);
  assert.deepEqual(await answers(db), before);
  assert.ok((before[0] as { text: string }).text.includes(`${'{"a":'.repeat(levels)}"bottom"`), 'the deep row reads as it was stored');
  // Indexed by this build: the same answers from the index.
  while (indexPending(db) > 0);
  while (indexPending(kept) > 0);
  assert.deepEqual(await answers(db), before);
  assert.deepEqual(await answers(kept), before);
});

test('each migration is announced before it runs, with the newest seq of the file it rewrites', (t) => {
  const file = tempFile(t);
  const told: Array<{ version: number; newestSeq: number }> = [];
  const fresh = openDb(file, { synchronous: 'NORMAL', migrations: migrations.filter((m) => m.version <= 15), onMigration: (m) => told.push(m) });
  assert.deepEqual(told.map((m) => m.newestSeq), told.map(() => 0), 'a new file has no rows');
  const sid = Number(fresh.prepare("INSERT INTO sessions (name, created_at) VALUES ('s', 1)").run().lastInsertRowid);
  const last = put(fresh, sid, said('hello'));
  put(fresh, sid, said('again'));
  fresh.close();
  told.length = 0;
  const db = openDb(file, { synchronous: 'NORMAL', onMigration: (m) => told.push({ version: m.version, newestSeq: m.newestSeq }) });
  db.close();
  const later = migrations.filter((m) => m.version > 15).map((m) => m.version);
  assert.ok(later.length > 0);
  assert.deepEqual(told, later.map((version) => ({ version, newestSeq: last + 1 })));
});

test('migration 17 reorders tool_calls by the call row and keeps every record, and keeps only unit openers in transcript_class', async (t) => {
  const file = tempFile(t);
  const v15 = openDb(file, { synchronous: 'NORMAL', migrations: migrations.filter((m) => m.version <= 15) });
  const sid = Number(v15.prepare("INSERT INTO sessions (name, created_at) VALUES ('s', 1)").run().lastInsertRowid);
  put(v15, sid, said('go')); // 1
  put(v15, sid, call('two', ['zz', 'aa'])); // 2
  put(v15, sid, result('zz', 'out zz')); // 3
  put(v15, sid, call('one', ['mm'])); // 4
  const calls = v15.prepare('INSERT INTO tool_calls (sid, call_id, seq, result_seq) VALUES (?, ?, ?, ?)');
  calls.run(sid, 'zz', 2, 3);
  calls.run(sid, 'aa', 2, null);
  calls.run(sid, 'mm', 4, null);
  v15.close();

  const db = openDb(file, { synchronous: 'NORMAL' });
  t.after(() => db.close());
  const pk = db.prepare("SELECT name FROM pragma_table_info('tool_calls') WHERE pk > 0 ORDER BY pk").pluck().all();
  assert.deepEqual(pk, ['seq', 'call_id'], 'keyed by the call row first, so appends write at the end');
  const indexes = db.prepare("SELECT name FROM pragma_index_list('tool_calls') WHERE origin = 'c' ORDER BY name").pluck().all();
  assert.deepEqual(indexes, ['tool_calls_open', 'tool_calls_result'], 'the key covers lookups by the call row');
  const classIndex = db.prepare("SELECT sql FROM sqlite_schema WHERE name = 'transcript_class'").pluck().get() as string;
  assert.match(classIndex, /WHERE row_class <> 'other'$/, 'only unit openers are in the class index');
  const userSeqs = db.prepare(`SELECT seq FROM transcript INDEXED BY transcript_class WHERE sid = ? AND row_class = 'user' AND ${OPENS_UNIT}`).pluck().all(sid);
  assert.deepEqual(userSeqs, [1], 'the index still finds the user rows stored before the migration');
  assert.deepEqual(db.prepare('SELECT sid, call_id, seq, result_seq FROM tool_calls ORDER BY seq, call_id').all(), [
    { sid, call_id: 'aa', seq: 2, result_seq: null },
    { sid, call_id: 'zz', seq: 2, result_seq: 3 },
    { sid, call_id: 'mm', seq: 4, result_seq: null },
  ]);
  assert.deepEqual(db.pragma('foreign_key_check'), []);

  // The open calls still answer and settle: aa's result moves beside its call.
  const late = await appendRows(db, 's', [toolResult('aa', 'out aa')]);
  assert.deepEqual(late.seqs, [4]);
  assert.deepEqual(db.prepare('SELECT call_id, seq, result_seq FROM tool_calls ORDER BY seq, call_id').all(), [
    { call_id: 'aa', seq: 2, result_seq: 4 },
    { call_id: 'zz', seq: 2, result_seq: 3 },
    { call_id: 'mm', seq: 5, result_seq: null },
  ]);
  await assert.rejects(
    appendRows(db, 's', [assistant('again', ['mm'])]),
    (e: unknown) => e instanceof AlbedoError && e.code === 'duplicate_tool_call' && e.details?.seq === 5,
  );
});

test('migration 25 keeps the summaries indexed so far in the index, and later passes wait for lcm_grep', async (t) => {
  const file = tempFile(t);
  const v24 = openDb(file, { synchronous: 'NORMAL', migrations: migrations.filter((m) => m.version <= 24) });
  const sid = Number(v24.prepare("INSERT INTO sessions (name, created_at) VALUES ('s', 1)").run().lastInsertRowid);
  // Written by the insert trigger of migration 8.
  const old = Number(
    v24.prepare("INSERT INTO lcm_nodes (sid, depth, first_seq, last_seq, summary, estimated_tokens, source_tokens, created_at) VALUES (?, 0, 1, 2, 'the Okapi summary', 5, 9, 1)").run(sid).lastInsertRowid,
  );
  v24.close();

  const db = openDb(file);
  t.after(() => db.close());
  const { writeTreePass } = await import('../../storage/state/lcm-tree.ts');
  const { grepTree } = await import('../../storage/state/lcm-read.ts');
  const { LcmGrepParams } = await import('../../protocol/methods.ts');
  assert.equal(db.prepare('SELECT indexed FROM lcm_nodes WHERE node = ?').pluck().get(old), 1);
  const [added] = db.transaction(() =>
    writeTreePass(db, sid, { drafts: [{ depth: 0, firstSeq: 3, lastSeq: 4, summary: 'another okapi', estimatedTokens: 4, sourceTokens: 9, pointer: false, backend: null, children: [] }], coveredSeq: 4 })
  )();
  assert.equal(db.prepare('SELECT indexed FROM lcm_nodes WHERE node = ?').pluck().get(added), 0);
  const hits = await grepTree(db, LcmGrepParams.parse({ session: 's', pattern: 'OKAPI' }));
  assert.deepEqual(hits.summaries.matches.map((m) => m.node), [old, added]);
  // A summary rewritten after indexing is indexed again under its new text.
  db.prepare("UPDATE lcm_nodes SET summary = 'now a zebra' WHERE node = ?").run(old);
  assert.deepEqual((await grepTree(db, LcmGrepParams.parse({ session: 's', pattern: 'okapi' }))).summaries.matches.map((m) => m.node), [added]);
  assert.deepEqual((await grepTree(db, LcmGrepParams.parse({ session: 's', pattern: 'zebra' }))).summaries.matches.map((m) => m.node), [old]);
});

test('migration 32 moves an archive text into its first part: the archive reads back the same, and the next save grows it by parts', async (t) => {
  const file = tempFile(t);
  const v31 = openDb(file, { synchronous: 'NORMAL', migrations: migrations.filter((m) => m.version <= 31) });
  const sid = Number(v31.prepare("INSERT INTO sessions (name, created_at) VALUES ('s', 1)").run().lastInsertRowid);
  const empty = Number(v31.prepare("INSERT INTO sessions (name, created_at) VALUES ('empty', 1)").run().lastInsertRowid);
  const insert = v31.prepare(
    `INSERT INTO snapcompact_archive (sid, text, marks, folds, cut, cut_seq, resume_seq, rewrites, updated_at)
     VALUES (?, ?, ?, '[]', '{"format":2,"users":1,"fingerprint":"f"}', 2, 2, 0, 1000)`,
  );
  insert.run(sid, '¶user: fix the build\n¶ai: done', '[[0,1],[21,2]]');
  insert.run(empty, '', '[]');
  v31.close();

  const db = openDb(file);
  t.after(() => db.close());
  const { archiveText, loadArchive, saveArchive, writeArchivePart } = await import('../../storage/state/snapcompact.ts');
  const a = loadArchive(db, sid);
  assert.ok(a !== undefined && !('unreadable' in a));
  assert.equal(archiveText(db, sid, a), '¶user: fix the build\n¶ai: done');
  assert.deepEqual(a.partLengths, ['¶user: fix the build\n¶ai: done'.length], 'a part from before migration 33 is measured from its text');
  assert.deepEqual(a.range, { first: 0, last: 0 });
  assert.deepEqual(a.marks, [[0, 1], [21, 2]]);
  const e = loadArchive(db, empty);
  assert.ok(e !== undefined && !('unreadable' in e));
  assert.deepEqual([e.partLengths, e.range, e.length], [[], { first: 0, last: -1 }, 0]);
  assert.ok(!db.prepare("SELECT name FROM pragma_table_info('snapcompact_archive')").pluck().all().includes('text'));

  writeArchivePart(db, sid, 1, '\n¶user: and the tests', [[31, 3]]);
  saveArchive(db, sid, { first: 0, partLengths: [...a.partLengths, '\n¶user: and the tests'.length], marks: [...a.marks, [31, 3]], folds: a.folds, cut: a.cut, hints: a.hints }, 2000);
  const grown = loadArchive(db, sid);
  assert.ok(grown !== undefined && !('unreadable' in grown));
  // Migration 35: the old part's marks stay in the archive row while the archive grows from it;
  // the new part carries its own.
  assert.deepEqual(grown.marks, [[0, 1], [21, 2], [31, 3]]);
  assert.equal(db.prepare('SELECT marks FROM snapcompact_archive WHERE sid = ?').pluck().get(sid), '[[0,1],[21,2]]');
  assert.equal(archiveText(db, sid, grown), '¶user: fix the build\n¶ai: done\n¶user: and the tests');
  assert.equal(archiveText(db, sid, grown, 21, 38), '¶ai: done\n¶user: ', 'a stretch across two parts');
  writeArchivePart(db, sid, 2, 'a new archive', [[0, 4]]);
  saveArchive(db, sid, { first: 2, partLengths: ['a new archive'.length], marks: [[0, 4]], folds: a.folds, cut: a.cut, hints: a.hints }, 3000);
  const replaced = loadArchive(db, sid);
  assert.ok(replaced !== undefined && !('unreadable' in replaced));
  assert.deepEqual(replaced.marks, [[0, 4]], 'an archive that starts over leaves the old row marks behind');
});

test("an extension's own migrations run once each, in order, and a file its newer build wrote is refused", (t) => {
  const file = tempFile(t);
  const v1 = ['CREATE TABLE ext_marks (sid INTEGER NOT NULL, head INTEGER NOT NULL) STRICT'];
  const v2 = [...v1, 'ALTER TABLE ext_marks ADD COLUMN focus TEXT'];
  let db = openDb(file);
  assert.equal(migrateExtension(db, 'ext', v1), 1);
  db.prepare('INSERT INTO ext_marks (sid, head) VALUES (1, 7)').run();
  // Run again at the same version: nothing re-runs (a second CREATE TABLE would throw).
  assert.equal(migrateExtension(db, 'ext', v1), 1);
  db.close();

  db = openDb(file);
  assert.equal(migrateExtension(db, 'ext', v2), 2);
  assert.deepEqual(db.prepare('SELECT sid, head, focus FROM ext_marks').all(), [{ sid: 1, head: 7, focus: null }], 'the row kept, the column added');
  assert.throws(
    () => migrateExtension(db, 'ext', v1),
    (err: unknown) => err instanceof AlbedoError && err.code === 'invalid_config' && /"ext" are at version 2, newer than its module's 1/.test(err.message),
  );
  // Another extension's versions are its own.
  assert.equal(migrateExtension(db, 'other', []), 0);
  db.close();
});
