// transcript_grep as the daemon runs it (index query on the search worker thread): fills the
// trigram index (indexBatchAndMerge until 0, then merged fully; time, worst batch, disk cost), then times four patterns,
// session-scoped and cross-session, against ripgrep (rg -i -F -c; GNU grep -F -i -c where rg is
// not installed) over the same texts dumped to a file.
import { freePagesKept } from '../../daemon/idle-work.ts';
import { freePages, releaseFreePages } from '../../storage/db.ts';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { fold } from '../../storage/search/fold.ts';
import { BULK_INDEX_BATCH_ROWS, indexBatchAndMerge, mergeSearchIndexFully, searchIndexLag } from '../../storage/search/indexer.ts';
import { ROW_TEXT_SQL } from '../../storage/transcript/row-text.ts';
import { grep } from '../../storage/search/grep.ts';
import { SearchWorker } from '../../storage/search/worker.ts';
import { pageWalk, type StorageParts } from '../../storage/storage-size.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';
import { anchorCount, PATTERNS, SLOW_ANCHOR_MS } from './grep-anchor.ts';
import { benchGrepSocket, type SocketGrepCase } from './grep-socket.ts';
import { checkpoint, dumpTexts, fileSize, type Dataset } from './dataset.ts';
import { nowMs, repeat, withLoopMonitor } from './timing.ts';

export interface IndexResult {
  rows: number;
  ms: number;
  rows_per_s: number;
  batches: number;
  /** Longest single index batch with its merge step (the daemon cuts its own far smaller). */
  max_batch_ms: number;
  db_bytes_before: number;
  db_bytes_after: number;
  /** Pages of the transcript_fts shadow tables (dbstat), or null without dbstat. */
  fts_bytes: number | null;
  /** All pages of the file per dbstat, for the share. */
  dbstat_total_bytes: number | null;
  /** The first rows of the fill against a bare FTS5 trigram table given the same folded text. */
  floor: IndexFloor;
}

/**
 * What indexing cannot cost less than: the first rows' folded texts (read and folded beforehand,
 * untimed) inserted into a bare trigram FTS5 table in a file of its own, with FTS5's defaults,
 * no fsync and no other table, in transactions of the bulk build's batch size.
 */
export interface IndexFloor {
  rows: number;
  /** Our fill's time to the first batch that reached `rows` (its rows counted, so a rate is compared). */
  ours_rows_per_s: number;
  floor_rows_per_s: number;
  /** ours time over the floor's, per row. */
  ratio: number;
}

/** Rows the floor indexes: the fill's first ones (all of a smaller dataset), so the floor stays within the run's time. */
export const INDEX_FLOOR_ROWS = 100_000;

/** One search timed against GNU grep over the same text (shared with the lcm section). */
export interface VersusGnu {
  pattern_name: string;
  pattern: string;
  gnu_matches: number;
  ours_best_ms: number;
  ours_median_ms: number;
  gnu_best_ms: number;
  /** ours_best / gnu_best. */
  ratio: number;
  max_stall_ms: number;
}

export interface GrepCase extends VersusGnu {
  scope: 'session' | 'cross';
  matches: number;
  /** Cross-session only: the same search before the index was filled (scan path), one run. */
  unindexed_ms?: number;
}

/** The file once every row is indexed and the WAL checkpointed, against the text it holds. */
export interface DiskResult {
  /** The rows' text as appended, UTF-8 bytes. */
  text_bytes: number;
  file_bytes: number;
  /** Free pages inside the file (reused by later writes). */
  free_bytes: number;
  /** file_bytes / text_bytes. */
  ratio: number;
  /** Page bytes per part, as `daemon.status {storage_parts: true}` reports them. */
  parts: StorageParts;
}

export interface GrepResult {
  index: IndexResult;
  disk: DiskResult;
  dump_bytes: { all: number; main: number };
  cases: GrepCase[];
  /** The same searches over a daemon's socket (grep-socket.ts): what the targets judge. */
  socket: SocketGrepCase[];
}

/** The anchor's best of 3 runs; with `slowOnce`, of 1 when that one is slow (SLOW_ANCHOR_MS). */
function gnuGrep(pattern: string, file: string, slowOnce: boolean): { bestMs: number; count: number } {
  let best = Infinity;
  let count = -1;
  for (let i = 0; i < 3 && (i === 0 || !slowOnce || best <= SLOW_ANCHOR_MS); i++) {
    const t0 = nowMs();
    count = anchorCount(pattern, file);
    best = Math.min(best, nowMs() - t0);
  }
  return { bestMs: best, count };
}

/**
 * Times `ours` (best of >= 3 after a warm-up, with the event-loop stall) and GNU grep -F -i -c
 * over `file` (best of 3 whole-process runs, with its count of matching lines). `slowAnchorOnce`
 * for a ratio that is only shown, not judged: a slow anchor (SLOW_ANCHOR_MS) is then run once.
 */
export async function versusGnu<T>(p: { name: string; pattern: string }, file: string, ours: () => Promise<T>, opts: { slowAnchorOnce?: boolean } = {}): Promise<{ value: T; timing: VersusGnu }> {
  const run = await withLoopMonitor(() => repeat(ours, { warmup: 1, minRuns: 3, maxRuns: 10, minTotalMs: 300 }));
  const gnu = gnuGrep(p.pattern, file, opts.slowAnchorOnce === true);
  return {
    value: run.value.value,
    timing: {
      pattern_name: p.name,
      pattern: p.pattern,
      gnu_matches: gnu.count,
      ours_best_ms: run.value.min_ms,
      ours_median_ms: run.value.median_ms,
      gnu_best_ms: gnu.bestMs,
      ratio: run.value.min_ms / gnu.bestMs,
      max_stall_ms: run.maxStallMs,
    },
  };
}

function ftsBytes(ds: Dataset): { fts: number | null; total: number | null } {
  try {
    // Aggregate mode: one row per table or index with its total page bytes, in one pass.
    const rows = ds.db.prepare<[], { name: string; pgsize: number }>("SELECT name, pgsize FROM dbstat('main', 1)").all();
    let fts = 0;
    let total = 0;
    for (const r of rows) {
      total += r.pgsize;
      if (r.name.startsWith('transcript_fts')) fts += r.pgsize;
    }
    return { fts, total };
  } catch {
    return { fts: null, total: null };
  }
}

/** IndexFloor for the first `ours.rows` rows of the dataset, which our fill indexed in `ours.ms`. */
function indexFloor(ds: Dataset, ours: { rows: number; ms: number }): IndexFloor {
  const texts = ds.db.prepare<[number], string>(`SELECT ${ROW_TEXT_SQL} FROM transcript ORDER BY seq LIMIT ?`).pluck().all(ours.rows).map(fold);
  const file = path.join(ds.dir, 'fts-floor.db');
  const floor = new Database(file);
  try {
    floor.pragma('journal_mode = WAL');
    floor.pragma('synchronous = OFF');
    floor.exec("CREATE VIRTUAL TABLE f USING fts5(text, content='', tokenize='trigram case_sensitive 1')");
    const insert = floor.prepare<[number, string]>('INSERT INTO f (rowid, text) VALUES (?, ?)');
    const t0 = nowMs();
    for (let i = 0; i < texts.length; i += BULK_INDEX_BATCH_ROWS) {
      floor.transaction(() => {
        for (let j = i; j < Math.min(texts.length, i + BULK_INDEX_BATCH_ROWS); j++) insert.run(j + 1, texts[j]!);
      })();
    }
    const floorMs = nowMs() - t0;
    return { rows: ours.rows, ours_rows_per_s: ours.rows / (ours.ms / 1000), floor_rows_per_s: texts.length / (floorMs / 1000), ratio: ours.ms / ours.rows / (floorMs / texts.length) };
  } finally {
    floor.close();
    for (const f of [file, `${file}-wal`, `${file}-shm`]) fs.rmSync(f, { force: true });
  }
}

/** A search as the daemon runs it: the trigram index query on the search worker thread. */
async function ourGrep(ds: Dataset, worker: SearchWorker, pattern: string, session: string | undefined): Promise<number> {
  const r = await grep(ds.db, { pattern, offset: 0, limit: 50, ...(session === undefined ? {} : { session }) }, { hits: (ask) => worker.hits(ask) });
  return r.total;
}

export async function benchGrep(ds: Dataset, opts: { unindexed: boolean }, log: (s: string) => void): Promise<GrepResult> {
  const dump = dumpTexts(ds);
  checkpoint(ds.db);
  const worker = new SearchWorker(ds.file);
  try {
    return await measure(ds, worker, dump, opts, log);
  } finally {
    await worker.close();
  }
}

async function measure(ds: Dataset, worker: SearchWorker, dump: ReturnType<typeof dumpTexts>, opts: { unindexed: boolean }, log: (s: string) => void): Promise<GrepResult> {
  const before = fileSize(ds.file);

  // The scan path first, while nothing is indexed.
  const unindexed = new Map<string, number>();
  if (opts.unindexed) {
    for (const p of PATTERNS) {
      const t0 = nowMs();
      await ourGrep(ds, worker, p.pattern, undefined);
      unindexed.set(p.name, nowMs() - t0);
    }
  }

  let rows = 0;
  let batches = 0;
  let maxBatch = 0;
  const floorRows = Math.min(INDEX_FLOOR_ROWS, ds.totalRows);
  let firstRows: { rows: number; ms: number } | undefined;
  const t0 = nowMs();
  for (;;) {
    const b0 = nowMs();
    const n = indexBatchAndMerge(ds.db);
    maxBatch = Math.max(maxBatch, nowMs() - b0);
    if (n === 0) break;
    rows += n;
    if (firstRows === undefined && rows >= floorRows) firstRows = { rows, ms: nowMs() - t0 };
    batches++;
    if (batches % 100 === 0) log(`  indexing: ${rows}/${ds.totalRows} rows`);
  }
  mergeSearchIndexFully(ds.db);
  // The merges leave the pages of the segments they replaced free; the daemon gives them back in
  // its first long quiet (daemon/idle-work.ts), keeping a reserve.
  releaseFreePages(ds.db, Math.max(0, freePages(ds.db) - freePagesKept(ds.db)));
  const indexMs = nowMs() - t0;
  if (searchIndexLag(ds.db) !== 0) throw new Error('index did not catch up');
  checkpoint(ds.db);
  const after = fileSize(ds.file);
  const { fts, total } = ftsBytes(ds);
  const pageSize = ds.db.pragma('page_size', { simple: true }) as number;
  const disk: DiskResult = {
    text_bytes: dump.textBytes,
    file_bytes: after,
    free_bytes: (ds.db.pragma('freelist_count', { simple: true }) as number) * pageSize,
    ratio: after / dump.textBytes,
    parts: pageWalk(ds.db, BUILTIN_SET.stateTables),
  };
  log(`  disk: ${(after / 2 ** 20).toFixed(1)} MiB for ${(dump.textBytes / 2 ** 20).toFixed(1)} MiB of text (${disk.ratio.toFixed(2)}x): ${JSON.stringify(disk.parts)}`);
  const index: IndexResult = {
    rows,
    ms: indexMs,
    rows_per_s: rows / (indexMs / 1000),
    batches,
    max_batch_ms: maxBatch,
    db_bytes_before: before,
    db_bytes_after: after,
    fts_bytes: fts,
    dbstat_total_bytes: total,
    floor: indexFloor(ds, firstRows ?? { rows, ms: indexMs }),
  };
  log(
    `  indexed ${rows} rows in ${(indexMs / 1000).toFixed(1)} s (worst batch ${maxBatch.toFixed(0)} ms); its first ${index.floor.rows} at ${Math.round(index.floor.ours_rows_per_s)} rows/s, a bare FTS5 table ${
      Math.round(index.floor.floor_rows_per_s)
    } rows/s`,
  );

  const cases: GrepCase[] = [];
  for (const scope of ['session', 'cross'] as const) {
    for (const p of PATTERNS) {
      const session = scope === 'session' ? ds.main.name : undefined;
      // Shown in a table; the verdicts are the socket's (below).
      const { value, timing } = await versusGnu(p, scope === 'session' ? dump.main : dump.all, () => ourGrep(ds, worker, p.pattern, session), { slowAnchorOnce: true });
      const c: GrepCase = { ...timing, scope, matches: value };
      const u = scope === 'cross' ? unindexed.get(p.name) : undefined;
      if (u !== undefined) c.unindexed_ms = u;
      cases.push(c);
      log(`  grep ${scope} ${p.name}: ours ${c.ours_best_ms.toFixed(1)} ms vs GNU ${c.gnu_best_ms.toFixed(1)} ms (${c.ratio.toFixed(2)}x), ${c.matches}/${c.gnu_matches} matches, stall ${c.max_stall_ms.toFixed(1)} ms`);
    }
  }
  checkpoint(ds.db);
  const socket = await benchGrepSocket(ds, dump, log);
  return { index, disk, dump_bytes: { all: dump.allBytes, main: dump.mainBytes }, cases, socket };
}
