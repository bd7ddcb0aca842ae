// The worker-thread candidate query gives grep exactly what the inline query gives.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TranscriptGrepParams } from '../../protocol/methods.ts';
import { grep } from '../../storage/search.ts';
import { indexPending } from '../../storage/search-index.ts';
import { SearchWorker } from '../../storage/search-worker.ts';
import { openSession } from '../../storage/sessions.ts';
import { appendRows } from '../../storage/transcript.ts';
import { tempDbWithPath, user } from './factories.ts';

test('grep through the search worker finds what the inline query finds', async (t) => {
  const { db, path } = tempDbWithPath(t);
  openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  for (let i = 0; i < 300; i++) {
    await appendRows(db, i % 2 === 0 ? 'a' : 'b', [user(`row ${i} ${i % 7 === 0 ? 'NeedleInHay' : 'plain text'} tail`)]);
  }
  while (indexPending(db, 1000) > 0);
  const worker = new SearchWorker(path);
  t.after(() => worker.close());
  for (const params of [{ pattern: 'needleinhay' }, { pattern: 'needleinhay', session: 'b' }, { pattern: 'row 1' }]) {
    const p = TranscriptGrepParams.parse({ ...params, limit: 500 });
    const inline = await grep(db, p);
    const viaWorker = await grep(db, p, { hits: (q, max) => worker.hits(q, max) });
    assert.deepEqual(viaWorker, inline);
    assert.ok(inline.total > 0);
  }
});

test('a closed search worker refuses new queries', async (t) => {
  const { path } = tempDbWithPath(t);
  const worker = new SearchWorker(path);
  await worker.close();
  await assert.rejects(worker.hits('"abc"', 10), /closed/);
});
