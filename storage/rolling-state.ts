// rolling's saved state: the summary of everything before the cut, and the cut itself as
// JSON. Two cut formats exist: the current one counts user inputs and fingerprints them; the
// older one counted projected items and is upgraded the first time a kernel adopts it.
import { z } from 'zod';
import type { Db } from './db.ts';

export const UserCut = z.strictObject({
  format: z.literal(2),
  /** User inputs (row_class 'user') before the cut. */
  users: z.number().int().nonnegative(),
  /** Chained hash of those inputs' text (strategies/harness/cut.ts). */
  fingerprint: z.string(),
});
/** The pre-2 format: a count of projected items before the cut. */
export const ItemCut = z.strictObject({ items: z.number().int().nonnegative() });
export const RollingCut = z.union([UserCut, ItemCut]);
export type UserCut = z.infer<typeof UserCut>;
export type ItemCut = z.infer<typeof ItemCut>;
export type RollingCut = z.infer<typeof RollingCut>;

export interface RollingState {
  summary: string;
  cut: RollingCut;
  /** Seq of the first row after the cut when saved; a hint, re-checked against the cut. */
  cutSeq: number;
  backend: string | null;
  /** The session's rewrite counter when saved; null for states saved before it was kept. */
  rewrites: number | null;
  updatedAt: number;
}

interface Raw {
  summary: string;
  cut: string;
  cut_seq: number;
  backend: string | null;
  rewrites: number | null;
  updated_at: number;
}

/** The saved state, or undefined. A cut column that does not parse is reported, not trusted. */
export function loadRollingState(db: Db, sid: number): RollingState | undefined {
  const raw = db.prepare('SELECT summary, cut, cut_seq, backend, rewrites, updated_at FROM rolling_state WHERE sid = ?').get(sid) as
    | Raw
    | undefined;
  if (raw === undefined) return undefined;
  const cut = RollingCut.parse(JSON.parse(raw.cut));
  return { summary: raw.summary, cut, cutSeq: raw.cut_seq, backend: raw.backend, rewrites: raw.rewrites, updatedAt: raw.updated_at };
}

/** Saves the state; the session's current rewrite counter is recorded with it. */
export function saveRollingState(db: Db, sid: number, state: Omit<RollingState, 'updatedAt' | 'rewrites'>, now = Date.now()): void {
  db.prepare(
    `INSERT INTO rolling_state (sid, summary, cut, cut_seq, backend, rewrites, updated_at)
       VALUES (?, ?, ?, ?, ?, (SELECT rewrites FROM sessions WHERE sid = ?), ?)
     ON CONFLICT (sid) DO UPDATE SET summary = excluded.summary, cut = excluded.cut, cut_seq = excluded.cut_seq,
       backend = excluded.backend, rewrites = excluded.rewrites, updated_at = excluded.updated_at`,
  ).run(sid, state.summary, JSON.stringify(state.cut), state.cutSeq, state.backend, sid, now);
}
