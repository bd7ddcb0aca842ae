// Transcript reads for the compaction strategies: decoding stored rows, resolving source
// references, a session's append boundary, chronological fold pages with image-fit
// replacements, and compaction units from row metadata. Writes live in storage/transcript/write.ts.
import { z } from 'zod';
import { AlbedoError } from '../../protocol/errors.ts';
import { ImagePart, RowClass, type StoredRow } from '../../protocol/rows.ts';
import { type Db, perDb } from '../db.ts';
import { bodySql } from './row-body.ts';
import { parseStoredBody } from './row-text.ts';
import { requireSession } from './sessions.ts';
import { OPENS_UNIT } from './user-rows.ts';

/** A durable row reference: the public session id and the row's global seq. */
export interface SourceRef {
  session: string;
  seq: number;
}

/** A transcript row as selected from SQLite, before its JSON body is checked. */
export interface RawTranscriptRow {
  seq: number;
  /** Public session id. */
  name: string;
  row_class: string;
  key: string | null;
  /** Milliseconds since the epoch. */
  created_at: number;
  /** StoredBody as JSON (unpacked: selected through bodySql). */
  body: string;
}

/** A session's append boundary at one moment. */
export interface Snapshot {
  session: string;
  sid: number;
  /** Newest seq of the session; 0 when it has no rows. */
  head: number;
  /** Number of rows at or below `head`. */
  rows: number;
}

/** One compaction unit: a run of consecutive rows of a session. */
export interface Unit {
  /** Seq of the unit's first row. */
  start: number;
  /** Seq of the unit's last row, inclusive. */
  end: number;
  /** True when a user row (any origin) starts the unit; false for image-fit and leading units. */
  user: boolean;
}

export interface FoldOptions {
  /**
   * Newest seq whose image-fit notices apply, and past which no row is read. Default: the
   * session head when foldSources is called.
   */
  boundary?: number;
  /** Rows per page; default FOLD_PAGE_ROWS. */
  pageSize?: number;
  /**
   * A page ends early once reading it has taken this long (ms), so a caller that yields between
   * pages never holds the event loop long past its slice: 128 long packed bodies took 40 ms.
   */
  pageMs?: number;
}

/** Rows per fold page. */
export const FOLD_PAGE_ROWS = 128;
/** Seqs per IN-list lookup in loadSources. */
const SOURCE_BATCH = 500;

const ImageFitBody = z.object({
  kind: z.literal('notice'),
  body: z.object({ notice: z.literal('image_fit'), from_hash: z.string(), to: ImagePart }),
});

function prepare(db: Db) {
  return {
    bySeqs: db.prepare<[string], RawTranscriptRow & { sid: number }>(
      `SELECT t.seq, t.sid, s.name, t.row_class, t.key, t.created_at, ${bodySql('t')} AS body
         FROM transcript t JOIN sessions s ON s.sid = t.sid
        WHERE t.seq IN (SELECT value FROM json_each(?))`,
    ),
    head: db.prepare<[number], number | null>('SELECT max(seq) FROM transcript WHERE sid = ?').pluck(),
    headThrough: db
      .prepare<[number, number], number | null>('SELECT max(seq) FROM transcript WHERE sid = ? AND seq <= ?')
      .pluck(),
    countThrough: db
      .prepare<[number, number], number>('SELECT count(*) FROM transcript WHERE sid = ? AND seq <= ?')
      .pluck(),
    countBetween: db
      .prepare<[number, number, number, number], number>(
        'SELECT count(*) FROM (SELECT 1 FROM transcript WHERE sid = ? AND seq > ? AND seq <= ? LIMIT ?)',
      )
      .pluck(),
    // Reads only the (sid, seq, graphemes) index; a row from before the column counts as a typical one.
    volumes: db.prepare<[number, number, number], { seq: number; graphemes: number }>(
      `SELECT seq, coalesce(graphemes, ${UNKNOWN_ROW_GRAPHEMES}) AS graphemes FROM transcript INDEXED BY transcript_session
        WHERE sid = ? AND seq > ? AND seq <= ? ORDER BY seq`,
    ),
    page: db.prepare<[number, number, number, number], Omit<RawTranscriptRow, 'name'>>(
      `SELECT seq, row_class, key, created_at, ${bodySql()} AS body FROM transcript
        WHERE sid = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`,
    ),
    fits: db.prepare<[number, number], Omit<RawTranscriptRow, 'name'>>(
      `SELECT seq, row_class, key, created_at, ${bodySql()} AS body FROM transcript INDEXED BY transcript_class
        WHERE sid = ? AND row_class = 'image_fit' AND ${OPENS_UNIT} AND seq <= ? ORDER BY seq`,
    ),
    // Unit metadata: these read only the (sid, seq) and (sid, row_class, seq) indexes.
    starts: db.prepare<[number, number, number], { seq: number; row_class: RowClass }>(
      `SELECT seq, row_class FROM transcript INDEXED BY transcript_class
        WHERE sid = ? AND row_class IN ('user', 'image_fit') AND ${OPENS_UNIT} AND seq > ? AND seq <= ? ORDER BY seq`,
    ),
    countStarts: db
      .prepare<[number, number], number>(
        `SELECT count(*) FROM transcript INDEXED BY transcript_class
          WHERE sid = ? AND row_class IN ('user', 'image_fit') AND ${OPENS_UNIT} AND seq > ?`,
      )
      .pluck(),
    firstStart: db
      .prepare<[number, number], number | null>(
        `SELECT min(seq) FROM transcript INDEXED BY transcript_class
          WHERE sid = ? AND row_class IN ('user', 'image_fit') AND ${OPENS_UNIT} AND seq > ?`,
      )
      .pluck(),
    firstAfter: db
      .prepare<[number, number, number], number | null>(
        'SELECT min(seq) FROM transcript INDEXED BY transcript_session WHERE sid = ? AND seq > ? AND seq <= ?',
      )
      .pluck(),
    lastBefore: db
      .prepare<[number, number], number | null>(
        'SELECT max(seq) FROM transcript INDEXED BY transcript_session WHERE sid = ? AND seq < ?',
      )
      .pluck(),
  };
}

const stmts = perDb(prepare);

/**
 * Decodes one stored row. Every read that hands rows to callers goes through here, so a body
 * that is not valid JSON or not a StoredBody fails loudly, naming its seq, instead of being
 * trusted.
 */
export function decodeRow(raw: RawTranscriptRow): StoredRow {
  const body = parseStoredBody(raw.seq, raw.body);
  const rowClass = RowClass.safeParse(raw.row_class);
  if (!rowClass.success) throw new Error(`transcript row ${raw.seq} is corrupt: unknown row_class "${raw.row_class}"`);
  return {
    session: raw.name,
    seq: raw.seq,
    row_class: rowClass.data,
    key: raw.key,
    created_at: raw.created_at,
    body,
  };
}

/** Resolves one reference; see loadSources for the errors. */
export function source(db: Db, ref: SourceRef): StoredRow {
  return loadSources(db, [ref])[0]!;
}

/**
 * Resolves references to rows, in the order given (a repeated reference repeats its row).
 * Fails with unknown_session for a session id that does not exist, unknown_row for a seq no
 * row has, and row_session_mismatch for a seq that belongs to another session.
 */
export function loadSources(db: Db, refs: readonly SourceRef[]): StoredRow[] {
  const sessions = new Set(refs.map((r) => r.session));
  for (const name of sessions) requireSession(db, name);

  const st = stmts(db);
  const unique = [...new Set(refs.map((r) => r.seq))];
  const found = new Map<number, RawTranscriptRow>();
  for (let i = 0; i < unique.length; i += SOURCE_BATCH) {
    for (const raw of st.bySeqs.all(JSON.stringify(unique.slice(i, i + SOURCE_BATCH)))) found.set(raw.seq, raw);
  }

  const decoded = new Map<number, StoredRow>();
  return refs.map((ref) => {
    const raw = found.get(ref.seq);
    if (raw === undefined) {
      throw new AlbedoError('unknown_row', `no transcript row with seq ${ref.seq}`, { session: ref.session, seq: ref.seq });
    }
    if (raw.name !== ref.session) {
      throw new AlbedoError('row_session_mismatch', `seq ${ref.seq} belongs to session "${raw.name}", not "${ref.session}"`, {
        session: ref.session,
        seq: ref.seq,
        row_session: raw.name,
      });
    }
    let row = decoded.get(ref.seq);
    if (row === undefined) decoded.set(ref.seq, row = decodeRow(raw));
    return row;
  });
}

/** The session's newest seq (0 when empty), without counting its rows: one index probe. */
export function sessionHead(db: Db, session: string): { sid: number; head: number } {
  const s = requireSession(db, session);
  return { sid: s.sid, head: headSeq(db, s.sid) };
}

/** sessionHead's seq for a session already looked up. */
export function headSeq(db: Db, sid: number): number {
  return stmts(db).head.get(sid) ?? 0;
}

/**
 * How many of the session's rows have seqs in (`after`, `through`], counting no further than
 * `cap`: a bounded probe of the session index, for deciding whether a range is worth reading in
 * slices.
 */
export function countRowsBetween(db: Db, sid: number, after: number, through: number, cap: number): number {
  return stmts(db).countBetween.get(sid, after, through, cap) ?? 0;
}

/** What `seqAtVolume` counts for a row stored before rows carried their grapheme count. */
const UNKNOWN_ROW_GRAPHEMES = 1024;

/**
 * The first seq at which the session's rows after `after` (through `through`) add up to at
 * least `graphemes` rendered graphemes and at least `rows` rows, or undefined when they never
 * do. Reads the (sid, seq, graphemes) index only, and stops there: no row is decoded.
 */
export function seqAtVolume(db: Db, sid: number, after: number, through: number, want: { graphemes: number; rows: number }): number | undefined {
  let graphemes = 0;
  let rows = 0;
  for (const r of stmts(db).volumes.iterate(sid, after, through)) {
    graphemes += r.graphemes;
    rows += 1;
    if (graphemes >= want.graphemes && rows >= want.rows) return r.seq;
  }
  return undefined;
}

/** The first row after `seq` (through `through`) that opens a compaction unit, or undefined. */
export function nextUnitStart(db: Db, sid: number, seq: number, through: number): number | undefined {
  const next = stmts(db).firstStart.get(sid, seq) ?? undefined;
  return next !== undefined && next <= through ? next : undefined;
}

/** The session's append boundary: its newest seq and how many rows it holds up to there. */
export function snapshot(db: Db, session: string): Snapshot {
  const s = requireSession(db, session);
  const st = stmts(db);
  const head = st.head.get(s.sid) ?? 0;
  return { session: s.name, sid: s.sid, head, rows: head === 0 ? 0 : st.countThrough.get(s.sid, head)! };
}

/**
 * One page of rows after a seq, for `transcript.rows`. `next_after` is the seq to pass as
 * `after` for the following page, or null when this page reached the session's end.
 */
export function rowsAfter(
  db: Db,
  session: string,
  after: number,
  limit: number,
): { rows: StoredRow[]; next_after: number | null } {
  const s = requireSession(db, session);
  const raws = stmts(db).page.all(s.sid, after, Number.MAX_SAFE_INTEGER, limit + 1);
  const more = raws.length > limit;
  const rows = raws.slice(0, limit).map((r) => decodeRow({ ...r, name: s.name }));
  return { rows, next_after: more ? rows[rows.length - 1]!.seq : null };
}

// ---------------------------------------------------------------------------------------------
// Fold pages and image fits

/** One image-fit notice: before `seq`, images with hash `from` read as `to`. */
interface Fit {
  seq: number;
  to: ImagePart;
}

/**
 * Image-fit replacement.
 *
 * An image_fit notice at seq F says: the image with hash H, as uploaded, was replaced by the
 * fitted image T. It speaks about what came before it, so it replaces H only in rows with a
 * seq below F; an occurrence of H after F is a fresh upload that a later fit may or may not
 * cover.
 *
 * Fits compose. A row at seq s holding image X reads as the result of walking the fits in
 * seq order from s on: every fit with seq > (the seq of the last fit applied, initially s)
 * whose from_hash is the current hash replaces it, and the walk continues from that fit's
 * seq with the new hash. So with A -> B at 10 and B -> C at 20, a row at 5 holding A reads C,
 * a row at 15 holding B reads C, and a row at 15 holding A keeps A. A hash fitted twice (A -> B
 * at 10, A uploaded again at 12, A -> D at 30) gives a row at 5 B (or what B became later)
 * and a row at 12 D.
 *
 * Only fits of the same session count, and only those at or below the fold's boundary (its
 * snapshot), including fits after the range being read. The fit list is loaded once per fold,
 * grouped by from_hash in seq order, so each image resolves with a binary search per step of
 * its chain. A replaced image keeps the original's `elided` mark.
 */
class FitTable {
  private readonly byHash = new Map<string, Fit[]>();

  constructor(rows: Iterable<Omit<RawTranscriptRow, 'name'>>, session: string) {
    for (const raw of rows) {
      const row = decodeRow({ ...raw, name: session });
      const fit = ImageFitBody.safeParse(row.body);
      if (!fit.success) throw new Error(`transcript row ${raw.seq} is corrupt: row_class image_fit without an image_fit notice`);
      const list = this.byHash.get(fit.data.body.from_hash) ?? [];
      list.push({ seq: raw.seq, to: fit.data.body.to });
      this.byHash.set(fit.data.body.from_hash, list);
    }
  }

  get empty(): boolean {
    return this.byHash.size === 0;
  }

  /** The image a part at seq `seq` reads as; the same object when no fit applies. */
  resolve(part: ImagePart, seq: number): ImagePart {
    let current = part;
    let at = seq;
    for (;;) {
      const list = this.byHash.get(current.hash);
      if (list === undefined) break;
      const next = firstAfter(list, at);
      if (next === undefined) break;
      current = next.to;
      at = next.seq;
    }
    if (current === part) return part;
    return part.elided === true ? { ...current, elided: true } : { ...current };
  }

  apply(row: StoredRow): StoredRow {
    const body = row.body;
    if (body.kind !== 'user' && body.kind !== 'tool_result') return row;
    let changed = false;
    const fit = <P extends { type: string }>(p: P | ImagePart): P | ImagePart => {
      if (p.type !== 'image') return p;
      const r = this.resolve(p as ImagePart, row.seq);
      if (r !== p) changed = true;
      return r;
    };
    if (body.kind === 'user') {
      const content = body.content.map(fit);
      return changed ? { ...row, body: { ...body, content } } : row;
    }
    const content = body.content.map(fit);
    return changed ? { ...row, body: { ...body, content } } : row;
  }
}

/** How one image reads at one seq, given the session's image-fit notices (see FitTable). */
export interface ImageFits {
  /** True when the session has no fit through the boundary. */
  readonly empty: boolean;
  /** The image a part at `seq` reads as; the same object when no fit applies. */
  resolve(part: ImagePart, seq: number): ImagePart;
}

/** The session's image-fit notices through `boundary` (default: its head), for single lookups. */
export function imageFits(db: Db, session: string, boundary?: number): ImageFits {
  const s = requireSession(db, session);
  const st = stmts(db);
  return new FitTable(st.fits.all(s.sid, boundary ?? st.head.get(s.sid) ?? 0), s.name);
}

/** The first fit with seq > at, in a list sorted by seq. */
function firstAfter(list: readonly Fit[], at: number): Fit | undefined {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]!.seq > at) hi = mid;
    else lo = mid + 1;
  }
  return list[lo];
}

/**
 * Reads the inclusive seq range [from, to] of a session in chronological pages (keyset paging
 * on the (sid, seq) index), with image fits applied as described at FitTable. The session, the
 * boundary and the fit list are resolved when this is called; each page is read only when the
 * caller asks for it, so a caller that stops early reads nothing more. Rows above the boundary
 * are never read, which keeps a fold consistent with its snapshot while appends go on.
 */
export function foldSources(
  db: Db,
  session: string,
  from: number,
  to: number,
  opts: FoldOptions = {},
): Generator<StoredRow[], void, undefined> {
  if (from > to) throw new AlbedoError('invalid_range', `from ${from} is after to ${to}`, { from, to });
  const s = requireSession(db, session);
  const st = stmts(db);
  const boundary = opts.boundary ?? st.head.get(s.sid) ?? 0;
  const pageSize = opts.pageSize ?? FOLD_PAGE_ROWS;
  const fits = new FitTable(st.fits.all(s.sid, boundary), s.name);
  const last = Math.min(to, boundary);
  const pageMs = opts.pageMs;
  /** Up to pageSize rows after `after`, fewer once pageMs is spent; whether rows may follow. */
  const read = (after: number): { rows: StoredRow[]; more: boolean } => {
    if (pageMs === undefined) {
      const rows = st.page.all(s.sid, after, last, pageSize).map((r) => decodeRow({ ...r, name: s.name }));
      return { rows, more: rows.length === pageSize };
    }
    const started = performance.now();
    const rows: StoredRow[] = [];
    for (const r of st.page.iterate(s.sid, after, last, pageSize)) {
      rows.push(decodeRow({ ...r, name: s.name }));
      // Leaving the loop resets the statement; the next page starts after the last row read.
      if (performance.now() - started >= pageMs) return { rows, more: true };
    }
    return { rows, more: rows.length === pageSize };
  };
  return (function* pages(): Generator<StoredRow[], void, undefined> {
    let after = from - 1;
    while (after < last) {
      const { rows, more } = read(after);
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.seq;
      yield fits.empty ? rows : rows.map((r) => fits.apply(r));
      if (!more) return;
    }
  })();
}

// ---------------------------------------------------------------------------------------------
// Units

/**
 * Compaction units of a session, from row metadata only (never the body column).
 *
 * Every user row and every image_fit notice starts a unit; a unit runs to the row before the
 * next start, or to the last row of the range. The range is the session's rows with
 * after < seq <= through (default: all of them). Rows of the range before its first start
 * form a leading unit with user:false: at the session's beginning that is the leading unit of
 * the session, after `after` it is the tail of a unit that began at or before `after`.
 *
 * Starts come from the (sid, row_class, seq) index; each unit's end is one probe of the
 * (sid, seq) index for the newest row below the next start.
 */
export function units(db: Db, session: string, opts: { after?: number; through?: number } = {}): Unit[] {
  const s = requireSession(db, session);
  const st = stmts(db);
  const after = opts.after ?? 0;
  const through = opts.through ?? Number.MAX_SAFE_INTEGER;
  const first = st.firstAfter.get(s.sid, after, through);
  if (first === null || first === undefined) return [];
  const starts = st.starts.all(s.sid, after, through);
  const out: Unit[] = [];
  const lastRow = st.headThrough.get(s.sid, through)!;
  const endBefore = (next: number): number => st.lastBefore.get(s.sid, next)!;
  const firstStart = starts[0]?.seq;
  if (firstStart === undefined || first < firstStart) {
    out.push({ start: first, end: firstStart === undefined ? lastRow : endBefore(firstStart), user: false });
  }
  starts.forEach((u, i) => {
    const next = starts[i + 1];
    out.push({ start: u.seq, end: next === undefined ? lastRow : endBefore(next.seq), user: u.row_class === 'user' });
  });
  return out;
}

/**
 * How many units `units(db, session, { after })` would return, from index counts: the starts
 * after `after`, plus one when rows after `after` precede the first of them.
 */
export function countUnitsAfter(db: Db, session: string, after: number): number {
  const s = requireSession(db, session);
  const st = stmts(db);
  const first = st.firstAfter.get(s.sid, after, Number.MAX_SAFE_INTEGER);
  if (first === null || first === undefined) return 0;
  const firstStart = st.firstStart.get(s.sid, after);
  const starts = st.countStarts.get(s.sid, after)!;
  return starts + (firstStart === null || firstStart === undefined || first < firstStart ? 1 : 0);
}
