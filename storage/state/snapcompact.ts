// snapcompact's saved state and its frame cache. The archive is plain text (what the frames
// draw) with the offset where each archived row starts, saved with a user-message cut like
// rolling's. Its text is stored in parts (migration 32): a compaction writes the parts it adds
// before its commit (`writeArchivePart`), and the commit names the range the archive is
// (`saveArchive`). A loaded archive holds its parts' lengths, not their text (migration 33):
// `archiveParts` and `archiveText` read the text as it is needed. Each part is stored with the
// marks of the rows it holds (migration 35), so a commit writes no more marks than its stage
// added; an archive saved before keeps its older parts' marks in its own row. Frames are
// derived: a cached frame is a payload named by its cache key, so the request can refer to it
// by hash and `payload.get` serves its bytes.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { commitOwed, type Db, perDb, withoutFsync } from '../db.ts';
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
  /** Its parts' numbers in snapcompact_text: first..last (last = first - 1 for an empty archive). */
  range: PartRange;
  /** Each part's length in UTF-16 code units, in order. */
  partLengths: readonly number[];
  /** The text's length in UTF-16 code units. */
  length: number;
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

export interface PartRange {
  first: number;
  last: number;
}

interface Raw {
  first_part: number;
  last_part: number;
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
  // marks' overflow pages (a pair per archived row; the text itself was there too before
  // migration 32), and a rowid lookup would walk them all to reach it.
  stamp: db.prepare<[number], number>('SELECT updated_at FROM snapcompact_archive INDEXED BY snapcompact_archive_stamp WHERE sid = ?').pluck(),
  load: db.prepare<[number], Raw>('SELECT first_part, last_part, marks, folds, cut, cut_seq, resume_seq, rewrites, updated_at FROM snapcompact_archive WHERE sid = ?'),
  range: db.prepare<[number], PartRange>('SELECT first_part AS first, last_part AS last FROM snapcompact_archive WHERE sid = ?'),
  part: db.prepare<[number, number], string>('SELECT text FROM snapcompact_text WHERE sid = ? AND part = ?').pluck(),
  lengths: db.prepare<[number, number, number], { part: number; chars: number | null; marks: string | null }>(
    'SELECT part, chars, marks FROM snapcompact_text WHERE sid = ? AND part BETWEEN ? AND ? ORDER BY part',
  ),
  countParts: db.prepare<[number, number, number], number>('SELECT count(*) FROM snapcompact_text WHERE sid = ? AND part BETWEEN ? AND ?').pluck(),
  putPart: db.prepare<[number, number, string, number, string]>(
    'INSERT INTO snapcompact_text (sid, part, text, chars, marks) VALUES (?, ?, ?, ?, ?) ON CONFLICT (sid, part) DO UPDATE SET text = excluded.text, chars = excluded.chars, marks = excluded.marks',
  ),
  dropOtherParts: db.prepare<[number, number, number]>('DELETE FROM snapcompact_text WHERE sid = ? AND (part < ? OR part > ?)'),
  // The row's own marks are those of parts stored before migration 35: kept while the archive
  // grows from the same first part, emptied when a new archive replaces it.
  save: db.prepare<[number, number, number, string, string, number, number, number, number], { rewrites: number | null }>(
    `INSERT INTO snapcompact_archive (sid, first_part, last_part, marks, folds, cut, cut_seq, resume_seq, rewrites, updated_at)
       VALUES (?, ?, ?, '[]', ?, ?, ?, ?, (SELECT rewrites FROM sessions WHERE sid = ?), ?)
     ON CONFLICT (sid) DO UPDATE SET first_part = excluded.first_part, last_part = excluded.last_part,
       marks = CASE WHEN snapcompact_archive.first_part = excluded.first_part THEN snapcompact_archive.marks ELSE '[]' END, folds = excluded.folds,
       cut = excluded.cut, cut_seq = excluded.cut_seq, resume_seq = excluded.resume_seq, rewrites = excluded.rewrites, updated_at = excluded.updated_at
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
  const range = { first: raw.first_part, last: raw.last_part };
  const stored = stmts(db).lengths.all(sid, range.first, range.last);
  if (stored.length !== range.last - range.first + 1) return { unreadable: `its text parts ${range.first}-${range.last} are not all stored` };
  const partLengths = stored.map((p) => p.chars ?? partLength(db, sid, p.part));
  const length = partLengths.reduce((n, l) => n + l, 0);
  // The row's marks (parts stored before migration 35), then each later part's, in order.
  const all = m.data;
  for (const p of stored) {
    if (p.marks === null) continue;
    let parsed: ReturnType<typeof ArchiveMarks.safeParse>;
    try {
      parsed = ArchiveMarks.safeParse(JSON.parse(p.marks));
    } catch {
      return { unreadable: `the marks of its text part ${p.part} are not JSON` };
    }
    if (!parsed.success) return { unreadable: `the marks of its text part ${p.part} have a format this build does not know` };
    for (const mark of parsed.data) all.push(mark);
  }
  return { range, partLengths, length, marks: all, folds: f.data, cut: c.data, hints: { openerSeq: raw.cut_seq, resumeSeq: raw.resume_seq }, rewrites: raw.rewrites, updatedAt: raw.updated_at };
}

/** The range of parts the session's saved archive is, read even when the rest of it is unreadable. */
export function archiveRange(db: Db, sid: number): PartRange | undefined {
  return stmts(db).range.get(sid);
}

/**
 * Stores one part of an archive a compaction is growing, before its commit: a part past the
 * saved range is read by no one until `saveArchive` names it. Write only past the saved range.
 * Its commit does not wait for an fsync: the commit that names it fsyncs the log, and with it
 * every part written before.
 */
export function writeArchivePart(db: Db, sid: number, part: number, text: string, marks: ArchiveMarks): void {
  withoutFsync(db, () => stmts(db).putPart.run(sid, part, text, text.length, JSON.stringify(marks)));
}

/**
 * The length of a part stored before parts had one (migration 33), read from its text. Not
 * written back: a load is a read (the eval reads a daemon's database read-only); a kernel keeps
 * what it loaded, and a new archive's parts carry their lengths.
 */
function partLength(db: Db, sid: number, part: number): number {
  return partText(db, sid, part).length;
}

/** One stored part's text; throws when the row is missing (a saved range is always whole). */
function partText(db: Db, sid: number, part: number): string {
  const text = stmts(db).part.get(sid, part);
  if (text === undefined) throw new Error(`snapcompact archive: text part ${part} of session ${sid} is gone`);
  return text;
}

/**
 * The archive's text a part at a time, each read when the caller asks for it: a layout of a long
 * archive holds one part, never the whole text. The parts of a saved range never change.
 */
export function* archiveParts(db: Db, sid: number, range: PartRange): Generator<string, void, undefined> {
  for (let part = range.first; part <= range.last; part++) yield partText(db, sid, part);
}

/** The archive's text from `start` to `end` (UTF-16 offsets), reading only the parts that hold it. */
export function archiveText(db: Db, sid: number, state: Pick<ArchiveState, 'range' | 'partLengths' | 'length'>, start = 0, end = state.length): string {
  const pieces: string[] = [];
  let at = 0;
  for (const [k, length] of state.partLengths.entries()) {
    const next = at + length;
    if (next > start && at < end) {
      const text = partText(db, sid, state.range.first + k);
      pieces.push(text.slice(Math.max(0, start - at), Math.min(length, end - at)));
    }
    if (next >= end) break;
    at = next;
  }
  return pieces.join('');
}

/**
 * Saves the archive whose text is `parts`, numbered from `first` and already stored
 * (`writeArchivePart`); parts of the session outside that range are deleted. Throws, so the
 * caller's transaction rolls back, when one of them is missing. Answers the state as
 * `loadArchive` would now read it back.
 */
export function saveArchive(
  db: Db,
  sid: number,
  state: { first: number; partLengths: readonly number[]; marks: ArchiveMarks; folds: readonly KeptFold[]; cut: SavedCut; hints: CutHints },
  now = Date.now(),
): ArchiveState {
  const st = stmts(db);
  const count = state.partLengths.length;
  const range = { first: state.first, last: state.first + count - 1 };
  const stored = st.countParts.get(sid, range.first, range.last) ?? 0;
  if (stored !== count) throw new Error(`snapcompact archive: ${count - stored} of its text parts ${range.first}-${range.last} were never stored`);
  const folds = JSON.stringify(state.folds);
  const cut = JSON.stringify(state.cut);
  const saved = st.save.get(sid, range.first, range.last, folds, cut, state.hints.openerSeq, state.hints.resumeSeq, sid, now);
  st.dropOtherParts.run(sid, range.first, range.last);
  // The small parts through the same parse a load does (their JSON form is what is kept). The
  // marks, stored with the parts and the row, read back as `state.marks`: plain pairs.
  const { openerSeq, resumeSeq } = state.hints;
  const length = state.partLengths.reduce((n, l) => n + l, 0);
  return {
    range,
    partLengths: [...state.partLengths],
    length,
    marks: state.marks,
    folds: KeptFolds.parse(JSON.parse(folds)),
    cut: SavedCut.parse(JSON.parse(cut)),
    hints: { openerSeq, resumeSeq },
    rewrites: saved?.rewrites ?? null,
    updatedAt: now,
  };
}

/** A cached frame by its cache key (render/frame.ts frameKey), its use recorded at most daily. */
export function cachedFrame(db: Db, key: string, now = Date.now()): CachedFrame | undefined {
  const st = stmts(db);
  const r = st.frame.get(key);
  if (r === undefined) return undefined;
  if (now - r.used_at > TOUCH_EVERY_MS) st.touch.run(now, key);
  return { hash: r.hash, width: r.width, height: r.height };
}

/**
 * Stores a rendered frame: its PNG as a payload, and the key naming it. Frames are rendered while
 * a request is prepared, so the fsync is owed rather than waited for on the event loop: the
 * prepare pays it before the request, which may name the frame, goes out (commitOwed).
 */
export function cacheFrame(db: Db, key: string, png: Buffer, width: number, height: number, now = Date.now()): CachedFrame {
  const hash = createHash('sha256').update(png).digest('hex');
  commitOwed(db, () => {
    putPayload(db, hash, 'image/png', width, height, png);
    stmts(db).putFrame.run(key, hash, width, height, now);
  });
  return { hash, width, height };
}

/** Drops frames unused since `before` (ms since the epoch), and their payloads unless something else names them; a cache's upkeep, without an fsync. */
export function pruneFrames(db: Db, before: number): { frames: number; payloads: number } {
  return withoutFsync(db, () =>
    db.transaction(() => {
      const hashes = stmts(db).prune.all(before);
      return { frames: hashes.length, payloads: releasePayloads(db, hashes).count };
    })());
}
