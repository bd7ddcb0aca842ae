// snapcompact's saved state and its frame cache. The archive is plain text (what the frames
// draw) with the offset where each archived row starts, saved with a user-message cut like
// rolling's. Frames are derived: a cached frame is a payload named by its cache key, so the
// request can refer to it by hash and `payload.get` serves its bytes.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { type Db, perDb } from '../db.ts';
import { putPayload, releasePayloads } from '../images/payloads.ts';
import { SavedCut, type CutHints } from './saved-cut.ts';

/** Where each archived row starts in the archive text: [UTF-16 offset, seq], in order. */
export const ArchiveMarks = z.array(z.tuple([z.number().int().nonnegative(), z.number().int().positive()]));
export type ArchiveMarks = z.infer<typeof ArchiveMarks>;

/** Another extension's fold the archive took over: it stays text, ahead of the frames. */
export const KeptFold = z.strictObject({ source: z.string(), text: z.string(), firstSeq: z.number().int(), lastSeq: z.number().int() });
export type KeptFold = z.infer<typeof KeptFold>;
const KeptFolds = z.array(KeptFold);

export interface ArchiveState {
  text: string;
  marks: ArchiveMarks;
  folds: KeptFold[];
  cut: SavedCut;
  hints: CutHints;
  rewrites: number | null;
  updatedAt: number;
}

export interface CachedFrame {
  hash: string;
  width: number;
  height: number;
}

interface Raw {
  text: string;
  marks: string;
  folds: string;
  cut: string;
  cut_seq: number;
  resume_seq: number;
  rewrites: number | null;
  updated_at: number;
}

/** A frame's last use is written at most this often, so that every request does not write. */
const TOUCH_EVERY_MS = 24 * 60 * 60 * 1000;

const stmts = perDb((db: Db) => ({
  // Through the (sid, updated_at) index (migration 21): in the table row the stamp lies past the
  // archive text's overflow pages, and a rowid lookup would walk them all to reach it.
  stamp: db.prepare<[number], number>('SELECT updated_at FROM snapcompact_archive INDEXED BY snapcompact_archive_stamp WHERE sid = ?').pluck(),
  load: db.prepare<[number], Raw>('SELECT text, marks, folds, cut, cut_seq, resume_seq, rewrites, updated_at FROM snapcompact_archive WHERE sid = ?'),
  save: db.prepare<[number, string, string, string, string, number, number, number, number], { rewrites: number | null }>(
    `INSERT INTO snapcompact_archive (sid, text, marks, folds, cut, cut_seq, resume_seq, rewrites, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT rewrites FROM sessions WHERE sid = ?), ?)
     ON CONFLICT (sid) DO UPDATE SET text = excluded.text, marks = excluded.marks, folds = excluded.folds, cut = excluded.cut, cut_seq = excluded.cut_seq,
       resume_seq = excluded.resume_seq, rewrites = excluded.rewrites, updated_at = excluded.updated_at
     RETURNING rewrites`,
  ),
  frame: db.prepare<[string], CachedFrame & { used_at: number }>('SELECT hash, width, height, used_at FROM snapcompact_frames WHERE key = ?'),
  putFrame: db.prepare<[string, string, number, number, number]>(
    'INSERT INTO snapcompact_frames (key, hash, width, height, used_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET used_at = excluded.used_at',
  ),
  touch: db.prepare<[number, string]>('UPDATE snapcompact_frames SET used_at = ? WHERE key = ?'),
  prune: db.prepare<[number], string>('DELETE FROM snapcompact_frames WHERE used_at < ? RETURNING hash').pluck(),
}));

/** When the session's archive was last saved (ms since the epoch); undefined without one. */
export function archiveStamp(db: Db, sid: number): number | undefined {
  return stmts(db).stamp.get(sid);
}

/** The saved archive, undefined without one, or why the stored one cannot be read. */
export function loadArchive(db: Db, sid: number): ArchiveState | { unreadable: string } | undefined {
  const raw = stmts(db).load.get(sid);
  if (raw === undefined) return undefined;
  let cut: unknown;
  let marks: unknown;
  let folds: unknown;
  try {
    cut = JSON.parse(raw.cut);
    marks = JSON.parse(raw.marks);
    folds = JSON.parse(raw.folds);
  } catch {
    return { unreadable: 'its cut, marks or folds are not JSON' };
  }
  const c = SavedCut.safeParse(cut);
  const m = ArchiveMarks.safeParse(marks);
  const f = KeptFolds.safeParse(folds);
  if (!c.success || !m.success || !f.success) return { unreadable: 'its cut, marks or folds have a format this build does not know' };
  return { text: raw.text, marks: m.data, folds: f.data, cut: c.data, hints: { openerSeq: raw.cut_seq, resumeSeq: raw.resume_seq }, rewrites: raw.rewrites, updatedAt: raw.updated_at };
}

/** Saves the archive; answers the state as `loadArchive` would now read it back. */
export function saveArchive(db: Db, sid: number, state: { text: string; marks: ArchiveMarks; folds: readonly KeptFold[]; cut: SavedCut; hints: CutHints }, now = Date.now()): ArchiveState {
  const folds = JSON.stringify(state.folds);
  const cut = JSON.stringify(state.cut);
  const saved = stmts(db).save.get(sid, state.text, JSON.stringify(state.marks), folds, cut, state.hints.openerSeq, state.hints.resumeSeq, sid, now);
  // The small parts through the same parse a load does (their JSON form is what is kept); the
  // marks are plain pairs, the same either way.
  const { openerSeq, resumeSeq } = state.hints;
  return { text: state.text, marks: state.marks, folds: KeptFolds.parse(JSON.parse(folds)), cut: SavedCut.parse(JSON.parse(cut)), hints: { openerSeq, resumeSeq }, rewrites: saved?.rewrites ?? null, updatedAt: now };
}

/** A cached frame by its cache key (render/frame.ts frameKey), its use recorded at most daily. */
export function cachedFrame(db: Db, key: string, now = Date.now()): CachedFrame | undefined {
  const st = stmts(db);
  const r = st.frame.get(key);
  if (r === undefined) return undefined;
  if (now - r.used_at > TOUCH_EVERY_MS) st.touch.run(now, key);
  return { hash: r.hash, width: r.width, height: r.height };
}

/** Stores a rendered frame: its PNG as a payload, and the key naming it. */
export function cacheFrame(db: Db, key: string, png: Buffer, width: number, height: number, now = Date.now()): CachedFrame {
  const hash = createHash('sha256').update(png).digest('hex');
  db.transaction(() => {
    putPayload(db, hash, 'image/png', width, height, png);
    stmts(db).putFrame.run(key, hash, width, height, now);
  })();
  return { hash, width, height };
}

/** Drops frames unused since `before` (ms since the epoch), and their payloads unless something else names them. */
export function pruneFrames(db: Db, before: number): { frames: number; payloads: number } {
  return db.transaction(() => {
    const hashes = stmts(db).prune.all(before);
    return { frames: hashes.length, payloads: releasePayloads(db, hashes).count };
  })();
}
