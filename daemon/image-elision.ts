// When image elision runs: right after the compaction that scheduled it, before the request
// goes out (the prepare and compact handlers), and at start for jobs a crash cut short. The
// work is storage/images/elision.ts's, in batches with a turn of the event loop between them,
// each batch under the session's kernel queue so it never interleaves with that session's
// other requests.
import type { Logger } from 'pino';
import { type Db, durable } from '../storage/db.ts';
import { giveWay } from '../protocol/time-slice.ts';
import { elideBatch, pendingElisions, type ElisionBatch } from '../storage/images/elision.ts';
import type { SessionKernels } from './kernels.ts';

/** What a whole job did: its batches added up. */
export type ElisionTotals = Omit<ElisionBatch, 'done'>;

/**
 * Runs the session's pending elision job to its end (nothing when none is pending: one indexed
 * read). The caller holds the session's queue. `stop` ends it early between batches (shutdown);
 * the job stays pending for the next start. What it rewrote is on disk when it resolves.
 */
export async function finishElision(db: Db, sid: number, stop: () => boolean = () => false): Promise<ElisionTotals> {
  const total: ElisionTotals = { rows: 0, images: 0, payloadsDeleted: 0, bytesFreed: 0 };
  for (;;) {
    const b = elideBatch(db, sid);
    total.rows += b.rows;
    total.images += b.images;
    total.payloadsDeleted += b.payloadsDeleted;
    total.bytesFreed += b.bytesFreed;
    if (b.done || stop()) break;
    await giveWay();
  }
  // The batches' fsync is owed: paid here, off the event loop, before the rows are sent.
  await durable(db);
  return total;
}

/** Finishes, session by session through their queues, the jobs a previous run left pending. */
export async function resumeElisions(db: Db, kernels: SessionKernels, log: Logger, stop: () => boolean): Promise<void> {
  let pending: { sid: number; name: string }[];
  try {
    pending = pendingElisions(db);
  } catch (err) {
    log.error({ err, method: 'start' }, 'could not read the pending image elisions; they stay pending');
    return;
  }
  for (const { sid, name } of pending) {
    if (stop()) return;
    try {
      const t = await kernels.run(name, () => finishElision(db, sid, stop), 'all');
      log.info({ session: name, method: 'start', ...t }, 'finished image elision left pending by the last run');
    } catch (err) {
      log.error({ err, session: name, method: 'start' }, 'image elision failed; it stays pending');
    }
  }
}
