// The engine's bookkeeping per session: prepared requests with their observations and the
// provider's usage, the compaction log, the failure latch counter, and /extensions choices.
import { Observation, CompactionRecord, ToolSpec } from '../protocol/prepared.ts';
import { z } from 'zod';
import { AlbedoError } from '../protocol/errors.ts';
import type { Db } from './db.ts';

/** Prepared requests kept per session; older ones are pruned as new ones arrive. */
export const PREPARED_KEEP = 16;

export function savePrepared(
  db: Db,
  p: {
    id: string;
    sid: number;
    head: number;
    model: string | null;
    estimate: number;
    observation: Observation;
    /** The agent's prompt as sent, kept so /compact can size the pinned part later. */
    prompt?: { instructions: string; tools: ToolSpec[] };
  },
  now = Date.now(),
): void {
  db.transaction(() => {
    db.prepare(
      'INSERT INTO prepared_requests (id, sid, head, model, created_at, estimated_input_tokens, observation) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ).run(p.id, p.sid, p.head, p.model, now, p.estimate, JSON.stringify(p.observation));
    db.prepare('UPDATE sessions SET prepared_head = ?, last_model = coalesce(?, last_model) WHERE sid = ?').run(p.head, p.model, p.sid);
    if (p.prompt !== undefined) {
      db.prepare('UPDATE sessions SET last_instructions = ?, last_tools = ? WHERE sid = ?').run(
        p.prompt.instructions,
        JSON.stringify(p.prompt.tools),
        p.sid,
      );
    }
    db.prepare(
      `DELETE FROM prepared_requests WHERE sid = ? AND id NOT IN
         (SELECT id FROM prepared_requests WHERE sid = ? ORDER BY created_at DESC, rowid DESC LIMIT ?)`,
    ).run(p.sid, p.sid, PREPARED_KEEP);
  })();
}

export interface PreparedRecord {
  id: string;
  head: number;
  model: string | null;
  observation: Observation;
  providerInputTokens: number | null;
  cachedTokens: number | null;
}

interface RawPrepared {
  id: string;
  head: number;
  model: string | null;
  observation: string;
  provider_input_tokens: number | null;
  cached_tokens: number | null;
}

function decodePrepared(r: RawPrepared): PreparedRecord {
  const observation = Observation.parse(JSON.parse(r.observation));
  return {
    id: r.id,
    head: r.head,
    model: r.model,
    observation: { ...observation, provider_input_tokens: r.provider_input_tokens, provider_cached_tokens: r.cached_tokens },
    providerInputTokens: r.provider_input_tokens,
    cachedTokens: r.cached_tokens,
  };
}

export function latestPrepared(db: Db, sid: number): PreparedRecord | undefined {
  const r = db
    .prepare(
      'SELECT id, head, model, observation, provider_input_tokens, cached_tokens FROM prepared_requests WHERE sid = ? ORDER BY created_at DESC, rowid DESC LIMIT 1',
    )
    .get(sid) as RawPrepared | undefined;
  return r === undefined ? undefined : decodePrepared(r);
}

/**
 * Stores the provider's measured tokens for a prepared request of this session. Returns what
 * was prepared (its estimate and model), so the caller can learn the token ratio from it.
 */
export function reportUsage(
  db: Db,
  sid: number,
  preparedId: string,
  inputTokens: number,
  cachedTokens: number | null,
): { estimate: number; model: string | null } {
  const info = db
    .prepare('UPDATE prepared_requests SET provider_input_tokens = ?, cached_tokens = ? WHERE id = ? AND sid = ?')
    .run(inputTokens, cachedTokens, preparedId, sid);
  if (info.changes === 0) {
    throw new AlbedoError('unknown_prepared', `no prepared request "${preparedId}" in this session (only the last ${PREPARED_KEEP} are kept)`, {
      prepared_id: preparedId,
    });
  }
  return db.prepare('SELECT estimated_input_tokens AS estimate, model FROM prepared_requests WHERE id = ?').get(preparedId) as {
    estimate: number;
    model: string | null;
  };
}

export function logCompaction(db: Db, sid: number, rec: CompactionRecord): void {
  db.prepare(
    `INSERT INTO compactions (sid, strategy, at, forced, ok, duration_ms, backend, summarizer_tokens_in, summarizer_tokens_out,
       tokens_before, tokens_after, evicted_rows, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
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
  const r = db
    .prepare(
      `SELECT strategy, at, forced, ok, duration_ms, backend, summarizer_tokens_in, summarizer_tokens_out, tokens_before,
         tokens_after, evicted_rows, error FROM compactions WHERE sid = ? ORDER BY id DESC LIMIT 1`,
    )
    .get(sid) as (Omit<CompactionRecord, 'forced' | 'ok'> & { forced: number; ok: number }) | undefined;
  // Typed columns (STRICT table), so no schema parse is needed; only the flags are converted.
  return r === undefined ? null : { ...r, forced: r.forced === 1, ok: r.ok === 1 };
}

export function autoFailures(db: Db, sid: number): number {
  const r = db.prepare('SELECT auto_failures AS n FROM sessions WHERE sid = ?').get(sid) as { n: number } | undefined;
  return r?.n ?? 0;
}

export function setAutoFailures(db: Db, sid: number, n: number): void {
  db.prepare('UPDATE sessions SET auto_failures = ? WHERE sid = ?').run(n, sid);
}

/** A configuration change gives every latched session another chance. */
export function resetAllAutoFailures(db: Db): void {
  db.prepare('UPDATE sessions SET auto_failures = 0 WHERE auto_failures <> 0').run();
}

export interface StoredChoice {
  name: string;
  enabled: boolean;
  at: number;
}

export function sessionChoices(db: Db, sid: number): StoredChoice[] {
  const rows = db
    .prepare('SELECT name, enabled, chosen_at AS at FROM session_extensions WHERE sid = ? ORDER BY chosen_at, name')
    .all(sid) as Array<{ name: string; enabled: number; at: number }>;
  return rows.map((r) => ({ name: r.name, enabled: r.enabled === 1, at: r.at }));
}

export function saveSessionChoices(db: Db, sid: number, choices: readonly StoredChoice[]): void {
  db.transaction(() => {
    db.prepare('DELETE FROM session_extensions WHERE sid = ?').run(sid);
    const ins = db.prepare('INSERT INTO session_extensions (sid, name, enabled, chosen_at) VALUES (?, ?, ?, ?)');
    for (const c of choices) ins.run(sid, c.name, c.enabled ? 1 : 0, c.at);
  })();
}

/** The model, instructions and tools of the last prepare, for preparations without a request. */
export function lastPrompt(db: Db, sid: number): { model: string | null; instructions: string; tools: ToolSpec[] } {
  const r = db.prepare('SELECT last_model, last_instructions, last_tools FROM sessions WHERE sid = ?').get(sid) as
    | { last_model: string | null; last_instructions: string | null; last_tools: string | null }
    | undefined;
  return {
    model: r?.last_model ?? null,
    instructions: r?.last_instructions ?? '',
    tools: r?.last_tools == null ? [] : z.array(ToolSpec).parse(JSON.parse(r.last_tools)),
  };
}
