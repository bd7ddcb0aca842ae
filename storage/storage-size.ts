// How the database's bytes divide among what it stores: the transcript rows, their indexes, the
// search index, payloads, the strategies' state and the engine's bookkeeping, measured by
// SQLite's dbstat table (every b-tree's pages). A walk reads every page of the file, so the
// daemon runs it on the search worker's connection and keeps the result for a while. The file,
// WAL and free-page totals are cheap and always current.
import fs from 'node:fs';
import { STORAGE_PARTS, type StoragePart, type StorageSize } from '../protocol/methods.ts';
import type { Db } from './db.ts';

/**
 * Which part each core b-tree belongs to, by the table it stores or indexes. The extensions'
 * own tables are not listed here: each extension module names its tables (`tables`,
 * strategies/extensions/module.ts) and the caller passes them in as `stateTables`.
 */
const PART_OF_TABLE: Record<string, StoragePart> = {
  transcript: 'rows',
  tool_calls: 'rows',
  fork_rows: 'rows',
  sessions: 'rows',
  payloads: 'payloads',
  payload_refs: 'payloads',
  prepared_requests: 'engine',
  compactions: 'engine',
  session_prompts: 'engine',
  session_extensions: 'engine',
  token_ratios: 'engine',
  proxy_sessions: 'engine',
  proxy_messages: 'engine',
  extension_schema: 'engine',
};

/** How long a page walk's parts are reused. */
export const PARTS_MAX_AGE_MS = 10 * 60_000;

export type StorageParts = Record<StoragePart, number>;

const walks = new WeakMap<Db, { at: number; parts: Promise<StorageParts> }>();

/**
 * The part a b-tree of `table` (an index when `isIndex`) belongs to. A state table's own
 * shadow tables (an FTS5 table's `_data`, `_idx`, ...) count with it.
 */
function partOf(table: string, isIndex: boolean, stateTables: readonly string[]): StoragePart {
  if (table.startsWith('transcript_fts') || table === 'search_rows' || table === 'search_index_state') return 'search_index';
  if (stateTables.some((t) => table === t || table.startsWith(`${t}_`))) return 'strategy_state';
  const part = PART_OF_TABLE[table] ?? 'other';
  return part === 'rows' && isIndex ? 'row_indexes' : part;
}

/** Walks every b-tree of the file (on whichever connection is given) and sums its pages per part. */
export function pageWalk(db: Db, stateTables: readonly string[]): StorageParts {
  const parts = Object.fromEntries(STORAGE_PARTS.map((p) => [p, 0])) as StorageParts;
  const owners = new Map(
    (db.prepare("SELECT name, tbl_name, type FROM sqlite_schema WHERE type IN ('table', 'index')").all() as Array<{ name: string; tbl_name: string; type: string }>).map(
      (r) => [r.name, r],
    ),
  );
  // One row per b-tree (aggregate): its pages' bytes, including overflow pages.
  const trees = db.prepare("SELECT name, pgsize FROM dbstat WHERE aggregate = TRUE AND schema = 'main'").all() as Array<{ name: string; pgsize: number }>;
  for (const t of trees) {
    const owner = owners.get(t.name);
    const part = owner === undefined ? 'other' : partOf(owner.tbl_name, owner.type === 'index', stateTables);
    parts[part] += t.pgsize;
  }
  parts.other += pointerMapBytes(db);
  return parts;
}

/**
 * SQLite's pointer-map pages, in no b-tree (so not in dbstat): a file in an auto-vacuum mode
 * (every file created since stop 20, see openDb) has one after page 1 and then one ahead of
 * every usable-size / 5 pages.
 */
function pointerMapBytes(db: Db): number {
  if (db.pragma('auto_vacuum', { simple: true }) === 0) return 0;
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const pages = db.pragma('page_count', { simple: true }) as number;
  const group = Math.floor(pageSize / 5) + 1;
  return pages < 2 ? 0 : Math.ceil((pages - 1) / group) * pageSize;
}

function fileSize(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
}

/** Parts as numbers in STORAGE_PARTS order, to cross a thread boundary, and back. */
export function packParts(parts: StorageParts): Float64Array {
  return Float64Array.from(STORAGE_PARTS.map((p) => parts[p]));
}

export function unpackParts(packed: Float64Array): StorageParts {
  return Object.fromEntries(STORAGE_PARTS.map((p, i) => [p, packed[i] ?? 0])) as StorageParts;
}

/**
 * The database's size and its parts. With `walk`, the parts come from a walk at most
 * PARTS_MAX_AGE_MS old, done by `walk` when the last one is older (concurrent callers share it);
 * without, from the last walk if there was one. The totals are read now.
 */
export async function storageSize(db: Db, file: string, opts: { now?: number; walk?: () => Promise<StorageParts> } = {}): Promise<StorageSize> {
  const now = opts.now ?? Date.now();
  let last = walks.get(db);
  if (opts.walk !== undefined && (last === undefined || now - last.at > PARTS_MAX_AGE_MS)) {
    const current = { at: now, parts: opts.walk() };
    // A failed walk is not kept: the next call tries again.
    current.parts.catch(() => {
      if (walks.get(db) === current) walks.delete(db);
    });
    walks.set(db, current);
    last = current;
  }
  const parts = last === undefined ? null : await last.parts;
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const free = db.pragma('freelist_count', { simple: true }) as number;
  return { file_bytes: fileSize(file), wal_bytes: fileSize(`${file}-wal`), free_bytes: free * pageSize, parts, measured_at: last?.at ?? null };
}
