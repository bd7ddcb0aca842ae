// Opens the daemon's SQLite file with its pragmas and brings the schema up to date.
// One writer connection per process; read-only connections (for worker scans) use openReadOnly.
import Database from 'better-sqlite3';
import fs from 'node:fs';
import { AlbedoError } from '../protocol/errors.ts';
import { distinctChars, fold, lastTwoChars } from './search/fold.ts';
import { migrations, type Migration } from './migrations/index.ts';
import { unpackBody } from './transcript/row-body.ts';
import { storedRowText } from './transcript/row-text.ts';

export type Db = Database.Database;

export interface OpenOptions {
  /** SQLite `synchronous` level; FULL survives power loss, NORMAL only process crashes. */
  synchronous?: 'FULL' | 'NORMAL';
  /** How long a statement waits on a lock held by another connection, in milliseconds. */
  busyTimeoutMs?: number;
  /** Override the migration list (tests of the runner). */
  migrations?: readonly Migration[];
  /** Told before each migration runs, with the newest transcript seq then (how many rows were ever written; some migrations rewrite them). */
  onMigration?: (m: { version: number; name: string; newestSeq: number }) => void;
}

/** Pragmas are per connection, so they are set on every open, not once per file. */
function applyPragmas(db: Db, opts: OpenOptions): void {
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${opts.synchronous ?? 'FULL'}`);
  db.pragma('foreign_keys = ON');
  db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
  registerFunctions(db);
}

/**
 * The SQL functions queries, triggers and migrations call; per connection like pragmas, so every
 * connection (the writer and the read-only ones) registers them.
 */
function registerFunctions(db: Db): void {
  // Row text is derived from the body on every read (storage/transcript/row-text.ts, migration 16). A
  // search-index trigger asks for it three times for the same row, so the last one is kept.
  let lastRow: { seq: number; body: string; legacy: string | null; text: string } | undefined;
  db.function('albedo_row_text', { deterministic: true }, (seq: unknown, body: unknown, legacy: unknown) => {
    if (typeof seq !== 'number' && typeof seq !== 'bigint') throw new TypeError('albedo_row_text: seq must be an integer');
    if (typeof body !== 'string') throw new TypeError('albedo_row_text: body must be text');
    if (legacy !== null && typeof legacy !== 'string') throw new TypeError('albedo_row_text: legacy_text must be text or NULL');
    if (lastRow?.seq !== Number(seq) || lastRow.body !== body || lastRow.legacy !== legacy) {
      lastRow = { seq: Number(seq), body, legacy, text: storedRowText(Number(seq), body, legacy) };
    }
    return lastRow.text;
  });
  // A packed body's JSON (storage/transcript/row-body.ts, bodySql). The search triggers inflate the same
  // row three times, so the last one is kept.
  let lastPacked: { seq: number; packed: Buffer; json: string } | undefined;
  db.function('albedo_unpack', { deterministic: true }, (seq: unknown, packed: unknown) => {
    if (typeof seq !== 'number' && typeof seq !== 'bigint') throw new TypeError('albedo_unpack: seq must be an integer');
    if (!Buffer.isBuffer(packed)) throw new TypeError('albedo_unpack: packed must be a blob');
    if (lastPacked?.seq !== Number(seq) || !lastPacked.packed.equals(packed)) {
      lastPacked = { seq: Number(seq), packed, json: unpackBody(Number(seq), packed) };
    }
    return lastPacked.json;
  });
  // Migration 16 only: the derivation, or NULL where the body does not decode (such a row keeps
  // its stored text rather than failing the migration).
  db.function('albedo_derived_text', { deterministic: true }, (seq: unknown, body: unknown) => {
    if (typeof body !== 'string') return null;
    try {
      return storedRowText(Number(seq), body, null);
    } catch {
      return null;
    }
  });
  // The search index stores folded text and what short patterns need of it; its triggers and
  // the indexer call these (migrations 3, 15 and 16), the three on the same text in a row, so
  // the last fold is kept.
  let lastText: string | undefined;
  let lastFolded = '';
  const folded = (text: string): string => {
    if (text !== lastText) {
      lastFolded = fold(text);
      lastText = text;
    }
    return lastFolded;
  };
  db.function('albedo_fold', { deterministic: true }, (text: unknown) => (typeof text === 'string' ? folded(text) : text));
  db.function('albedo_fold_tail', { deterministic: true }, (text: unknown) => (typeof text === 'string' ? lastTwoChars(folded(text)) : text));
  db.function('albedo_fold_chars', { deterministic: true }, (text: unknown) => (typeof text === 'string' ? distinctChars(folded(text)) : text));
}

export function openDb(path: string, opts: OpenOptions = {}): Db {
  const db = new Database(path);
  try {
    // A new file can give its free pages back to the file system (releaseFreePages). The mode
    // is fixed when the first table is created; an older file keeps its own (only a VACUUM,
    // a full rewrite, could change it).
    if (db.pragma('page_count', { simple: true }) === 0) db.pragma('auto_vacuum = INCREMENTAL');
    applyPragmas(db, opts);
    migrate(db, opts.migrations ?? migrations, opts.onMigration);
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/** A read-only connection to the same file, for long scans off the writer. */
export function openReadOnly(path: string, opts: OpenOptions = {}): Db {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
  registerFunctions(db);
  return db;
}

/** Runs every migration newer than the file's version, each in its own transaction. */
export function migrate(db: Db, list: readonly Migration[], onMigration?: OpenOptions['onMigration']): number {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT',
  );
  const row = db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number | null };
  const current = row.v ?? 0;
  const newest = list.reduce((m, x) => Math.max(m, x.version), 0);
  if (current > newest) {
    throw new AlbedoError(
      'invalid_config',
      `database schema version ${current} is newer than this build understands (${newest})`,
    );
  }
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  for (const m of [...list].sort((a, b) => a.version - b.version)) {
    if (m.version <= current) continue;
    // A fresh file has no transcript yet; its first migration creates it.
    if (onMigration !== undefined) onMigration({ version: m.version, name: m.name, newestSeq: current === 0 ? 0 : (db.prepare('SELECT max(seq) FROM transcript').pluck().get() as number | null) ?? 0 });
    db.transaction(() => {
      db.exec(m.sql);
      record.run(m.version, m.name, Date.now());
    })();
  }
  return newest;
}

/**
 * Brings one extension's own tables up to date: `scripts[i]` is its version i + 1, run once, in
 * order, each in its own transaction with the version it reaches (table extension_schema). A
 * file an extension's newer build wrote is refused, as `migrate` refuses a newer product
 * schema. Returns the version the file is at.
 */
export function migrateExtension(db: Db, name: string, scripts: readonly string[]): number {
  const current = (db.prepare('SELECT version FROM extension_schema WHERE name = ?').pluck().get(name) as number | undefined) ?? 0;
  if (current > scripts.length) {
    throw new AlbedoError('invalid_config', `the tables of extension "${name}" are at version ${current}, newer than its module's ${scripts.length}`, { extension: name });
  }
  const record = db.prepare('INSERT INTO extension_schema (name, version, applied_at) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at');
  for (let v = current + 1; v <= scripts.length; v++) {
    db.transaction(() => {
      db.exec(scripts[v - 1]!);
      record.run(name, v, Date.now());
    })();
  }
  return scripts.length;
}

/**
 * Runs `fn` (one or more transactions) with commits that do not wait for an fsync, then puts
 * the connection's own level back. In WAL mode such a commit still survives a crash of the
 * process, and becomes durable with the next fsync of the log: the next commit at FULL (any
 * append) or a checkpoint. Power loss before that can drop it, never corrupt it. Only for data
 * that can be rebuilt or is bookkeeping (the search index, prepared-request records), for
 * rewrites that leave a row's content as it was (packing its body), or for rows no reader looks
 * at until a later commit at FULL names them (snapcompact's archive parts); never for new or
 * changed transcript rows.
 */
export function withoutFsync<T>(db: Db, fn: () => T): T {
  // Through db.pragma, not a cached statement: SQLite applies `synchronous = …` while it
  // compiles the statement, so a prepared one would change nothing when run again.
  // Inside a transaction (readTogether's, say) the commit is the enclosing one's, and SQLite
  // refuses to change the level there.
  if (db.inTransaction) return fn();
  const level = db.pragma('synchronous', { simple: true }) as number;
  // 0 OFF, 1 NORMAL: already no fsync per commit.
  if (level <= 1) return fn();
  db.pragma('synchronous = NORMAL');
  try {
    return fn();
  } finally {
    db.pragma(`synchronous = ${level}`);
  }
}

/** Commits made by `commitOwed` on a connection, and how many of them a finished flush covers. */
const owedCommits = perDb(() => ({ committed: 0, synced: 0, flushes: 0, flush: undefined as Promise<void> | undefined }));

/**
 * A write transaction whose fsync is owed rather than waited for: committed at NORMAL (as
 * `withoutFsync`), so the commit does not wait for the disk on the event loop, and counted so
 * that `durable` can make it durable off the loop. A commit at FULL waits for everything the
 * file system has to write first: with a build writing files beside it, one fsync of the log in
 * a compaction's commit measured 135-155 ms, and every session waited (docs/performance.md,
 * stop 52). Only on a path that awaits `durable(db)` before anything it wrote is shown outside
 * the daemon (a reply), which makes the data as durable as a commit at FULL before anyone
 * relies on it. A crash of the process in between loses nothing (WAL); a power cut can drop the
 * commit whole, never part of it, and nobody was told of it yet.
 */
export function commitOwed<T>(db: Db, fn: () => T): T {
  const value = withoutFsync(db, () => db.transaction(fn)());
  owedCommits(db).committed += 1;
  return value;
}

/**
 * Resolves once every commit `commitOwed` made on this connection so far is on disk: the log is
 * written out from the thread pool (`flushLogOffLoop`), one flush shared by every caller waiting
 * meanwhile, and nothing at all when nothing is owed. Rejects when the flush fails: what was
 * committed is then not known to be durable, and the caller must not say it is.
 */
export async function durable(db: Db): Promise<void> {
  const s = owedCommits(db);
  const target = s.committed;
  while (s.synced < target) {
    if (s.flush === undefined) {
      const covers = s.committed;
      s.flushes += 1;
      s.flush = flushLogOffLoop(db)
        .then(() => {
          s.synced = Math.max(s.synced, covers);
        })
        .finally(() => {
          s.flush = undefined;
        });
    }
    await s.flush;
  }
}

/**
 * Whether a flush `durable` started is still under way: a request is then waiting for its bytes
 * to reach the disk, a wait of a millisecond or so that background work should not take over.
 */
export function owedFlushRunning(db: Db): boolean {
  return owedCommits(db).flush !== undefined;
}

/** For tests: commits `commitOwed` made on this connection that no finished flush covers yet, and the flushes started. */
export function owedCommitState(db: Db): { pending: number; flushes: number } {
  const s = owedCommits(db);
  return { pending: s.committed - s.synced, flushes: s.flushes };
}

/**
 * Writes the log's pages out to disk from libuv's thread pool, off the event loop: what commits
 * made without an fsync (withoutFsync, commitOwed) left in the OS's cache is otherwise written by
 * the next commit that does fsync, which then waits for those bytes as well as its own. The log
 * is opened and closed on the event loop, which costs microseconds (neither waits for the disk),
 * and only the datasync goes to the pool: one trip where `fs.promises` (open, datasync, close)
 * took three, and every append waits for one (`durable`). Resolves when done; a file without a log (not WAL, in memory) resolves at
 * once. Errors reject: the caller decides whether to stop trying.
 */
export function flushLogOffLoop(db: Db): Promise<void> {
  if (db.memory) return Promise.resolve();
  return syncFileOffLoop(`${db.name}-wal`);
}

/**
 * `fdatasync` of one file from the thread pool, opened and closed on the loop (see
 * flushLogOffLoop). A file that does not exist resolves at once: there is nothing to write out.
 */
export function syncFileOffLoop(path: string): Promise<void> {
  let fd: number;
  try {
    fd = fs.openSync(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return Promise.resolve();
    return Promise.reject(err);
  }
  return new Promise<void>((resolve, reject) => {
    fs.fdatasync(fd, (err) => {
      fs.closeSync(fd);
      if (err === null) resolve();
      else reject(err);
    });
  });
}

/**
 * Gives up to `maxPages` of the file's free pages (left by merged index segments, deleted
 * sessions, elided images) back to the file system: pages from the end of the file move into
 * free slots and the file is cut shorter (at the next checkpoint, in WAL mode). Without a limit,
 * all of them. Returns how many were released; 0 for a file whose auto_vacuum mode is not
 * INCREMENTAL (files created before this, see openDb). Commits without an fsync: a vacuum lost
 * to a power cut only leaves the pages free.
 */
export function releaseFreePages(db: Db, maxPages?: number): number {
  if (db.pragma('auto_vacuum', { simple: true }) !== 2) return 0;
  const before = freePages(db);
  if (before === 0) return 0;
  const n = maxPages === undefined ? 0 : Math.max(1, Math.floor(maxPages));
  withoutFsync(db, () => db.pragma(`incremental_vacuum(${n})`));
  return before - freePages(db);
}

/** Pages of the file no table or index uses. */
export function freePages(db: Db): number {
  return db.pragma('freelist_count', { simple: true }) as number;
}

/**
 * Per-connection memo for prepared statements: `const stmts = perDb((db) => ({ ... }))` prepares
 * them on first use and reuses them after, as better-sqlite3 intends.
 */
export function perDb<T>(make: (db: Db) => T): (db: Db) => T {
  const cache = new WeakMap<Db, T>();
  return (db) => {
    let s = cache.get(db);
    if (s === undefined) cache.set(db, s = make(db));
    return s;
  };
}

const bounds = perDb((db: Db) => ({ begin: db.prepare('BEGIN'), commit: db.prepare('COMMIT'), rollback: db.prepare('ROLLBACK') }));

/**
 * Runs a synchronous stretch of many small reads (a prepare looks up its session, cut, notes
 * and logs dozens of times) inside one transaction, when none is open: each statement on its
 * own takes and drops its own read snapshot, which makes it several times dearer than inside a
 * transaction, and the reads see one state of the file besides. A write inside works as it
 * would on its own, committed at the end (BEGIN is deferred; the daemon's connection is the
 * file's only writer, under the home lock, so the upgrade never finds its snapshot stale).
 * Throwing rolls back. Not `db.transaction(fn)()`: building that wrapper on every call measured
 * a cost of its own on every stretch, and a prepare runs several.
 */
export function readTogether<T>(db: Db, fn: () => T): T {
  if (db.inTransaction) return fn();
  const st = bounds(db);
  st.begin.run();
  let value: T;
  try {
    value = fn();
  } catch (err) {
    if (db.inTransaction) st.rollback.run();
    throw err;
  }
  st.commit.run();
  return value;
}
