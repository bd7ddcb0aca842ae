// The worker-thread index queries and scans give grep and lcm_grep exactly what the inline ones give;
// an idle worker stops and the next query starts another.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LcmGrepParams, TranscriptGrepParams } from '../../protocol/methods.ts';
import { grepTree } from '../../storage/state/lcm-read.ts';
import { grep } from '../../storage/search/grep.ts';
import { indexPending } from '../../storage/search/indexer.ts';
import { SearchWorker } from '../../storage/search/worker.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { tempDbWithPath, user } from './factories.ts';
import { recordingDb } from './recording-db.ts';
import { writeTree } from './lcm-trees.ts';

test('grep through the search worker finds what the inline query finds', async (t) => {
  const { db, path } = tempDbWithPath(t);
  openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  for (let i = 0; i < 300; i++) {
    await appendRows(db, i % 2 === 0 ? 'a' : 'b', [user(`row ${i} ${i % 7 === 0 ? 'NeedleInHay' : 'plain text'} tail`)]);
  }
  // Half the rows indexed: the rest are scanned, inline or on the worker.
  assert.equal(indexPending(db, 150), 150);
  const worker = new SearchWorker(path);
  t.after(() => worker.close());
  const pages = [{ pattern: 'y', session: 'a', offset: 20, limit: 5 }, { pattern: 'ow', offset: 290, limit: 50 }, { pattern: 'row 1', offset: 3, limit: 4 }];
  for (const params of [{ pattern: 'needleinhay' }, { pattern: 'needleinhay', session: 'b' }, { pattern: 'row 1' }].map((q) => ({ ...q, limit: 500 })).concat(pages)) {
    const p = TranscriptGrepParams.parse(params);
    const inline = await grep(db, p);
    const onMain = recordingDb(db);
    const viaWorker = await grep(onMain.db, p, { hits: (ask) => worker.hits(ask), scan: (ask) => worker.scan(ask) });
    assert.deepEqual(viaWorker, inline);
    assert.ok(inline.total > 0);
    // The worker scanned: the main connection derived row text only for the page's previews.
    const derived = [...onMain.returned].filter(([sql]) => sql.includes('albedo_row_text')).reduce((n, [, k]) => n + k, 0);
    assert.ok(derived <= inline.matches.length, `the main connection derived ${derived} rows for a page of ${inline.matches.length}`);
  }
  const sid = openSession(db, { session: 'a' }).sid;
  const [leaf] = writeTree(db, sid, {
    leaves: [
      { first: 1, last: 100, summary: 'first hundred: NEEDLEINHAY seen' },
      { first: 101, last: 200, summary: 'second hundred: nothing' },
      { first: 201, last: 300, summary: 'third: needleinhay again' },
    ],
    parents: [{ children: [0, 1], summary: 'the first two hundred, with a needleInHay' }],
  });
  writeTree(db, openSession(db, { session: 'b' }).sid, { leaves: [{ first: 1, last: 300, summary: 'needleinhay of b' }] });
  for (const params of [{ pattern: 'needleinhay' }, { pattern: 'NeedleInHay', node: leaf }]) {
    const p = LcmGrepParams.parse({ ...params, session: 'a', limit: 500 });
    const inline = await grepTree(db, p);
    const viaWorker = await grepTree(db, p, { hits: (ask) => worker.hits(ask), scan: (ask) => worker.scan(ask), summaryHits: (q, s) => worker.summaryHits(q, s) });
    assert.deepEqual(viaWorker, inline);
    assert.ok(inline.summaries.total > 0 && inline.source.total > 0);
  }
});

test('a closed search worker refuses new queries', async (t) => {
  const { path } = tempDbWithPath(t);
  const worker = new SearchWorker(path);
  await worker.close();
  await assert.rejects(worker.hits({ needle: 'abc', from: 1, to: 10, sids: null, offset: 0, limit: 10 }), /closed/);
});

test('an idle search worker stops, and the next query starts it again', { timeout: 30_000 }, async (t) => {
  const { db, path } = tempDbWithPath(t);
  openSession(db, { session: 'a' });
  for (let i = 0; i < 20; i++) await appendRows(db, 'a', [user(`row ${i} ${i % 5 === 0 ? 'NeedleInHay' : 'plain'}`)]);
  while (indexPending(db, 1000) > 0);
  const worker = new SearchWorker(path, { idleStopMs: 20 });
  t.after(() => worker.close());
  const p = TranscriptGrepParams.parse({ pattern: 'needleinhay', limit: 50 });
  const first = await grep(db, p, { hits: (ask) => worker.hits(ask) });
  assert.equal(first.total, 4);
  while (worker.running) await new Promise((resolve) => setTimeout(resolve, 10));
  const again = await grep(db, p, { hits: (ask) => worker.hits(ask) });
  assert.deepEqual(again, first);
  assert.ok(worker.running, 'the query started a new worker');
});

test('a worker thread that died is replaced by the next query', { timeout: 30_000 }, async (t) => {
  const { db, path } = tempDbWithPath(t);
  openSession(db, { session: 'a' });
  for (let i = 0; i < 10; i++) await appendRows(db, 'a', [user(`row ${i} NeedleInHay`)]);
  while (indexPending(db, 1000) > 0);
  const worker = new SearchWorker(path);
  t.after(() => worker.close());
  const p = TranscriptGrepParams.parse({ pattern: 'needleinhay', limit: 50 });
  const first = await grep(db, p, { hits: (ask) => worker.hits(ask) });
  assert.equal(first.total, 10);
  // The thread goes away without the daemon asking (a crash in the worker, an OOM kill of the thread).
  const thread = (worker as unknown as { started: import('node:worker_threads').Worker }).started;
  const exited = new Promise((resolve) => thread.once('exit', resolve));
  await thread.terminate();
  await exited;
  assert.equal(worker.running, false, 'a dead thread is not running');
  const again = await grep(db, p, { hits: (ask) => worker.hits(ask) });
  assert.deepEqual(again, first, 'the next query started a new thread');
});
