// The session lifecycle handlers' commits (daemon/handlers/sessions.ts, extensions.ts) are owed
// and paid off the event loop before the reply (storage/db.ts commitOwed, durable), as an
// append's are: a commit at FULL waits on the loop for whatever the disk has to write first,
// and every session waits with it (docs/performance.md, stop 52).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ExtensionsFile, type ConfigSnapshot } from '../../daemon/config.ts';
import type { CallContext } from '../../daemon/context.ts';
import { loadCatalog } from '../../strategies/catalog/models.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';
import { extensionsSelect } from '../../daemon/handlers/extensions.ts';
import { usageReport } from '../../daemon/handlers/compaction.ts';
import { sessionDelete, sessionFork, sessionOpen } from '../../daemon/handlers/sessions.ts';
import { savePrepared } from '../../storage/log/prepared-requests.ts';
import { requireSession } from '../../storage/transcript/sessions.ts';
import { SessionKernels } from '../../daemon/kernels.ts';
import { owedCommitState, type Db } from '../../storage/db.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { observationOf, tempDb, user } from '../storage/factories.ts';

/** What these handlers use of the daemon: its file, the session lanes, the configuration and the indexer's wake-up. */
function context(db: Db): CallContext {
  const kernels = new SessionKernels();
  const config: ConfigSnapshot = { modules: BUILTIN_SET, extensions: ExtensionsFile.parse({}), models: loadCatalog(), version: 1 };
  const daemon = { db, kernels, config: () => config, rowsAdded: () => {}, summarizeRoutes: { forgetSession: () => {} } };
  return { daemon, signal: new AbortController().signal } as unknown as CallContext;
}

test('session.open, session.fork, extensions.select, usage.report and session.delete commit with an owed fsync, paid before they answer', async (t) => {
  const db = tempDb(t);
  const ctx = context(db);
  const paid = (): { pending: number; flushes: number } => owedCommitState(db);

  const opened = await sessionOpen({ session: 'main' }, ctx);
  assert.equal(opened.created, true);
  assert.deepEqual(paid(), { pending: 0, flushes: 1 }, 'the new session: owed, then one flush');

  await appendRows(db, 'main', [user('one'), user('two')]);
  const before = paid().flushes;
  const fork = await sessionFork({ session: 'main', branch: 'side', excursion: false }, ctx);
  assert.equal(fork.session, 'side');
  assert.deepEqual(paid(), { pending: 0, flushes: before + 1 });

  const selected = await extensionsSelect({ session: 'side', enable: ['rolling'], disable: [] }, ctx);
  assert.equal(selected.strategy, 'rolling');
  assert.deepEqual(paid(), { pending: 0, flushes: before + 2 });

  // The usage the proxy reports after every answer.
  const sid = requireSession(db, 'main').sid;
  savePrepared(db, { id: 'p1', sid, head: 2, model: 'm1', estimate: 100, observation: observationOf('main', 'p1') });
  const usage = await usageReport({ session: 'main', prepared_id: 'p1', input_tokens: 120 }, ctx);
  assert.deepEqual(usage, { ok: true });
  assert.deepEqual(paid(), { pending: 0, flushes: before + 3 });

  const deleted = await sessionDelete({ session: 'side' }, ctx);
  assert.equal(deleted.deleted, true);
  assert.deepEqual(paid(), { pending: 0, flushes: before + 4 });
});
