// The background packer: stores compressed (storage/transcript/row-body.ts) the long row bodies that are
// still text. Appends pack their long rows as they write them (migration 22), so what the packer
// finds is the history of a file from before migration 22, which it packs a bounded unit at a
// time in the daemon's idle work (daemon/idle-work.ts) instead of in one long migration.
//
// It walks the transcript in seq order behind `pack_state.packed_through` (migration 23). Packing
// rewrites a row's columns, never its JSON, so every reader sees the same row before and after,
// and the search index's update trigger leaves the rewrite alone. Rows a settle moves keep their
// columns and stay on the same side of the cursor; the one it adds was packed by its append.
//
// Why appends still compress their own rows (docs/performance.md, "Packing in idle time,
// tried"): packing a row after it was written grows its b-tree cell in place, and the page
// splits that follow left the row table's pages much less full, which cost more disk than the
// compression costs time.
import { type Db, perDb, withoutFsync } from '../db.ts';
import { PACK_MIN_CHARS, packBody } from './row-body.ts';

/** Rows looked at per call unless the caller says otherwise (most are short and only counted). */
const DEFAULT_PACK_BATCH_ROWS = 4096;

function prepare(db: Db) {
  return {
    cursor: db.prepare<[], number>('SELECT packed_through FROM pack_state WHERE id = 1').pluck(),
    next: db.prepare<[number, number], number>('SELECT seq FROM transcript WHERE seq > ? ORDER BY seq LIMIT ?').pluck(),
    // octet_length reads the length from the record header, not the body: short rows cost little.
    // UTF-8 bytes are never fewer than UTF-16 units, so no body packBody would take is missed.
    candidates: db
      .prepare<[number, number, number], { seq: number; bytes: number }>(
        'SELECT seq, octet_length(body) AS bytes FROM transcript WHERE seq > ? AND seq <= ? AND packed IS NULL AND octet_length(body) >= ? ORDER BY seq',
      ),
    body: db.prepare<[number], string>('SELECT body FROM transcript WHERE seq = ?').pluck(),
    pack: db.prepare<[Buffer, number]>("UPDATE transcript SET body = '', packed = ? WHERE seq = ?"),
    advance: db.prepare<[number]>('UPDATE pack_state SET packed_through = ? WHERE id = 1'),
    lag: db.prepare<[number, number], number>('SELECT count(*) FROM transcript WHERE seq > ? AND packed IS NULL AND octet_length(body) >= ?').pluck(),
  };
}

const stmts = perDb(prepare);

/**
 * Packs bodies past the cursor, oldest first: looks at up to `maxRows` rows, and stops early
 * once the bodies it compressed reach `maxBytes` together (at least one; compressing costs about
 * the same per byte, so bytes bound a call's time). Advances the cursor past the rows it looked
 * at, in the same transaction. Returns how many rows it looked at; 0 means caught up.
 *
 * The commit skips the fsync, as the indexer's does: a packing lost to a power cut leaves the
 * rows as the text they were, and the cursor with them.
 */
export function packPending(db: Db, maxRows: number = DEFAULT_PACK_BATCH_ROWS, maxBytes = Infinity): number {
  const st = stmts(db);
  return withoutFsync(db, () =>
    db.transaction(() => {
      const from = st.cursor.get() ?? 0;
      const seqs = st.next.all(from, maxRows);
      if (seqs.length === 0) return 0;
      let through = seqs[seqs.length - 1]!;
      let bytes = 0;
      for (const c of st.candidates.all(from, through, PACK_MIN_CHARS)) {
        if (bytes > 0 && bytes + c.bytes > maxBytes) {
          through = c.seq - 1;
          break;
        }
        const stored = packBody(st.body.get(c.seq)!);
        // A body that would not shrink enough stays as it is (packBody's rule).
        if (stored.packed !== null) st.pack.run(stored.packed, c.seq);
        bytes += c.bytes;
      }
      st.advance.run(through);
      let looked = 0;
      while (looked < seqs.length && seqs[looked]! <= through) looked++;
      return looked;
    })());
}

/** Packs everything pending at once: what idle time does over many units (tools, benchmarks, tests). Returns rows looked at. */
export function catchUpPacking(db: Db): number {
  let total = 0;
  for (let n = packPending(db); n > 0; n = packPending(db)) total += n;
  return total;
}

/** Rows past the cursor long enough to be packed: what idle time has left to look at. */
export function packingLag(db: Db): number {
  const st = stmts(db);
  return st.lag.get(st.cursor.get() ?? 0, PACK_MIN_CHARS) ?? 0;
}
