// The user-message cut that rolling (and later snapcompact and notes) save: how many user
// inputs lie before it, and a chained fingerprint of their text. Counting user inputs instead
// of projected items keeps the cut valid across providers, which merge or drop other items.
import { createHash } from 'node:crypto';
import type { Db } from '../../storage/db.ts';
import type { UserCut } from '../../storage/rolling-state.ts';
import { nthUserSeq, userRowsAfter } from '../../storage/user-rows.ts';

export const EMPTY_FINGERPRINT = '';

/** Extends a fingerprint by more user texts, in order. */
export function extendFingerprint(fingerprint: string, texts: Iterable<string>): string {
  let fp = fingerprint;
  for (const t of texts) fp = createHash('sha256').update(fp).update('\0').update(t).digest('hex');
  return fp;
}

/**
 * Where a saved cut falls in the transcript now: the seq of the first user row after it
 * (`head + 1` when the cut is past every user row), or undefined when the transcript no longer
 * has those user inputs with that fingerprint. Reads every user row before the cut, so callers
 * cache the answer (see CutCache).
 */
export function locateCut(db: Db, sid: number, cut: UserCut, head: number): number | undefined {
  const BATCH = 4096;
  let fp = EMPTY_FINGERPRINT;
  let after = 0;
  let seen = 0;
  while (seen < cut.users) {
    const rows = userRowsAfter(db, sid, after, Math.min(BATCH, cut.users - seen));
    if (rows.length === 0) return undefined;
    fp = extendFingerprint(fp, rows.map((r) => r.text));
    seen += rows.length;
    after = rows[rows.length - 1]!.seq;
  }
  if (fp !== cut.fingerprint) return undefined;
  return nthUserSeq(db, sid, cut.users) ?? head + 1;
}

/**
 * Remembers verified cut positions in a session kernel. Callers key entries on the saved state
 * and the session's rewrite counter: appends never move earlier rows, so an entry stays valid
 * until one of those changes. A lookup that found no match is remembered too.
 */
export class CutCache<V> {
  private readonly entries = new Map<string, V | undefined>();

  lookup(key: string, compute: () => V | undefined): V | undefined {
    if (this.entries.has(key)) return this.entries.get(key);
    const value = compute();
    if (this.entries.size >= 16) this.entries.clear();
    this.entries.set(key, value);
    return value;
  }
}
