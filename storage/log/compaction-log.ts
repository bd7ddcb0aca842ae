// The compaction log (one row per compaction, automatic or forced, with its outcome and cost) and
// the failure latch beside it: how many automatic compactions of a session failed in a row, so
// that the engine stops retrying one that keeps failing until the configuration changes.
import type { CompactionRecord } from '../../protocol/prepared.ts';
import { perDb, type Db } from '../db.ts';

function prepare(db: Db) {
  return {
    logCompaction: db.prepare(
      `INSERT INTO compactions (sid, strategy, at, forced, ok, duration_ms, backend, summarizer_tokens_in, summarizer_tokens_out,
         tokens_before, tokens_after, evicted_rows, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    lastCompaction: db.prepare(
      `SELECT strategy, at, forced, ok, duration_ms, backend, summarizer_tokens_in, summarizer_tokens_out, tokens_before,
         tokens_after, evicted_rows, error FROM compactions WHERE sid = ? ORDER BY id DESC LIMIT 1`,
    ),
    autoFailures: db.prepare('SELECT auto_failures AS n FROM sessions WHERE sid = ?'),
    setAutoFailures: db.prepare('UPDATE sessions SET auto_failures = ? WHERE sid = ?'),
    resetAllAutoFailures: db.prepare('UPDATE sessions SET auto_failures = 0 WHERE auto_failures <> 0'),
  };
}

const stmts = perDb(prepare);

export function logCompaction(db: Db, sid: number, rec: CompactionRecord): void {
  stmts(db).logCompaction.run(
    sid,
    rec.strategy,
    rec.at,
    rec.forced ? 1 : 0,
    rec.ok ? 1 : 0,
    rec.duration_ms,
    rec.backend,
    rec.summarizer_tokens_in,
    rec.summarizer_tokens_out,
    rec.tokens_before,
    rec.tokens_after,
    rec.evicted_rows,
    rec.error,
  );
}

export function lastCompaction(db: Db, sid: number): CompactionRecord | null {
  const r = stmts(db).lastCompaction.get(sid) as (Omit<CompactionRecord, 'forced' | 'ok'> & { forced: number; ok: number }) | undefined;
  // Typed columns (STRICT table), so no schema parse is needed; only the flags are converted.
  return r === undefined ? null : { ...r, forced: r.forced === 1, ok: r.ok === 1 };
}

export function autoFailures(db: Db, sid: number): number {
  const r = stmts(db).autoFailures.get(sid) as { n: number } | undefined;
  return r?.n ?? 0;
}

export function setAutoFailures(db: Db, sid: number, n: number): void {
  stmts(db).setAutoFailures.run(n, sid);
}

/** A configuration change gives every latched session another chance. */
export function resetAllAutoFailures(db: Db): void {
  stmts(db).resetAllAutoFailures.run();
}
