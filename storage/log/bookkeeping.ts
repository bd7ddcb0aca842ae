// A session's bookkeeping as one request reads it: the failure latch and the last compaction
// (compaction-log.ts), what image elision did (images/elision.ts), the results that answered no
// call (transcript/write.ts) and the learned token ratio for the request's model. The engine
// reads it once when it sets a request up and once more after a compaction changed it, so a
// request's trigger, latch and observation all see the same values.
import type { CompactionRecord } from '../../protocol/prepared.ts';
import type { Db } from '../db.ts';
import { elisionStats, type ElisionStats } from '../images/elision.ts';
import { orphanResults } from '../transcript/write.ts';
import { autoFailures, lastCompaction } from './compaction-log.ts';
import { tokenRatio } from './token-ratios.ts';

export interface SessionBook {
  /** Automatic compactions that failed in a row (the latch). */
  autoFailures: number;
  lastCompaction: CompactionRecord | null;
  elision: ElisionStats;
  /** Tool results stored whose call id matched no open call. */
  orphanResults: number;
  /** Provider tokens per estimated token for the request's model. */
  tokenRatio: number;
}

export function readSessionBook(db: Db, sid: number, model: string | null): SessionBook {
  return {
    autoFailures: autoFailures(db, sid),
    lastCompaction: lastCompaction(db, sid),
    elision: elisionStats(db, sid),
    orphanResults: orphanResults(db, sid),
    tokenRatio: tokenRatio(db, sid, model),
  };
}
