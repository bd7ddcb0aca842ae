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
    any: db.prepare<[number], number>('SELECT EXISTS (SELECT 1 FROM transcript WHERE seq > ?)').pluck(),
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

/** Why indexSlice stopped. */
export type SliceEnd = 'caught-up' | 'budget' | 'yielded';

/** The sentinel that rolls a yielded slice back (db.transaction rolls back on a throw). */
class Yielded extends Error {}

/**
 * One slice of the background indexer (storage/index-worker-thread.ts): like indexPending, in
 * one write transaction, but it looks at the clock and at `yieldNow` after every row. Past
 * `budgetMs` it commits what it has, with the cursor at the last row done; once `yieldNow()`
 * says a request wants the database it rolls back instead, so the write lock is free after one
 * row's work rather than after the slice's (and its commit's, which flushes an FTS segment).
 * Either way the index and the cursor agree: the rolled-back rows are indexed again later.
 */
export function indexSlice(
  db: Db,
  opts: { maxRows: number; budgetMs: number; yieldNow: () => boolean },
): { indexed: number; end: SliceEnd } {
  const st = stmts(db);
  const started = performance.now();
  try {
    return withoutFsync(db, () => db.transaction(() => {
      const from = st.cursor.get() ?? 0;
      const end = st.batchEnd.get(from, opts.maxRows);
      if (end === null || end === undefined) return { indexed: 0, end: 'caught-up' as const };
      let indexed = 0;
      let through = from;
      let stop: SliceEnd = 'caught-up';
      for (const r of st.pending.all(from, end)) {
        if (opts.yieldNow()) throw new Yielded();
        const folded = fold(r.text);
        st.index.run(r.seq, folded, r.sid);
        st.row.run(r.seq, r.sid, lastTwoChars(folded), distinctChars(folded));
        indexed++;
        through = r.seq;
        if (performance.now() - started >= opts.budgetMs) {
          stop = 'budget';
          break;
        }
      }
      if (through === end) stop = indexed === opts.maxRows ? 'budget' : 'caught-up';
      // A request may have come while the last row was indexed: its wait should not include the commit.
      if (opts.yieldNow()) throw new Yielded();
      st.advance.run(through);
      return { indexed, end: stop };
    }).immediate());
  } catch (err) {
    if (err instanceof Yielded) return { indexed: 0, end: 'yielded' };
    throw err;
  }
}

/** Whether any row is past the cursor (one index seek, where searchIndexLag counts them). */
export function hasPending(db: Db): boolean {
  const st = stmts(db);
  return st.any.get(st.cursor.get() ?? 0) === 1;
}

/** Rows the index has not reached yet. */
export function searchIndexLag(db: Db): number {
  const st = stmts(db);
  return st.lag.get(st.cursor.get() ?? 0) ?? 0;
}
