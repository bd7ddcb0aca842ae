// The rows saved cuts are counted in, read through the (sid, row_class, seq) and (sid, seq)
// indexes: user inputs (their text, derived from the body as every read does, is what fingerprints hash),
// image-fit unit openers, and plain row counts. Interpreting them is strategies/harness/cut.ts.
import { type Db, perDb } from '../db.ts';
import { ROW_TEXT_SQL } from './row-text.ts';

/**
 * The rows that open a unit (user inputs and image-fit notices), as SQL: the predicate of the
 * partial index transcript_class (migration 17), which holds only these rows so that the other
 * appends, nearly all of them, skip it. SQLite uses a partial index only for a query whose WHERE
 * has its predicate as a term, so every query by row_class includes this one verbatim; those
 * naming the index (INDEXED BY) fail to prepare without it.
 */
export const OPENS_UNIT = "row_class <> 'other'";

export interface UserRowText {
  seq: number;
  /** The row's plain text (storage/transcript/row-text.ts), which fingerprints hash. */
  text: string;
}

const stmts = perDb((db: Db) => ({
  after: db.prepare<[number, number, number], UserRowText>(
    `SELECT seq, ${ROW_TEXT_SQL} AS text FROM transcript INDEXED BY transcript_class WHERE sid = ? AND row_class = 'user' AND ${OPENS_UNIT} AND seq > ? ORDER BY seq LIMIT ?`,
  ),
  before: db.prepare<[number, number, number], UserRowText>(
    `SELECT seq, ${ROW_TEXT_SQL} AS text FROM transcript INDEXED BY transcript_class WHERE sid = ? AND row_class = 'user' AND ${OPENS_UNIT} AND seq < ? ORDER BY seq DESC LIMIT ?`,
  ),
  countBefore: db.prepare<[number, number], { n: number }>(`SELECT count(*) AS n FROM transcript INDEXED BY transcript_class WHERE sid = ? AND row_class = 'user' AND ${OPENS_UNIT} AND seq < ?`),
  nth: db.prepare<[number, number], { seq: number }>(`SELECT seq FROM transcript INDEXED BY transcript_class WHERE sid = ? AND row_class = 'user' AND ${OPENS_UNIT} ORDER BY seq LIMIT 1 OFFSET ?`),
  fitAfter: db.prepare<[number, number, number], { seq: number }>(
    `SELECT seq FROM transcript INDEXED BY transcript_class WHERE sid = ? AND row_class = 'image_fit' AND ${OPENS_UNIT} AND seq > ? ORDER BY seq LIMIT 1 OFFSET ?`,
  ),
  fitsBetween: db.prepare<[number, number, number], { n: number }>(
    `SELECT count(*) AS n FROM transcript INDEXED BY transcript_class WHERE sid = ? AND row_class = 'image_fit' AND ${OPENS_UNIT} AND seq > ? AND seq < ?`,
  ),
  openerAtOrBefore: db.prepare<[number, number], { seq: number; row_class: string }>(
    `SELECT seq, row_class FROM transcript WHERE sid = ? AND row_class IN ('user', 'image_fit') AND ${OPENS_UNIT} AND seq <= ? ORDER BY seq DESC LIMIT 1`,
  ),
  rowsBefore: db.prepare<[number, number], { n: number }>('SELECT count(*) AS n FROM transcript WHERE sid = ? AND seq < ?'),
  newestBefore: db.prepare<[number, number, number], { seq: number }>(
    'SELECT seq FROM transcript WHERE sid = ? AND seq < ? ORDER BY created_at DESC, seq DESC LIMIT ?',
  ),
  firstRow: db.prepare<[number], { seq: number | null }>('SELECT min(seq) AS seq FROM transcript WHERE sid = ?'),
  firstAfter: db.prepare<[number, number], { seq: number | null }>('SELECT min(seq) AS seq FROM transcript WHERE sid = ? AND seq > ?'),
  rewrites: db.prepare<[number], { rewrites: number }>('SELECT rewrites FROM sessions WHERE sid = ?'),
}));

/** Up to `limit` user rows with seq > `after`, oldest first. */
export function userRowsAfter(db: Db, sid: number, after: number, limit: number): UserRowText[] {
  return stmts(db).after.all(sid, after, limit);
}

/** The newest `limit` user rows with seq < `before`, oldest first. */
export function userRowsBefore(db: Db, sid: number, before: number, limit: number): UserRowText[] {
  return stmts(db).before.all(sid, before, limit).reverse();
}

/** How many user rows the session has before `seq`, from the index alone. */
export function userRowsBeforeCount(db: Db, sid: number, seq: number): number {
  return stmts(db).countBefore.get(sid, seq)!.n;
}

/** Seq of the n-th user row (0-based), or undefined when the session has fewer. */
export function nthUserSeq(db: Db, sid: number, n: number): number | undefined {
  return stmts(db).nth.get(sid, n)?.seq;
}

/** Seq of the n-th image-fit row (0-based) after `after`, or undefined. */
export function nthFitAfter(db: Db, sid: number, after: number, n: number): number | undefined {
  return stmts(db).fitAfter.get(sid, after, n)?.seq;
}

/** Image-fit rows strictly between two seqs. */
export function fitsBetween(db: Db, sid: number, after: number, before: number): number {
  return stmts(db).fitsBetween.get(sid, after, before)!.n;
}

/** The newest unit opener (user input or image fit) at or before `seq`. */
export function openerAtOrBefore(db: Db, sid: number, seq: number): { seq: number; isUser: boolean } | undefined {
  const r = stmts(db).openerAtOrBefore.get(sid, seq);
  return r === undefined ? undefined : { seq: r.seq, isUser: r.row_class === 'user' };
}

/** Rows of the session (any kind) before `seq`, from the index alone. */
export function rowsBeforeCount(db: Db, sid: number, seq: number): number {
  return stmts(db).rowsBefore.get(sid, seq)!.n;
}

/**
 * The `n` rows before `seq` that were appended last (by created_at): after a settle, the
 * contents that arrived late sit among them. Seqs, in no particular order.
 */
export function newestRowsBefore(db: Db, sid: number, seq: number, n: number): number[] {
  return stmts(db).newestBefore.all(sid, seq, n).map((r) => r.seq);
}

/** The session's lowest seq, or undefined when it has no rows. */
export function firstSeq(db: Db, sid: number): number | undefined {
  return stmts(db).firstRow.get(sid)?.seq ?? undefined;
}

/** The session's lowest seq above `seq`, or undefined when no row follows it. */
export function firstSeqAfter(db: Db, sid: number, seq: number): number | undefined {
  return stmts(db).firstAfter.get(sid, seq)?.seq ?? undefined;
}

/** How many rows of the session moved or changed in place so far (see migration 2). */
export function sessionRewrites(db: Db, sid: number): number {
  return stmts(db).rewrites.get(sid)?.rewrites ?? 0;
}
