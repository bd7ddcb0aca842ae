// Prepared requests per session: each one's observation and the provider's usage for it (the
// newest PREPARED_KEEP), the session's prepared head and last model, and the prompt as the agent
// last sent it, which /compact and /context size the pinned part from before a request of theirs.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { AlbedoError } from '../../protocol/errors.ts';
import { Observation, StoredToolSpec, type ToolSpec } from '../../protocol/prepared.ts';
import { commitOwed, perDb, withoutFsync, type Db } from '../db.ts';

const StoredToolSpecs = z.array(StoredToolSpec);

/** Prepared requests kept per session; older ones are pruned as new ones arrive. */
export const PREPARED_KEEP = 16;

function prepare(db: Db) {
  return {
    insertPrepared: db.prepare(
      'INSERT INTO prepared_requests (id, sid, head, model, created_at, estimated_input_tokens, observation) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    notePrepared: db.prepare('UPDATE sessions SET prepared_head = ?, last_model = coalesce(?, last_model) WHERE sid = ?'),
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

/**
 * Records a prepared request: its observation, the session's prepared head and model, and the
 * prompt as sent (only when its hash differs from the stored one: an agent sends the same
 * ~10 KB of instructions and tools on every turn).
 *
 * A prepare whose prompt is unchanged commits without an fsync (storage/db.ts withoutFsync):
 * what it writes is bookkeeping (the observation a usage report refers to, the last prepared
 * head), which the next durable commit makes durable too; a power loss before it costs at
 * most a usage report of `unknown_prepared`. A changed prompt's commit is owed (`commitOwed`),
 * since /compact sizes the pinned prompt from it: the daemon awaits `durable` before the
 * session's next task runs.
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
  const write = (): void => {
    st.insertPrepared.run(p.id, p.sid, p.head, p.model, now, p.estimate, JSON.stringify(p.observation));
    st.notePrepared.run(p.head, p.model, p.sid);
    if (prompt !== undefined && hash !== undefined) st.notePrompt.run(p.sid, hash, prompt.instructions, prompt.tools);
    st.prunePrepared.run(p.sid, p.sid, PREPARED_KEEP);
  };
  if (hash !== undefined && st.promptHash.get(p.sid) !== hash) commitOwed(db, write);
  else withoutFsync(db, () => db.transaction(write)());
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
 * What a fork inherits of them: the parent's last model, instructions and tools, so that
 * /compact and /context on the branch can size the prompt before the branch's first prepare.
 * Its prepared requests stay with the parent. Call it inside the fork's transaction.
 */
export function inheritLastPrompt(db: Db, parentSid: number, childSid: number): void {
  const st = stmts(db);
  st.copyModel.run(parentSid, childSid);
  st.copyPrompt.run(childSid, parentSid);
}
