// What a fork hands each strategy: inside the fork's transaction, every strategy of the build
// (active or not: a branch keeps what any of them stored) copies what of its saved state the
// branch may keep, given the parent seq -> branch seq map. Rolling copies nothing.
import type { Db } from '../storage/db.ts';
import { forkMap } from '../storage/transcript/write.ts';
import type { Strategy } from './contract.ts';

/** Calls every strategy's fork hook for a branch just copied from `from`; run it in the fork's transaction. */
export function forkStrategyState(db: Db, from: { sid: number }, to: { sid: number }, strategies: readonly Strategy[]): void {
  const hooks = strategies.filter((s) => s.fork !== undefined);
  if (hooks.length === 0) return;
  const seqs = forkMap(db, to.sid);
  for (const s of hooks) s.fork!(db, from, to, seqs);
}
