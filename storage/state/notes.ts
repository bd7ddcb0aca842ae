// The notes layer's saved state: one row per session with the notes text, the artifact ledger
// (JSON the layer checks with zod, strategies/notes/ledger.ts), the user-message cut both cover
// history up to, the backend that wrote them, and why the last rewrite failed (if it did). The cut is stored as JSON and re-parsed with zod on every read; what it means and
// how it is found again is strategies/harness/cut.ts.
import { type Db, perDb } from '../db.ts';
import { readCut, SavedCut, type CutHints } from './saved-cut.ts';

export interface NotesState {
  text: string;
  /** The artifact ledger as saved (JSON), null when none was. */
  ledger: string | null;
  cut: SavedCut;
  /** Where the cut was when saved; hints, re-checked against the cut. */
  hints: CutHints;
  backend: string | null;
  /** The session's rewrite counter when the cut was saved. */
  rewrites: number | null;
  /** Why the last rewrite failed; null when it succeeded. The text then predates that compaction. */
  failure: string | null;
  /** Milliseconds since the epoch. */
  updatedAt: number;
}

/** A stored row this build cannot read: ignored like a stale cut, replaced by the next rewrite. */
export interface UnreadableNotes {
  unreadable: string;
}

interface Raw {
  text: string;
  ledger: string | null;
  cut: string;
  cut_seq: number;
  resume_seq: number;
  backend: string | null;
  rewrites: number | null;
  failure: string | null;
  updated_at: number;
}

const stmts = perDb((db: Db) => ({
  load: db.prepare<[number], Raw>('SELECT text, ledger, cut, cut_seq, resume_seq, backend, rewrites, failure, updated_at FROM compaction_notes WHERE sid = ?'),
  save: db.prepare<[number, string, string | null, string, number, number, string | null, number, number]>(
    `INSERT INTO compaction_notes (sid, text, ledger, cut, cut_seq, resume_seq, backend, rewrites, failure, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT rewrites FROM sessions WHERE sid = ?), NULL, ?)
     ON CONFLICT (sid) DO UPDATE SET text = excluded.text, ledger = excluded.ledger, cut = excluded.cut, cut_seq = excluded.cut_seq,
       resume_seq = excluded.resume_seq, backend = excluded.backend, rewrites = excluded.rewrites,
       failure = NULL, updated_at = excluded.updated_at`,
  ),
  // A failure keeps whatever text and cut are stored; a session without a row gets an empty one
  // at the start of history, so the next rewrite still covers everything.
  // The ledger alone, written before the summarizer is asked: a failed rewrite keeps it.
  ledger: db.prepare<[number, string, string, number]>(
    `INSERT INTO compaction_notes (sid, text, ledger, cut, cut_seq, resume_seq, backend, rewrites, failure, updated_at)
       VALUES (?, '', ?, ?, 1, 1, NULL, NULL, NULL, ?)
     ON CONFLICT (sid) DO UPDATE SET ledger = excluded.ledger`,
  ),
  fail: db.prepare<[number, string, string, number]>(
    `INSERT INTO compaction_notes (sid, text, cut, cut_seq, resume_seq, backend, rewrites, failure, updated_at)
       VALUES (?, '', ?, 1, 1, NULL, NULL, ?, ?)
     ON CONFLICT (sid) DO UPDATE SET failure = excluded.failure`,
  ),
}));

/** The saved notes, undefined without a row, or why the stored row cannot be read. */
export function loadNotes(db: Db, sid: number): NotesState | UnreadableNotes | undefined {
  const raw = stmts(db).load.get(sid);
  if (raw === undefined) return undefined;
  const read = readCut(raw.cut, SavedCut);
  if ('unreadable' in read) return read;
  return {
    text: raw.text,
    ledger: raw.ledger,
    cut: read.cut,
    hints: { openerSeq: raw.cut_seq, resumeSeq: raw.resume_seq },
    backend: raw.backend,
    rewrites: raw.rewrites,
    failure: raw.failure,
    updatedAt: raw.updated_at,
  };
}

/** Saves rewritten notes, their ledger (JSON) and their cut, clearing any recorded failure. */
export function saveNotes(db: Db, sid: number, notes: { text: string; ledger?: string | null; cut: SavedCut; hints: CutHints; backend: string | null }, now = Date.now()): void {
  stmts(db).save.run(sid, notes.text, notes.ledger ?? null, JSON.stringify(notes.cut), notes.hints.openerSeq, notes.hints.resumeSeq, notes.backend, sid, now);
}

/**
 * Saves the artifact ledger (JSON) alone, leaving the text and cut as they are; a session without
 * a row gets an empty one at `startCut`, as for a failure.
 */
export function saveLedger(db: Db, sid: number, ledger: string, startCut: SavedCut, now = Date.now()): void {
  stmts(db).ledger.run(sid, ledger, JSON.stringify(startCut), now);
}

/**
 * Records that a rewrite failed, leaving the stored text and cut as they were. `startCut` is
 * the cut a session without notes gets, so that its row still says "nothing covered yet".
 */
export function noteNotesFailure(db: Db, sid: number, failure: string, startCut: SavedCut, now = Date.now()): void {
  stmts(db).fail.run(sid, JSON.stringify(startCut), failure, now);
}
