// The engine's bookkeeping per session: prepared requests with their observations and the
// provider's usage, the compaction log, the failure latch counter, /extensions choices and the
// last prompt, and what of it a fork inherits. Rolling's state and the transcript live elsewhere.
import { Observation, CompactionRecord, StoredToolSpec, type ToolSpec } from '../protocol/prepared.ts';
import { z } from 'zod';
import { AlbedoError } from '../protocol/errors.ts';
import { createHash } from 'node:crypto';
import { perDb, withoutFsync, type Db } from './db.ts';

const StoredToolSpecs = z.array(StoredToolSpec);

/** Prepared requests kept per session; older ones are pruned as new ones arrive. */
export const PREPARED_KEEP = 16;

function prepare(db: Db) {
  return {
    insertPrepared: db.prepare(
      'INSERT INTO prepared_requests (id, sid, head, model, created_at, estimated_input_tokens, observation) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    notePrepared: db.prepare('UPDATE sessions SET prepared_head = ?, last_model = coalesce(?, last_model) WHERE sid = ?'),
    known: db.prepare<
      [number],
      { known_instructions: string | null; known_context: string | null; known_tools: string | null; known_told: string | null; known_told_instructions: string | null; prepared_head: number | null }
    >('SELECT known_instructions, known_context, known_tools, known_told, known_told_instructions, prepared_head FROM sessions WHERE sid = ?'),
    saveTold: db.prepare<[string, string | null, number]>('UPDATE sessions SET known_told = ?, known_told_instructions = ? WHERE sid = ?'),
    // A new system prompt (a compaction rebuilt it, or the client's instructions went out
    // changed) makes any earlier notice history: what was told is cleared. Instructions recorded
    // as null (before they were kept) count as unchanged.
    saveKnown: db.prepare<[{ sid: number; instructions: string; context: string; tools: string }]>(
      `UPDATE sessions SET
         known_told = CASE WHEN known_context IS @context AND coalesce(known_instructions, @instructions) IS @instructions THEN known_told ELSE NULL END,
         known_told_instructions = CASE WHEN known_context IS @context AND coalesce(known_instructions, @instructions) IS @instructions THEN known_told_instructions ELSE NULL END,
         known_instructions = @instructions, known_context = @context, known_tools = @tools
        WHERE sid = @sid AND (known_context IS NOT @context OR known_tools IS NOT @tools OR known_instructions IS NOT @instructions)`,
    ),
    // Writes the prompt only when its hash differs from the stored one.
    notePrompt: db.prepare<[number, string, string, string]>(
      `INSERT INTO session_prompts (sid, hash, instructions, tools) VALUES (?, ?, ?, ?)
       ON CONFLICT (sid) DO UPDATE SET hash = excluded.hash, instructions = excluded.instructions, tools = excluded.tools
        WHERE session_prompts.hash IS NOT excluded.hash`,
    ),
    promptHash: db.prepare<[number], string>('SELECT hash FROM session_prompts WHERE sid = ?').pluck(),
    prunePrepared: db.prepare(
      `DELETE FROM prepared_requests WHERE sid = ? AND id NOT IN
         (SELECT id FROM prepared_requests WHERE sid = ? ORDER BY created_at DESC, rowid DESC LIMIT ?)`,
    ),
    latestPrepared: db.prepare(
      'SELECT id, head, model, observation, provider_input_tokens, cached_tokens FROM prepared_requests WHERE sid = ? ORDER BY created_at DESC, rowid DESC LIMIT 1',
    ),
    reportUsage: db.prepare('UPDATE prepared_requests SET provider_input_tokens = ?, cached_tokens = ? WHERE id = ? AND sid = ?'),
    preparedSize: db.prepare<[string], { estimate: number; model: string | null }>('SELECT estimated_input_tokens AS estimate, model FROM prepared_requests WHERE id = ?'),
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
    choices: db.prepare('SELECT name, enabled, chosen_at AS at FROM session_extensions WHERE sid = ? ORDER BY chosen_at'),
    deleteChoices: db.prepare('DELETE FROM session_extensions WHERE sid = ?'),
    insertChoice: db.prepare('INSERT INTO session_extensions (sid, name, enabled, chosen_at) VALUES (?, ?, ?, ?)'),
    copyChoices: db.prepare('INSERT INTO session_extensions (sid, name, enabled, chosen_at) SELECT ?, name, enabled, chosen_at FROM session_extensions WHERE sid = ?'),
    lastModel: db.prepare('SELECT last_model FROM sessions WHERE sid = ?'),
    lastPrompt: db.prepare(
      `SELECT s.last_model, p.instructions AS last_instructions, p.tools AS last_tools
         FROM sessions s LEFT JOIN session_prompts p ON p.sid = s.sid WHERE s.sid = ?`,
    ),
    copyModel: db.prepare('UPDATE sessions SET last_model = (SELECT last_model FROM sessions WHERE sid = ?) WHERE sid = ?'),
    copyPrompt: db.prepare(
      `INSERT INTO session_prompts (sid, hash, instructions, tools)
       SELECT ?, hash, instructions, tools FROM session_prompts WHERE sid = ?
       ON CONFLICT (sid) DO UPDATE SET hash = excluded.hash, instructions = excluded.instructions, tools = excluded.tools`,
    ),
  };
}

const stmts = perDb(prepare);

/** The stored prompt's identity: a hash of the instructions and of the tools' JSON. */
function promptHash(instructions: string, toolsJson: string): string {
  return createHash('sha256').update(instructions).update('\0').update(toolsJson).digest('base64url');
}

/** The two parts of a system prompt a `capabilities changed` notice can tell a model of. */
export interface PromptParts {
  /** The client's instructions. */
  instructions: string;
  /** The text the enabled extensions add. */
  context: string;
}

/** What a session's model was last sent of its system prompt and tools (see `knownPrompt`). */
export interface KnownPrompt {
  /** The instructions that system prompt carried; null when recorded before they were kept. */
  instructions: string | null;
  /** The extension context it carried. */
  context: string;
  /** A digest of every tool the request carried, the client's and the extensions'. */
  toolsHash: string;
  /** What a notice since told the model, per part; null where no notice stands. */
  told: { instructions: string | null; context: string | null };
  /** The head the session's last prepared request was built from (seq). */
  preparedHead: number | null;
}

/**
 * What a session's model was last sent: the instructions and extension context in its system
 * prompt, a digest of the tools, what a notice told it since, and the head that request was
 * built from. Undefined before the first prepare.
 */
export function knownPrompt(db: Db, sid: number): KnownPrompt | undefined {
  const r = stmts(db).known.get(sid);
  if (r === undefined || r.known_context === null || r.known_tools === null) return undefined;
  return {
    instructions: r.known_instructions,
    context: r.known_context,
    toolsHash: r.known_tools,
    told: { instructions: r.known_told_instructions, context: r.known_told },
    preparedHead: r.prepared_head,
  };
}

/**
 * Records what a `capabilities changed` notice told the session's model: the extension context,
 * and the instructions when the notice carried them (null: the model goes by its system prompt's).
 */
export function saveKnownTold(db: Db, sid: number, told: { context: string; instructions: string | null }): void {
  stmts(db).saveTold.run(told.context, told.instructions, sid);
}

/** Records what a prepare sent (see `knownPrompt`); writes only when it changed. */
export function saveKnownPrompt(db: Db, sid: number, system: PromptParts, toolsHash: string): void {
  stmts(db).saveKnown.run({ sid, instructions: system.instructions, context: system.context, tools: toolsHash });
}

/**
 * Records a prepared request: its observation, the session's prepared head and model, and the
 * prompt as sent (only when its hash differs from the stored one: an agent sends the same
 * ~10 KB of instructions and tools on every turn).
 *
 * A prepare whose prompt is unchanged commits without an fsync (storage/db.ts withoutFsync):
 * what it writes is bookkeeping (the observation a usage report refers to, the last prepared
 * head), which the next durable commit makes durable too; a power loss before it costs at
 * most a usage report of `unknown_prepared`. A changed prompt commits at the connection's
 * level, since /compact sizes the pinned prompt from it.
 */
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
  const st = stmts(db);
  const prompt = p.prompt === undefined ? undefined : { instructions: p.prompt.instructions, tools: JSON.stringify(p.prompt.tools) };
  const hash = prompt === undefined ? undefined : promptHash(prompt.instructions, prompt.tools);
  const write = db.transaction(() => {
    st.insertPrepared.run(p.id, p.sid, p.head, p.model, now, p.estimate, JSON.stringify(p.observation));
    st.notePrepared.run(p.head, p.model, p.sid);
    if (prompt !== undefined && hash !== undefined) st.notePrompt.run(p.sid, hash, prompt.instructions, prompt.tools);
    st.prunePrepared.run(p.sid, p.sid, PREPARED_KEEP);
  });
  if (hash !== undefined && st.promptHash.get(p.sid) !== hash) write();
  else withoutFsync(db, write);
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
  const r = stmts(db).latestPrepared.get(sid) as RawPrepared | undefined;
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
  const info = stmts(db).reportUsage.run(inputTokens, cachedTokens, preparedId, sid);
  if (info.changes === 0) {
    throw new AlbedoError('unknown_prepared', `no prepared request "${preparedId}" in this session (only the last ${PREPARED_KEEP} are kept)`, {
      prepared_id: preparedId,
    });
  }
  return stmts(db).preparedSize.get(preparedId)!;
}

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

export interface StoredChoice {
  name: string;
  enabled: boolean;
  at: number;
}

/** The session's choices in the order they were made (the order saveSessionChoices was given). */
export function sessionChoices(db: Db, sid: number): StoredChoice[] {
  const rows = stmts(db).choices.all(sid) as Array<{ name: string; enabled: number; at: number }>;
  return rows.map((r) => ({ name: r.name, enabled: r.enabled === 1, at: r.at }));
}

/**
 * Replaces the session's choices with `choices`, whose list order is the order they were made.
 * The table has no row order of its own, so that order is kept in `chosen_at`: each stored time
 * is at least one more than the one before it. Two choices in the same millisecond (or after
 * the clock stepped back) thus keep their order instead of sorting by name, at the cost of a
 * time a few milliseconds late.
 */
export function saveSessionChoices(db: Db, sid: number, choices: readonly StoredChoice[]): void {
  const st = stmts(db);
  db.transaction(() => {
    st.deleteChoices.run(sid);
    let previous = -Infinity;
    for (const c of choices) {
      const at = Math.max(c.at, previous + 1);
      st.insertChoice.run(sid, c.name, c.enabled ? 1 : 0, at);
      previous = at;
    }
  })();
}

/** The model, instructions and tools of the last prepare, for preparations without a request. */
export function lastPrompt(db: Db, sid: number): { model: string | null; instructions: string; tools: ToolSpec[] } {
  const r = stmts(db).lastPrompt.get(sid) as
    | { last_model: string | null; last_instructions: string | null; last_tools: string | null }
    | undefined;
  return {
    model: r?.last_model ?? null,
    instructions: r?.last_instructions ?? '',
    tools: r?.last_tools == null ? [] : StoredToolSpecs.parse(JSON.parse(r.last_tools)),
  };
}

/** The model of the last prepare, without its prompt (whose tools alone can be tens of kilobytes). */
export function lastModel(db: Db, sid: number): string | null {
  const r = stmts(db).lastModel.get(sid) as { last_model: string | null } | undefined;
  return r?.last_model ?? null;
}

/**
 * What a fork inherits of the engine's bookkeeping: the parent's /extensions choices (so a
 * branch keeps its strategy) and its last model, instructions and tools (so /compact and
 * /context on the branch can size the prompt before the branch's first prepare). Prepared
 * requests, the compaction log and the failure latch stay with the parent. Call it inside the
 * fork's transaction.
 */
export function inheritEngineState(db: Db, parentSid: number, childSid: number): void {
  const st = stmts(db);
  st.copyChoices.run(childSid, parentSid);
  st.copyModel.run(parentSid, childSid);
  st.copyPrompt.run(childSid, parentSid);
}
