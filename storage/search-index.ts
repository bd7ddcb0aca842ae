// The background search indexer: moves rows past `search_index_state.indexed_through` into the
// trigram index, a bounded batch per call. When to call it (idle time) is the daemon's choice;
// keeping already-indexed rows exact on rewrite is the schema triggers' job.
import { type Db, perDb, withoutFsync } from './db.ts';
import { distinctChars, fold, lastTwoChars } from './fold.ts';
import { ROW_TEXT_SQL } from './row-text.ts';

/** Rows indexed per call unless the caller says otherwise. */
export const DEFAULT_INDEX_BATCH_ROWS = 2048;

function prepare(db: Db) {
  return {
    cursor: db.prepare<[], number>('SELECT indexed_through FROM search_index_state WHERE id = 1').pluck(),
    // The batch's last seq, computed before inserting so the insert and the cursor agree.
    batchEnd: db
      .prepare<[number, number], number | null>(
        'SELECT max(seq) FROM (SELECT seq FROM transcript WHERE seq > ? ORDER BY seq LIMIT ?)',
      )
      .pluck(),
    pending: db.prepare<[number, number], { seq: number; sid: number; text: string }>(
      `SELECT seq, sid, ${ROW_TEXT_SQL} AS text FROM transcript WHERE seq > ? AND seq <= ? ORDER BY seq`,
    ),
    index: db.prepare<[number, string, number]>('INSERT INTO transcript_fts (rowid, text, sid) VALUES (?, ?, ?)'),
    row: db.prepare<[number, number, string, string]>('INSERT INTO search_rows (seq, sid, tail, chars) VALUES (?, ?, ?, ?)'),
    advance: db.prepare<[number]>('UPDATE search_index_state SET indexed_through = ? WHERE id = 1'),
    lag: db.prepare<[number], number>('SELECT count(*) FROM transcript WHERE seq > ?').pluck(),
  };
}

const stmts = perDb(prepare);

/** Newest seq the trigram index covers; rows above it are found by scanning. */
export function indexedThrough(db: Db): number {
  return stmts(db).cursor.get() ?? 0;
}

/**
 * Indexes up to `maxRows` rows past the cursor, oldest first, and advances the cursor to the
 * last of them, in one transaction. Returns how many rows it indexed; 0 means caught up.
 * The commit skips the fsync: the index and its cursor commit together, so after a power loss
 * they are either both there or both not, and rows past the cursor are scanned and indexed
 * again; an fsync per batch would only compete with the appends for the disk.
 */
export function indexPending(db: Db, maxRows: number = DEFAULT_INDEX_BATCH_ROWS): number {
  const st = stmts(db);
  return withoutFsync(db, () => db.transaction(() => {
    const from = st.cursor.get() ?? 0;
    const end = st.batchEnd.get(from, maxRows);
    if (end === null || end === undefined) return 0;
    // Folded here once per row for both tables (the schema triggers fold through SQL functions).
    let indexed = 0;
    for (const r of st.pending.all(from, end)) {
      const folded = fold(r.text);
      st.index.run(r.seq, folded, r.sid);
      st.row.run(r.seq, r.sid, lastTwoChars(folded), distinctChars(folded));
      indexed++;
    }
    st.advance.run(end);
    return indexed;
  })());
}

/** Rows the index has not reached yet. */
export function searchIndexLag(db: Db): number {
  const st = stmts(db);
  return st.lag.get(st.cursor.get() ?? 0) ?? 0;
}
