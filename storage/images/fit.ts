// Image fitting's tables and queries: the cache of fits by (source image, limits), how far each
// session is checked against a set of limits, and the indexed search for images over limits in
// a range of a session's rows. Deciding what to fit and running sharp is daemon/image-fit.ts's.
import type { ImagePart } from '../../protocol/rows.ts';
import { type Db, perDb, withoutFsync } from '../db.ts';

/** A stored image's measures: what the limits are checked against. */
export interface PayloadSize {
  hash: string;
  media_type: string;
  /** Pixels. */
  width: number;
  height: number;
  /** Bytes of the image file. */
  bytes: number;
}

/** One image named by a row (a user upload, a tool output, or an image_fit notice's result). */
export interface ImageRef extends PayloadSize {
  seq: number;
}

/** Limits as numbers, for SQL: `pixels` null means none. */
export interface SqlLimits {
  edgePx: number;
  pixels: number | null;
  bytes: number;
}

/** Rows of a session read per window of the oversize search. */
export const FIT_SCAN_ROWS = 4096;

function prepare(db: Db) {
  return {
    windowEnd: db
      .prepare<[number, number, number, number], number>(
        `SELECT seq FROM transcript INDEXED BY transcript_session
          WHERE sid = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT 1 OFFSET ?`,
      )
      .pluck(),
    // Walks the session's rows on (sid, seq), each row's references on payload_refs(seq) and
    // each image on the payloads key; only the few rows that name an image touch payloads.
    oversized: db.prepare<[number, number, number, number, number, number], ImageRef>(
      `SELECT r.seq, p.hash, p.media_type, p.width, p.height, p.bytes
         FROM transcript t INDEXED BY transcript_session
         JOIN payload_refs r INDEXED BY payload_refs_seq ON r.seq = t.seq
         JOIN payloads p ON p.hash = r.hash
        WHERE t.sid = ? AND t.seq > ? AND t.seq <= ?
          AND (max(p.width, p.height) > ? OR p.width * p.height > ? OR p.bytes > ?)
        ORDER BY t.seq`,
    ),
    size: db.prepare<[string], PayloadSize>('SELECT hash, media_type, width, height, bytes FROM payloads WHERE hash = ?'),
    cached: db.prepare<[string, string], PayloadSize>(
      `SELECT p.hash, p.media_type, p.width, p.height, p.bytes
         FROM image_fits f JOIN payloads p ON p.hash = f.fitted_hash
        WHERE f.source_hash = ? AND f.limits = ?`,
    ),
    saveFit: db.prepare<[string, string, string, number]>(
      'INSERT OR REPLACE INTO image_fits (source_hash, limits, fitted_hash, created_at) VALUES (?, ?, ?, ?)',
    ),
    checked: db.prepare<[number, string], { through: number; rewrites: number }>(
      'SELECT through, rewrites FROM image_fit_checked WHERE sid = ? AND limits = ?',
    ),
    saveChecked: db.prepare<[number, string, number, number]>(
      'INSERT OR REPLACE INTO image_fit_checked (sid, limits, through, rewrites) VALUES (?, ?, ?, ?)',
    ),
  };
}

const stmts = perDb(prepare);

/**
 * The images named by the session's rows with after < seq <= through that break a limit, in
 * seq order, from at most FIT_SCAN_ROWS rows; `next` is the last seq examined (to pass as
 * `after` for the rest), equal to `through` once the range is done. Each occurrence is listed:
 * its row may read it through a later fit, which the caller resolves.
 */
export function oversizedImages(db: Db, sid: number, after: number, through: number, l: SqlLimits): { refs: ImageRef[]; next: number } {
  const st = stmts(db);
  const end = st.windowEnd.get(sid, after, through, FIT_SCAN_ROWS - 1) ?? through;
  const refs = st.oversized.all(sid, after, end, l.edgePx, l.pixels ?? Number.MAX_SAFE_INTEGER, l.bytes);
  return { refs, next: end };
}

/** A stored image's measures, or undefined when no payload has this hash. */
export function payloadSize(db: Db, hash: string): PayloadSize | undefined {
  return stmts(db).size.get(hash);
}

/** The fit made earlier of this image for these limits, when it and its payload still exist. */
export function cachedFit(db: Db, sourceHash: string, limitsKey: string): ImagePart | undefined {
  const m = stmts(db).cached.get(sourceHash, limitsKey);
  return m === undefined ? undefined : { type: 'image', hash: m.hash, media_type: m.media_type, width: m.width, height: m.height };
}

/** Remembers a fit; both payloads must be stored (the cache row goes when either does). */
export function saveFit(db: Db, sourceHash: string, limitsKey: string, fittedHash: string, now = Date.now()): void {
  stmts(db).saveFit.run(sourceHash, limitsKey, fittedHash, now);
}

/** How far the session is known to be within these limits, and at which rewrite count. */
export function fitChecked(db: Db, sid: number, limitsKey: string): { through: number; rewrites: number } | undefined {
  return stmts(db).checked.get(sid, limitsKey);
}

/**
 * Remembers how far the session is known to be within these limits. Bookkeeping that only saves
 * a later prepare a search, so it commits without an fsync (storage/db.ts withoutFsync): it is on
 * a prepare's way, and a power cut before the next fsync only costs that search again.
 */
export function saveFitChecked(db: Db, sid: number, limitsKey: string, through: number, rewrites: number): void {
  withoutFsync(db, () => stmts(db).saveChecked.run(sid, limitsKey, through, rewrites));
}
