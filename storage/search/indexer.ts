// The background search indexer: moves rows past `search_index_state.indexed_through` into the
// trigram index, a bounded batch per call, and merges the index's segments in bounded steps
// (FTS5's own merging inside commits is off since migration 20). When to call either (idle
// time) is the daemon's choice (daemon/idle-work.ts); keeping already-indexed rows exact on
// rewrite is the schema triggers' job.
import { runSteps, type Steps } from '../../protocol/time-slice.ts';
import { type Db, perDb, withoutFsync } from '../db.ts';
import { distinctChars, fold, lastTwoChars } from './fold.ts';
import { ROW_TEXT_SQL } from '../transcript/row-text.ts';

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
    merge: db.prepare<[number]>("INSERT INTO transcript_fts (transcript_fts, rank) VALUES ('merge', ?)"),
    totalChanges: db.prepare<[], number>('SELECT total_changes()').pluck(),
    lagWindow: db.prepare<[number, number], number>('SELECT count(*) FROM transcript WHERE seq > ? AND seq <= ?').pluck(),
    newest: db.prepare<[], number | null>('SELECT max(seq) FROM transcript').pluck(),
  };
}

const stmts = perDb(prepare);

/** Newest seq the trigram index covers; rows above it are found by scanning. */
export function indexedThrough(db: Db): number {
  return stmts(db).cursor.get() ?? 0;
}

/**
 * Indexes rows past the cursor, oldest first: up to `maxRows` of them, and fewer once their
 * texts reach `maxChars` characters together (at least one row; the insert's cost grows with
 * the text, so a row count alone does not bound a call's time). Advances the cursor to the last
 * row indexed, in the same transaction. Returns how many rows it indexed; 0 means caught up.
 * The commit skips the fsync: the index and its cursor commit together, so after a power loss
 * they are either both there or both not, and rows past the cursor are scanned and indexed
 * again; an fsync per batch would only compete with the appends for the disk.
 */
export function indexPending(db: Db, maxRows: number = DEFAULT_INDEX_BATCH_ROWS, maxChars = Infinity): number {
  const st = stmts(db);
  return withoutFsync(db, () =>
    db.transaction(() => {
      const from = st.cursor.get() ?? 0;
      const end = st.batchEnd.get(from, maxRows);
      if (end === null || end === undefined) return 0;
      // Folded here once per row for both tables (the schema triggers fold through SQL functions).
      let indexed = 0;
      let chars = 0;
      let last = from;
      for (const r of st.pending.all(from, end)) {
        if (indexed > 0 && chars + r.text.length > maxChars) break;
        const folded = fold(r.text);
        st.index.run(r.seq, folded, r.sid);
        st.row.run(r.seq, r.sid, lastTwoChars(folded), distinctChars(folded));
        indexed++;
        chars += r.text.length;
        last = r.seq;
      }
      st.advance.run(indexed === 0 ? end : last);
      return indexed;
    })());
}

/**
 * One bounded step of merging the index's segments: FTS5 writes about `pages` pages of merged
 * data, on levels that hold enough segments to be worth it (its `usermerge` setting), and
 * carries on with a merge an earlier step left unfinished. Returns whether there was anything
 * to merge (FTS5 changes at least two rows when it does work); false means the index is as
 * merged as it needs to be until new segments arrive. Commits without an fsync, as indexing
 * does: merging rearranges the index without changing what it answers.
 */
export function mergeSearchIndex(db: Db, pages: number): boolean {
  const st = stmts(db);
  return withoutFsync(db, () => {
    const before = st.totalChanges.get() ?? 0;
    st.merge.run(Math.max(1, Math.round(pages)));
    return (st.totalChanges.get() ?? 0) - before >= 2;
  });
}

/**
 * One batch of a bulk build, when nothing waits on it: up to `batchRows` rows indexed, then one
 * large merge step, so merging keeps pace with the segments the batches add (FTS5's automerge is
 * off). Returns the rows indexed; 0 means caught up (then no merge step runs).
 */
export function indexBatchAndMerge(db: Db, batchRows: number = BULK_INDEX_BATCH_ROWS): number {
  const n = indexPending(db, batchRows);
  if (n > 0) mergeSearchIndex(db, BULK_MERGE_PAGES);
  return n;
}

/** Merges until nothing is left to merge, in large steps (the end of a bulk build). */
export function mergeSearchIndexFully(db: Db): void {
  while (mergeSearchIndex(db, BULK_MERGE_PAGES));
}

/**
 * Indexes every pending row and merges until nothing is left to merge: what the daemon does
 * over many idle turns, in one go (tools, benchmarks and tests that want a caught-up index).
 * Returns the rows indexed.
 */
export function catchUpSearchIndex(db: Db, batchRows: number = BULK_INDEX_BATCH_ROWS): number {
  let total = 0;
  for (let n = indexBatchAndMerge(db, batchRows); n > 0; n = indexBatchAndMerge(db, batchRows)) total += n;
  mergeSearchIndexFully(db);
  return total;
}

/** Pages per merge step when nothing waits on it (bulk builds). */
const BULK_MERGE_PAGES = 2000;

/**
 * Rows per batch of a bulk build. Each batch commits one index segment, and every segment is
 * merged again on each level it climbs: fewer, larger batches cost the same in inserts and
 * much less in merging.
 */
export const BULK_INDEX_BATCH_ROWS = 8192;

/**
 * Seqs per count of searchIndexLagSteps, a step each: a read of each row in them, ~0.5 ms warm
 * and ~3.5 ms cold at most (measured in stop 48), so about one slice of the event loop.
 */
const LAG_WINDOW_SEQS = 1024;

/**
 * Rows the index has not reached yet, counted a window of seqs per step: after a large import
 * that is a read of up to a million rows, seconds, which the daemon runs sliced (daemon.status).
 * Rows, not seqs: a deleted session leaves a gap of seqs behind the cursor.
 */
export function* searchIndexLagSteps(db: Db): Steps<number> {
  const st = stmts(db);
  const cursor = st.cursor.get() ?? 0;
  const newest = st.newest.get() ?? 0;
  let rows = 0;
  for (let from = cursor; from < newest; from += LAG_WINDOW_SEQS) {
    rows += st.lagWindow.get(from, Math.min(newest, from + LAG_WINDOW_SEQS)) ?? 0;
    yield;
  }
  return rows;
}

/** searchIndexLagSteps at once: rows the index has not reached yet. */
export function searchIndexLag(db: Db): number {
  return runSteps(searchIndexLagSteps(db));
}

/**
 * How far the index is behind in seqs (the newest row's seq less the cursor): at least the rows
 * it has not reached, more where deleted rows left gaps. Two index lookups, cheap enough to ask
 * after every append, where counting the rows (searchIndexLag) costs a read of each.
 */
export function seqsBehindIndex(db: Db): number {
  const st = stmts(db);
  return Math.max(0, (st.newest.get() ?? 0) - (st.cursor.get() ?? 0));
}
