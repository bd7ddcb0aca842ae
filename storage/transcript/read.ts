// `transcript_read`: a grapheme-paged rendering of a session's rows, built incrementally so a
// page costs the rows before and inside it, never the whole transcript. Row text is derived from
// each row's body by SQLite (ROW_TEXT_SQL, storage/transcript/row-text.ts), so it cannot drift from it.
import { AlbedoError } from '../../protocol/errors.ts';
import type { Params, Result } from '../../protocol/methods.ts';
import { UserOrigin, type StoredBody } from '../../protocol/rows.ts';
import { decodeRow } from './history.ts';
import { type Db, perDb, withoutFsync } from '../db.ts';
import { timeSlicer } from '../../protocol/time-slice.ts';
import { ONE_GRAPHEME_PER_CHAR, segmenter } from './graphemes.ts';
import { bodySql } from './row-body.ts';
import { ROW_TEXT_SQL, rowHeader } from './row-text.ts';
import { requireSession } from './sessions.ts';
import { sessionRewrites } from './user-rows.ts';

export interface ReadOptions {
  /** Awaited after every few milliseconds of work so a deep read lets other work run; default setImmediate. */
  yieldEvery?: () => Promise<void>;
}

/** Rows fetched per page. */
export const READ_PAGE_ROWS = 128;
/** Between two rendered rows. */
const SEPARATOR = '\n\n';

/**
 * A row with just what its rendering needs. The header needs a user row's origin and a tool
 * result's error flag, which only the body holds: SQLite extracts those two fields from the
 * JSON, so plain rows are never decoded here. Notices (few and small) are decoded whole.
 */
interface HeaderRow {
  seq: number;
  kind: StoredBody['kind'];
  call_id: string | null;
  origin: string | null;
  is_error: number | null;
  /** The body JSON, for notices only. */
  notice: string | null;
  row_class: string;
  created_at: number;
  text: string;
}

/** A row's JSON, packed or not (the fields below are read from it only for the rows that need them). */
const BODY = bodySql();

function prepare(db: Db) {
  return {
    page: db.prepare<[number, number, number, number], HeaderRow>(
      `SELECT seq, kind, row_class, created_at, ${ROW_TEXT_SQL} AS text,
              -- An orphan result has no call_id column (it answers no call); its body names the id.
              coalesce(call_id, CASE kind WHEN 'tool_result' THEN json_extract(${BODY}, '$.call_id') END) AS call_id,
              CASE kind WHEN 'user' THEN json_extract(${BODY}, '$.origin') END AS origin,
              CASE kind WHEN 'tool_result' THEN json_extract(${BODY}, '$.is_error') END AS is_error,
              CASE kind WHEN 'notice' THEN ${BODY} END AS notice
         FROM transcript WHERE sid = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`,
    ),
    exists: db
      .prepare<[number, number, number], number>('SELECT 1 FROM transcript WHERE sid = ? AND seq > ? AND seq <= ? LIMIT 1')
      .pluck(),
    // Index-only (the session index covers graphemes): row sizes without reading any text.
    sizes: db.prepare<[number, number, number, number], { seq: number; graphemes: number | null }>(
      'SELECT seq, graphemes FROM transcript INDEXED BY transcript_session WHERE sid = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?',
    ),
    // The session's rows in a seq range, grouped into blocks of BLOCK_SEQS consecutive seqs:
    // each block's last seq of the session, its rows, and its rendered size (NULL counts are
    // left out of the sum and show as counted < n). Index-only and summed by SQLite, so no row
    // reaches JS; grouping by seq needs no window over the rows, so it runs at index speed.
    blocks: db.prepare<[number, number, number], { last: number; n: number; counted: number; size: number | null }>(
      `SELECT max(seq) AS last, count(*) AS n, count(graphemes) AS counted, sum(graphemes + length(seq) + 2) AS size
         FROM transcript INDEXED BY transcript_session WHERE sid = ? AND seq > ? AND seq <= ?
        GROUP BY (seq - 1) / ${BLOCK_SEQS} ORDER BY (seq - 1) / ${BLOCK_SEQS}`,
    ),
    lastSeq: db.prepare<[number], number | null>('SELECT max(seq) FROM transcript WHERE sid = ?').pluck(),
    loadBlocks: db.prepare<[number], { created_at: number; rewrites: number; through: number; closed: number; ends: Buffer; sums: Buffer }>(
      'SELECT created_at, rewrites, through, closed, ends, sums FROM read_blocks WHERE sid = ?',
    ),
    saveBlocks: db.prepare<[number, number, number, number, number, Buffer, Buffer]>(
      `INSERT INTO read_blocks (sid, created_at, rewrites, through, closed, ends, sums) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (sid) DO UPDATE SET created_at = excluded.created_at, rewrites = excluded.rewrites, through = excluded.through,
         closed = excluded.closed, ends = excluded.ends, sums = excluded.sums`,
    ),
    // Rendered size of the rows in (after, through], and whether every one has a stored count.
    sizeBetween: db.prepare<[number, number, number], { n: number; counted: number; size: number | null }>(
      `SELECT count(*) AS n, count(graphemes) AS counted, sum(graphemes + length(seq) + 2) AS size
         FROM transcript INDEXED BY transcript_session WHERE sid = ? AND seq > ? AND seq <= ?`,
    ),
  };
}

const stmts = perDb(prepare);

function corrupt(seq: number, what: string): Error {
  return new Error(`transcript row ${seq} is corrupt: ${what}`);
}

/** The header of a row, through rowHeader so reads and other renderings agree. */
function header(row: HeaderRow, session: string): string {
  switch (row.kind) {
    case 'user': {
      const origin = UserOrigin.safeParse(row.origin);
      if (!origin.success) throw corrupt(row.seq, `user origin ${JSON.stringify(row.origin)}`);
      return rowHeader(row.seq, { kind: 'user', origin: origin.data, content: [] });
    }
    case 'assistant':
      return rowHeader(row.seq, { kind: 'assistant', content: [] });
    case 'tool_result':
      if (row.call_id === null) throw corrupt(row.seq, 'tool_result without call_id');
      return rowHeader(row.seq, { kind: 'tool_result', call_id: row.call_id, is_error: row.is_error === 1, content: [] });
    case 'notice': {
      const decoded = decodeRow({
        seq: row.seq,
        name: session,
        row_class: row.row_class,
        key: null,
        created_at: row.created_at,
        body: row.notice ?? '',
      });
      return rowHeader(row.seq, decoded.body);
    }
  }
}

/** A row longer than this (UTF-16 units) is fed in LF-ended chunks so a yield can fall inside it. */
const CHUNK_CHARS = 32 * 1024;

/** Splits after a LF near every CHUNK_CHARS units; graphemes never span a split. */
function* chunks(piece: string): Generator<string> {
  let from = 0;
  while (piece.length - from > CHUNK_CHARS) {
    const lf = piece.indexOf('\n', from + CHUNK_CHARS - 1);
    if (lf < 0) break;
    yield piece.slice(from, lf + 1);
    from = lf + 1;
  }
  yield from === 0 ? piece : piece.slice(from);
}

/**
 * Collects graphemes [offset, offset + limit) of a rendering fed to it in pieces, plus one
 * grapheme of lookahead to tell whether more follows.
 *
 * Each piece must end right after a LF or at the very end of the rendering. A grapheme break
 * always follows LF (only CR LF joins across a LF, and CR comes before it), so counting the
 * pieces' graphemes separately gives exactly the count of the whole. Pieces that are ASCII
 * without CR count by length, so whole rows before the offset are skipped without
 * segmentation; other pieces are segmented lazily, only as far as needed.
 */
class GraphemePage {
  /** Graphemes of the rendering consumed so far. */
  private pos = 0;
  private readonly parts: string[] = [];
  /** Graphemes collected into the page. */
  taken = 0;
  /** Whether at least one grapheme follows the page. */
  more = false;
  private readonly end: number;

  constructor(
    private readonly offset: number,
    limit: number,
  ) {
    this.end = offset + limit;
  }

  get text(): string {
    return this.parts.join('');
  }

  /** Counts `n` graphemes as consumed without their text; only for whole rows before the page. */
  skip(n: number): void {
    if (this.pos + n > this.offset) throw new Error('skip would pass the page start');
    this.pos += n;
  }

  /** Feeds the next piece; true once the page and its lookahead are settled. */
  feed(piece: string): boolean {
    if (piece.length === 0) return false;
    if (this.pos >= this.end) {
      this.more = true;
      return true;
    }
    if (ONE_GRAPHEME_PER_CHAR.test(piece)) {
      const n = piece.length;
      if (this.pos + n <= this.offset) {
        this.pos += n;
        return false;
      }
      const from = Math.max(0, this.offset - this.pos);
      const to = Math.min(n, this.end - this.pos);
      this.parts.push(piece.slice(from, to));
      this.taken += to - from;
      if (to < n) {
        this.more = true;
        return true;
      }
      this.pos += n;
      return false;
    }
    // String index where the page starts inside this piece; 0 when it started in an earlier one.
    let from = this.pos > this.offset ? 0 : -1;
    for (const { index } of segmenter.segment(piece)) {
      if (this.pos === this.offset) from = index;
      if (this.pos === this.end) {
        if (from >= 0) this.parts.push(piece.slice(from, index));
        this.more = true;
        return true;
      }
      if (this.pos >= this.offset) this.taken++;
      this.pos++;
    }
    if (from >= 0) this.parts.push(piece.slice(from));
    return false;
  }
}

/** Rows sized per query while skipping. */
const SKIP_BATCH_ROWS = 4096;

/**
 * Deep offsets without a pass over every row before them: a sparse prefix sum per session.
 * Seqs are cut into blocks of BLOCK_SEQS consecutive values (global seqs, so a block holds
 * only the session's rows among them); for each block with rows of the session, the index keeps
 * its last seq and the rendered size (stored count + digits of the seq + 2 for the separator)
 * of all the session's rows through it. It is built and extended by SQL aggregates over the
 * session index (new rows only), BLOCKS_PER_QUERY blocks of seqs per query, and lives in
 * memory: settling and image elision are the only things that move or change stored rows, and
 * they bump the session's rewrite counter, which the index is keyed on; appends only add rows
 * after the session's last one, so a sum through a seq it has never changes. The index stops
 * before the first block with a row that has no stored count (rows older than migration 5),
 * so those are still counted from their text.
 */
const BLOCK_SEQS = 1024;
/** Blocks of seqs summed per query while building, with a yield between queries (a few ms each). */
const BLOCKS_PER_QUERY = 64;
/** Sessions whose block index is kept in memory (least recently read dropped first). */
const BLOCK_INDEX_SESSIONS = 256;
/** An index is saved (migration 19) when first built, then each time it grew by this many entries. */
const SAVE_AFTER_ENTRIES = 64;

interface BlockIndex {
  /** Identity of the session (a deleted session's sid can be reused) and its rewrite count. */
  name: string;
  createdAt: number;
  rewrites: number;
  /** Last seq of each block, increasing. */
  ends: number[];
  /** Rendered size of the session's rows through ends[i]. */
  sums: number[];
  /**
   * The session's rows with a seq up to this one are summed in; blocks of seqs without rows of
   * the session leave no entry.
   */
  through: number;
  /** Set once a block had a row without a stored count: the index never grows past it. */
  closed: boolean;
  /** Entries as last saved or loaded. */
  saved: number;
}

function packNumbers(xs: readonly number[]): Buffer {
  return Buffer.from(Float64Array.from(xs).buffer);
}

function unpackNumbers(b: Buffer): number[] {
  const view = new Float64Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
  return Array.from(view);
}

/** The saved index of a session, when it still describes the session's rows. */
function loadBlockIndex(st: ReturnType<typeof stmts>, s: { sid: number; name: string; created_at: number }, rewrites: number): BlockIndex | undefined {
  const r = st.loadBlocks.get(s.sid);
  if (r === undefined || r.created_at !== s.created_at || r.rewrites !== rewrites || r.ends.length !== r.sums.length || r.ends.length % 8 !== 0) return undefined;
  const ends = unpackNumbers(r.ends);
  return { name: s.name, createdAt: s.created_at, rewrites, ends, sums: unpackNumbers(r.sums), through: r.through, closed: r.closed === 1, saved: ends.length };
}

const blockIndexes = perDb(() => new Map<number, BlockIndex>());

/**
 * The session's block index, brought up to date with rows appended since it was last used; a
 * few thousand rows per query, yielding between them, so building it for a long session does
 * not stall the loop.
 */
async function blockIndex(
  db: Db,
  st: ReturnType<typeof stmts>,
  s: { sid: number; name: string; created_at: number },
  slice: () => Promise<void>,
): Promise<BlockIndex> {
  const all = blockIndexes(db);
  const rewrites = sessionRewrites(db, s.sid);
  let ix = all.get(s.sid);
  if (ix === undefined || ix.name !== s.name || ix.createdAt !== s.created_at || ix.rewrites !== rewrites) {
    ix = loadBlockIndex(st, s, rewrites) ?? { name: s.name, createdAt: s.created_at, rewrites, ends: [], sums: [], through: 0, closed: false, saved: 0 };
  }
  all.delete(s.sid);
  all.set(s.sid, ix);
  if (all.size > BLOCK_INDEX_SESSIONS) all.delete(all.keys().next().value!);
  // A sum through a seq the session already has is final: appends only add later seqs.
  const lastSeq = st.lastSeq.get(s.sid) ?? 0;
  for (;;) {
    const from = ix.through;
    if (ix.closed || from >= lastSeq) {
      const grown = ix.ends.length - ix.saved;
      if (grown > 0 && (ix.saved === 0 || grown >= SAVE_AFTER_ENTRIES)) saveBlockIndex(db, st, s.sid, ix);
      return ix;
    }
    const to = Math.min(lastSeq, (Math.floor(from / BLOCK_SEQS) + BLOCKS_PER_QUERY) * BLOCK_SEQS);
    let sum = ix.sums[ix.sums.length - 1] ?? 0;
    for (const b of st.blocks.all(s.sid, from, to)) {
      if (b.counted < b.n || b.size === null) {
        ix.closed = true;
        return ix;
      }
      sum += b.size;
      ix.ends.push(b.last);
      ix.sums.push(sum);
    }
    ix.through = to;
    // Another task may have used the index meanwhile: it only ever grows, and stays valid.
    await slice();
  }
}

/**
 * Saves the index for the next start. A cache, so it commits without an fsync: a power loss
 * costs a rebuild, and a row that no longer matches the session is ignored (loadBlockIndex).
 */
function saveBlockIndex(db: Db, st: ReturnType<typeof stmts>, sid: number, ix: BlockIndex): void {
  withoutFsync(db, () => st.saveBlocks.run(sid, ix.createdAt, ix.rewrites, ix.through, ix.closed ? 1 : 0, packNumbers(ix.ends), packNumbers(ix.sums)));
  ix.saved = ix.ends.length;
}

/** Index of the last entry of `xs` (increasing) that is <= x, or -1. */
function lastAtMost(xs: readonly number[], x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid]! <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/**
 * Jumps over whole blocks before `offset`: returns the seq to continue the row-by-row skip
 * from and the size jumped. Only rows the row-by-row skip would also pass are jumped: they end
 * at or before the offset and each has a successor in the range (the jump's last row is
 * probed for one). Without blocks past `after`, or with a row lacking its count between the
 * block before `after` and `after`, nothing is jumped.
 */
function jumpBlocks(
  st: ReturnType<typeof stmts>,
  ix: BlockIndex,
  sid: number,
  after: number,
  last: number,
  offset: number,
): { from: number; skipped: number } {
  const none = { from: after, skipped: 0 };
  const { ends, sums } = ix;
  if (ends.length === 0 || ends[ends.length - 1]! <= after) return none;
  // Size of the rows up to `after`, which the rendering leaves out.
  const k0 = lastAtMost(ends, after);
  let base = k0 < 0 ? 0 : sums[k0]!;
  if (after > (k0 < 0 ? 0 : ends[k0]!)) {
    const part = st.sizeBetween.get(sid, k0 < 0 ? 0 : ends[k0]!, after);
    if (part === undefined || part.counted < part.n) return none;
    base += part.size ?? 0;
  }
  // The last block that ends at or before the offset, inside the range, with a successor.
  let k = lastAtMost(sums, base + offset);
  while (k > k0 && ends[k]! >= last) k--;
  if (k <= k0 || st.exists.get(sid, ends[k]!, last) === undefined) return none;
  return { from: ends[k]!, skipped: sums[k]! - base };
}

/**
 * Skips, from the index alone, every whole row (with its separator) that ends at or before
 * `offset`, and returns the seq to render from. Only rows known to have a successor are
 * skipped, so each one's size is its stored count, plus the digits of its seq, plus 2 for its
 * separator. A row without a stored count (written before counts were kept) stops the skip:
 * it is rendered and counted from its text like the rows after it.
 */
async function skipWholeRows(
  st: ReturnType<typeof stmts>,
  sid: number,
  after: number,
  last: number,
  pager: GraphemePage,
  offset: number,
  slice: () => Promise<void>,
): Promise<number> {
  let skipped = 0;
  let from = after;
  for (;;) {
    const rows = st.sizes.all(sid, from, last, SKIP_BATCH_ROWS);
    // Every row but the batch's last has its successor in the batch.
    for (let i = 0; i + 1 < rows.length; i++) {
      const row = rows[i]!;
      if (row.graphemes === null) break;
      const size = row.graphemes + String(row.seq).length + 2;
      if (skipped + size > offset) break;
      skipped += size;
      from = row.seq;
    }
    const stopped = rows.length < SKIP_BATCH_ROWS || from !== rows[rows.length - 2]!.seq;
    if (stopped) {
      pager.skip(skipped);
      return from;
    }
    await slice();
  }
}

/**
 * Renders a session's rows (or the inclusive seq range [from_seq, to_seq]) as
 * `header + "\n" + text` per row, rows joined by "\n\n", and returns graphemes
 * [offset, offset + limit) of it. Rows are read in pages of READ_PAGE_ROWS and the read stops
 * as soon as the page and one grapheme of lookahead are known; `next_offset` is where the next
 * page starts, null when this one reached the end (an offset past the end gives '' and null).
 * Row text is derived from the stored body (ROW_TEXT_SQL); image fits are not applied to it.
 */
export async function readTranscript(
  db: Db,
  params: Params<'transcript_read'>,
  opts: ReadOptions = {},
): Promise<Result<'transcript_read'>> {
  if (params.from_seq !== undefined && params.to_seq !== undefined && params.from_seq > params.to_seq) {
    throw new AlbedoError('invalid_range', `from_seq ${params.from_seq} is after to_seq ${params.to_seq}`, {
      from_seq: params.from_seq,
      to_seq: params.to_seq,
    });
  }
  const s = requireSession(db, params.session);
  const st = stmts(db);
  const last = params.to_seq ?? Number.MAX_SAFE_INTEGER;
  const pager = new GraphemePage(params.offset, params.limit);

  const slice = timeSlicer(opts.yieldEvery);
  const start = (params.from_seq ?? 1) - 1;
  const jump = params.offset === 0 ? { from: start, skipped: 0 } : jumpBlocks(st, await blockIndex(db, st, s, slice), s.sid, start, last, params.offset);
  pager.skip(jump.skipped);
  const after = await skipWholeRows(st, s.sid, jump.from, last, pager, params.offset - jump.skipped, slice);
  let rows = st.page.all(s.sid, after, last, READ_PAGE_ROWS);
  let i = 0;
  while (i < rows.length) {
    const row = rows[i++]!;
    // Whether another row follows decides the separator; at a page's end a one-row probe
    // answers it, and the next page is fetched only if the rendering goes on.
    const hasNext = i < rows.length || (rows.length === READ_PAGE_ROWS && st.exists.get(s.sid, row.seq, last) !== undefined);
    const piece = `${header(row, s.name)}\n${row.text}${hasNext ? SEPARATOR : ''}`;
    let done = false;
    for (const chunk of chunks(piece)) {
      if ((done = pager.feed(chunk))) break;
      await slice();
    }
    if (done) break;
    if (i === rows.length && hasNext) {
      rows = st.page.all(s.sid, row.seq, last, READ_PAGE_ROWS);
      i = 0;
    }
  }

  return {
    text: pager.text,
    offset: params.offset,
    next_offset: pager.more ? params.offset + pager.taken : null,
  };
}
