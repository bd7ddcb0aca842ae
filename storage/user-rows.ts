// The user inputs of a session in order, read through the (sid, row_class, seq) index without
// decoding bodies. Saved cuts count these rows, so positions survive provider projection.
import type { Db } from './db.ts';

export interface UserRowText {
  seq: number;
  /** The stored plain text (storage/row-text.ts), which fingerprints hash. */
  text: string;
}

/** Up to `limit` user rows with seq > `after`, oldest first. */
export function userRowsAfter(db: Db, sid: number, after: number, limit: number): UserRowText[] {
  return db
    .prepare("SELECT seq, text FROM transcript WHERE sid = ? AND row_class = 'user' AND seq > ? ORDER BY seq LIMIT ?")
    .all(sid, after, limit) as UserRowText[];
}

/** The newest `limit` user rows with seq < `before`, oldest first. */
export function userRowsBefore(db: Db, sid: number, before: number, limit: number): UserRowText[] {
  const rows = db
    .prepare("SELECT seq, text FROM transcript WHERE sid = ? AND row_class = 'user' AND seq < ? ORDER BY seq DESC LIMIT ?")
    .all(sid, before, limit) as UserRowText[];
  return rows.reverse();
}

/** How many user rows the session has before `seq`, from the index alone. */
export function userRowsBeforeCount(db: Db, sid: number, seq: number): number {
  const r = db.prepare("SELECT count(*) AS n FROM transcript WHERE sid = ? AND row_class = 'user' AND seq < ?").get(sid, seq) as { n: number };
  return r.n;
}

/** Seq of the n-th user row (0-based), or undefined when the session has fewer. */
export function nthUserSeq(db: Db, sid: number, n: number): number | undefined {
  const r = db
    .prepare("SELECT seq FROM transcript WHERE sid = ? AND row_class = 'user' ORDER BY seq LIMIT 1 OFFSET ?")
    .get(sid, n) as { seq: number } | undefined;
  return r?.seq;
}

/** How many rows of the session moved or changed in place so far (see migration 2). */
export function sessionRewrites(db: Db, sid: number): number {
  const r = db.prepare('SELECT rewrites FROM sessions WHERE sid = ?').get(sid) as { rewrites: number } | undefined;
  return r?.rewrites ?? 0;
}
