// rolling's saved state: the summary of everything before the cut, and the cut itself as
// JSON. Two cut formats exist: the current one (storage/state/saved-cut.ts) counts user inputs and
// fingerprints them; the older one counted projected items and is upgraded on adoption.
import { z } from 'zod';
import { type Db, perDb } from '../db.ts';
import { readCut, SavedCut, type CutHints } from './saved-cut.ts';

/** The pre-2 format: a count of projected items before the cut. */
export const ItemCut = z.strictObject({ items: z.number().int().nonnegative() });
export const RollingCut = z.union([SavedCut, ItemCut]);
export type ItemCut = z.infer<typeof ItemCut>;
export type RollingCut = z.infer<typeof RollingCut>;

export interface RollingState {
  summary: string;
  cut: RollingCut;
  /** Where the cut was when saved; hints, re-checked against the cut. */
  hints: CutHints;
  backend: string | null;
  /** The session's rewrite counter when saved; null for states saved before it was kept. */
  rewrites: number | null;
  /** Milliseconds since the epoch. */
  updatedAt: number;
}

/** A saved state this build cannot read: ignored like a stale one, replaced by the next compaction. */
export interface UnreadableState {
  unreadable: string;
}

interface Raw {
  summary: string;
  cut: string;
  cut_seq: number;
  resume_seq: number | null;
  backend: string | null;
  rewrites: number | null;
  updated_at: number;
}

const stmts = perDb((db: Db) => ({
  load: db.prepare<[number], Raw>('SELECT summary, cut, cut_seq, resume_seq, backend, rewrites, updated_at FROM rolling_state WHERE sid = ?'),
  save: db.prepare<[number, string, string, number, number, string | null, number, number]>(
    `INSERT INTO rolling_state (sid, summary, cut, cut_seq, resume_seq, backend, rewrites, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, (SELECT rewrites FROM sessions WHERE sid = ?), ?)
     ON CONFLICT (sid) DO UPDATE SET summary = excluded.summary, cut = excluded.cut, cut_seq = excluded.cut_seq,
       resume_seq = excluded.resume_seq, backend = excluded.backend, rewrites = excluded.rewrites, updated_at = excluded.updated_at`,
  ),
}));

/** The saved state, undefined without one, or why the stored one cannot be read. */
export function loadRollingState(db: Db, sid: number): RollingState | UnreadableState | undefined {
  const raw = stmts(db).load.get(sid);
  if (raw === undefined) return undefined;
  const read = readCut(raw.cut, RollingCut);
  if ('unreadable' in read) return read;
  return {
    summary: raw.summary,
    cut: read.cut,
    hints: { openerSeq: raw.cut_seq, resumeSeq: raw.resume_seq ?? raw.cut_seq },
    backend: raw.backend,
    rewrites: raw.rewrites,
    updatedAt: raw.updated_at,
  };
}

/** Saves the state; the session's current rewrite counter is recorded with it. */
export function saveRollingState(
  db: Db,
  sid: number,
  state: { summary: string; cut: SavedCut; hints: CutHints; backend: string | null },
  now = Date.now(),
): void {
  stmts(db).save.run(sid, state.summary, JSON.stringify(state.cut), state.hints.openerSeq, state.hints.resumeSeq, state.backend, sid, now);
}
