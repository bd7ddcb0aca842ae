// The prepare pipeline (daemon/prepare-pipeline.ts) in process, on a real SQLite file: how
// many read transactions the usual request takes. Each one's start costs about a dozen of the
// reads inside it, and a nothing-due prepare is the request every agent turn makes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { ExtensionsFile, type ConfigSnapshot } from '../../daemon/config.ts';
import type { CallContext, ConnectionState } from '../../daemon/context.ts';
import { DEFAULT_SETTINGS } from '../../daemon/daemon.ts';
import { SessionKernels } from '../../daemon/kernels.ts';
import { preparedRequest } from '../../daemon/prepare-pipeline.ts';
import { SummarizeRoutes } from '../../daemon/summarize-routes.ts';
import type { Params } from '../../protocol/methods.ts';
import { loadCatalog } from '../../strategies/catalog/models.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';
import type { Db } from '../../storage/db.ts';
import { headSeq } from '../../storage/transcript/history.ts';
import { openSession, requireSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { assistant, imageIn, pngBytes, tempDb, user } from '../storage/factories.ts';
import { recordingDb } from '../storage/recording-db.ts';

/** What the pipeline uses of the daemon: its file, the session lanes, the configuration, the summarizer routes and the log. */
function context(db: Db): { ctx: CallContext; kernels: SessionKernels } {
  const kernels = new SessionKernels();
  const config: ConfigSnapshot = {
    modules: BUILTIN_SET,
    extensions: ExtensionsFile.parse({ rolling: { contextWindowTokens: 200_000 } }),
    models: loadCatalog(),
    version: 1,
  };
  const daemon = { db, kernels, config: () => config, configProblems: () => [], summarizeRoutes: new SummarizeRoutes(), log: pino({ level: 'silent' }), settings: DEFAULT_SETTINGS };
  const conn: ConnectionState = { id: 1, peer: undefined, initialized: true, client: undefined, canSummarize: false };
  return { ctx: { daemon, conn, signal: new AbortController().signal } as unknown as CallContext, kernels };
}

const PARAMS: Params<'prepare'> = { session: 's', model: 'claude-sonnet-4-5', instructions: 'You are a coding agent.', tools: [], images: 'ref', force: false };

const head = (db: Db): number => headSeq(db, requireSession(db, 's').sid);

/** One prepare on the session's lane, with the transactions it began and the statements it ran outside any. */
async function prepareCounted(rec: ReturnType<typeof recordingDb>, kernels: SessionKernels, ctx: CallContext) {
  const begun = rec.executed.length;
  const outside = rec.autocommit.length;
  const out = await kernels.run('s', (kernel) => preparedRequest(PARAMS, ctx, kernel));
  return {
    out,
    transactions: rec.executed.slice(begun).filter((sql) => sql === 'BEGIN').length,
    autocommit: rec.autocommit.slice(outside).filter((sql) => sql !== 'BEGIN'),
  };
}

test('a nothing-due prepare reads in one transaction, from the session lookup to the note of what was sent', async (t) => {
  const rec = recordingDb(tempDb(t));
  const { ctx, kernels } = context(rec.db);
  openSession(rec.db, { session: 's' });
  await appendRows(rec.db, 's', [user('read src/a.ts'), assistant('It exports one function.'), user('and src/b.ts?'), assistant('Two classes.')]);

  // The first request warms the kernel (its tail is read with yields) and records the prompt.
  const first = await prepareCounted(rec, kernels, ctx);
  assert.equal(first.out.result.compacted, false);
  // Settle the record the first reply left (step 8 runs on the lane after the reply).
  await kernels.run('s', () => undefined);

  await appendRows(rec.db, 's', [user('now src/c.ts')]);
  const next = await prepareCounted(rec, kernels, ctx);
  assert.equal(next.out.result.compacted, false);
  assert.equal(next.out.result.head, first.out.result.head + 1, 'the new row is in this request');
  assert.deepEqual(next.autocommit, [], 'no statement ran outside the stretch');
  assert.equal(next.transactions, 1, 'admit, image check, set-up, the engine and the note share one transaction');

  // The same request again is the same reply under the same id, still in one transaction.
  await kernels.run('s', () => undefined);
  const again = await prepareCounted(rec, kernels, ctx);
  assert.equal(again.out.result.prepared_id, next.out.result.prepared_id);
  assert.equal(again.transactions, 1);
});

test('a prepare with an image still to check fits it before the request is set up, in stretches of its own', async (t) => {
  const rec = recordingDb(tempDb(t));
  const { ctx, kernels } = context(rec.db);
  openSession(rec.db, { session: 's' });
  await appendRows(rec.db, 's', [user('a screenshot', { images: [imageIn(await pngBytes(40, 30), 'image/png')] }), assistant('A red square.')]);
  await kernels.run('s', (kernel) => preparedRequest(PARAMS, ctx, kernel));
  await kernels.run('s', () => undefined);

  // A new image over the 8000 px edge limit: the check finds it, so the fit runs (with its
  // yields) between the admission and the set-up, which then reads the head after it.
  await appendRows(rec.db, 's', [user('a long strip', { images: [imageIn(await pngBytes(8100, 20), 'image/png')] })]);
  const next = await prepareCounted(rec, kernels, ctx);
  assert.equal(next.out.result.compacted, false);
  assert.ok(next.transactions >= 2, `the admission and the set-up are apart (${next.transactions} transactions)`);
  const images = next.out.result.inputs.flatMap((i) => i.content).filter((p) => p.type === 'image');
  assert.deepEqual(images.map((p) => Math.max(p.width, p.height)), [40, 8000], 'both images go out, the strip fitted to the edge limit');
  assert.equal(next.out.result.head, head(rec.db), "the head was read after the fit's notice");
});
