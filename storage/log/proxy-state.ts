// What the proxy keeps per session (migrations 28 and 29): the identity a request is matched by, the
// agent's name, the side requests it forwarded, the memory-tool calls it ran, and the chain of
// message hashes already stored.
// Building those hashes and deciding what a mismatch means is daemon/proxy/reconcile.ts's.
import { type Db, perDb, withoutFsync } from '../db.ts';

export interface ProxySession {
  sid: number;
  name: string;
  wire: string;
  identity: string;
  family: string;
  namespace: string;
  parent_sid: number | null;
  agent: string | null;
  side_requests: number;
  side_input_tokens: number;
  side_output_tokens: number;
  /** Conversation requests forwarded as they came because a proxy cannot compact them (migration 29). */
  passed_through: number;
  passed_through_reason: string | null;
  /** The agent's own compactions (Codex's `/responses/compact`) routed through the proxy. */
  client_compactions: number;
}

/** One memory-tool call the proxy ran inside a turn (migration 29). */
export interface MemoryCallRow {
  turn: number;
  round: number;
  name: string;
  /** The arguments as JSON text. */
  arguments: string;
  is_error: number;
  input_tokens: number;
  output_tokens: number;
  created_at: number;
}

/** One stored conversation message: the chained hash up to it and its last row's seq. */
export interface ChainLink {
  idx: number;
  chain: string;
  last_seq: number;
  /** Recorded by the proxy from the upstream's answer (see migration 28). */
  recorded: boolean;
}

const stmts = perDb((db: Db) => ({
  current: db.prepare<[string], ProxySession>(
    `SELECT p.sid, s.name, p.wire, p.identity, p.family, p.namespace, p.parent_sid, p.agent, p.side_requests, p.side_input_tokens, p.side_output_tokens, p.passed_through, p.passed_through_reason, p.client_compactions
       FROM proxy_sessions p JOIN sessions s ON s.sid = p.sid
      WHERE p.identity = ? AND p.current = 1 ORDER BY p.sid DESC LIMIT 1`,
  ),
  bySid: db.prepare<[number], ProxySession>(
    `SELECT p.sid, s.name, p.wire, p.identity, p.family, p.namespace, p.parent_sid, p.agent, p.side_requests, p.side_input_tokens, p.side_output_tokens, p.passed_through, p.passed_through_reason, p.client_compactions
       FROM proxy_sessions p JOIN sessions s ON s.sid = p.sid WHERE p.sid = ?`,
  ),
  insert: db.prepare<[number, string, string, string, string, number | null, string | null, number]>(
    'INSERT INTO proxy_sessions (sid, wire, identity, family, namespace, parent_sid, agent, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  ),
  latestOfNamespace: db.prepare<[string], ProxySession>(
    `SELECT p.sid, s.name, p.wire, p.identity, p.family, p.namespace, p.parent_sid, p.agent, p.side_requests, p.side_input_tokens, p.side_output_tokens, p.passed_through, p.passed_through_reason, p.client_compactions
       FROM proxy_sessions p JOIN sessions s ON s.sid = p.sid WHERE p.namespace = ? AND p.current = 1 ORDER BY p.sid DESC LIMIT 1`,
  ),
  firstOfFamily: db.prepare<[string], ProxySession>(
    `SELECT p.sid, s.name, p.wire, p.identity, p.family, p.namespace, p.parent_sid, p.agent, p.side_requests, p.side_input_tokens, p.side_output_tokens, p.passed_through, p.passed_through_reason, p.client_compactions
       FROM proxy_sessions p JOIN sessions s ON s.sid = p.sid WHERE p.family = ? ORDER BY p.sid LIMIT 1`,
  ),
  retire: db.prepare<[number]>('UPDATE proxy_sessions SET current = 0 WHERE sid = ?'),
  agent: db.prepare<[string, number]>('UPDATE proxy_sessions SET agent = ? WHERE sid = ?'),
  side: db.prepare<[number, number, number]>(
    'UPDATE proxy_sessions SET side_requests = side_requests + 1, side_input_tokens = side_input_tokens + ?, side_output_tokens = side_output_tokens + ? WHERE sid = ?',
  ),
  passedThrough: db.prepare<[string, number]>('UPDATE proxy_sessions SET passed_through = passed_through + 1, passed_through_reason = ? WHERE sid = ?'),
  run: db.prepare<[string, number]>('UPDATE proxy_sessions SET run_id = ? WHERE sid = ?'),
  clientCompaction: db.prepare<[number]>('UPDATE proxy_sessions SET client_compactions = client_compactions + 1 WHERE sid = ?'),
  memoryCall: db.prepare<[number, number, number, string, string, number, number, number, number]>(
    'INSERT INTO proxy_memory_calls (sid, turn, round, name, arguments, is_error, input_tokens, output_tokens, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
  ),
  recentMemoryCalls: db.prepare<[number, number], MemoryCallRow>(
    'SELECT turn, round, name, arguments, is_error, input_tokens, output_tokens, created_at FROM proxy_memory_calls WHERE sid = ? ORDER BY id DESC LIMIT ?',
  ),
  lastTurnCalls: db.prepare<[number, number], MemoryCallRow>(
    `SELECT turn, round, name, arguments, is_error, input_tokens, output_tokens, created_at FROM proxy_memory_calls
      WHERE sid = ? AND turn = (SELECT max(turn) FROM proxy_memory_calls WHERE sid = ?) ORDER BY id`,
  ),
  chain: db.prepare<[number], { idx: number; chain: string; last_seq: number; recorded: number }>(
    'SELECT idx, chain, last_seq, recorded FROM proxy_messages WHERE sid = ? ORDER BY idx',
  ),
  putLink: db.prepare<[number, number, string, number, number]>(
    'INSERT OR REPLACE INTO proxy_messages (sid, idx, chain, last_seq, recorded) VALUES (?, ?, ?, ?, ?)',
  ),
  dropFrom: db.prepare<[number, number]>('DELETE FROM proxy_messages WHERE sid = ? AND idx >= ?'),
  chainStamp: db.prepare<[number], number>('SELECT chain_stamp FROM proxy_sessions WHERE sid = ?').pluck(),
}));

/** The session an identity's requests go to now, if any. */
export function currentProxySession(db: Db, identity: string): ProxySession | undefined {
  return stmts(db).current.get(identity);
}

export function proxySession(db: Db, sid: number): ProxySession | undefined {
  return stmts(db).bySid.get(sid);
}

export function addProxySession(db: Db, s: { sid: number; wire: string; identity: string; family: string; namespace: string; parentSid: number | null; agent: string | null; now: number }): void {
  stmts(db).insert.run(s.sid, s.wire, s.identity, s.family, s.namespace, s.parentSid, s.agent, s.now);
}

/** The newest current session of a namespace. */
export function latestOfNamespace(db: Db, namespace: string): ProxySession | undefined {
  return stmts(db).latestOfNamespace.get(namespace);
}

/** The first conversation of an agent session: the parent of the others (its subagents). */
export function firstOfFamily(db: Db, family: string): ProxySession | undefined {
  return stmts(db).firstOfFamily.get(family);
}

/** A fork took over the identity: later requests go to the fork. */
export function retireProxySession(db: Db, sid: number): void {
  stmts(db).retire.run(sid);
}

export function noteAgent(db: Db, sid: number, agent: string): void {
  stmts(db).agent.run(agent, sid);
}

// What /context tells of a proxied session (its side requests, pass-throughs, run id, the
// agent's own compactions, memory-tool calls) is bookkeeping written on a request's way, so it
// commits without an fsync (storage/db.ts withoutFsync): a power cut can lose a line of
// /context, never a row, and the event loop does not wait for the disk.

/** A side request (a title, a quota check) was forwarded as it came. */
export function countSideRequest(db: Db, sid: number, inputTokens: number, outputTokens: number): void {
  withoutFsync(db, () => stmts(db).side.run(inputTokens, outputTokens, sid));
}

/** A conversation request went up as it came (the reason is /context's). */
export function notePassedThrough(db: Db, sid: number, reason: string): void {
  withoutFsync(db, () => stmts(db).passedThrough.run(reason, sid));
}

/** The session's requests came through `albedo run` with this id. */
export function noteRun(db: Db, sid: number, run: string): void {
  withoutFsync(db, () => stmts(db).run.run(run, sid));
}

/** The agent ran its own compaction through the proxy. */
export function noteClientCompaction(db: Db, sid: number): void {
  withoutFsync(db, () => stmts(db).clientCompaction.run(sid));
}

/** A memory tool the proxy ran for the agent. */
export function noteMemoryCall(db: Db, sid: number, c: { turn: number; round: number; name: string; arguments: unknown; isError: boolean; inputTokens: number; outputTokens: number; now: number }): void {
  withoutFsync(db, () => stmts(db).memoryCall.run(sid, c.turn, c.round, c.name, JSON.stringify(c.arguments), c.isError ? 1 : 0, c.inputTokens, c.outputTokens, c.now));
}

/** The newest memory-tool calls, newest first. */
export function recentMemoryCalls(db: Db, sid: number, limit: number): MemoryCallRow[] {
  return stmts(db).recentMemoryCalls.all(sid, limit);
}

/** The calls of the session's last turn that had any, in order. */
export function lastTurnMemoryCalls(db: Db, sid: number): MemoryCallRow[] {
  return stmts(db).lastTurnCalls.all(sid, sid);
}

export function messageChain(db: Db, sid: number): ChainLink[] {
  return stmts(db).chain.all(sid).map((r) => ({ idx: r.idx, chain: r.chain, last_seq: r.last_seq, recorded: r.recorded === 1 }));
}

/** Stores links (replacing any at the same positions). */
/** A value that changes whenever the session's chain is written (migration 30); 0 before any. */
export function chainStamp(db: Db, sid: number): number {
  return stmts(db).chainStamp.get(sid) ?? 0;
}

export function putChainLinks(db: Db, sid: number, links: readonly ChainLink[]): void {
  const st = stmts(db);
  for (const l of links) st.putLink.run(sid, l.idx, l.chain, l.last_seq, l.recorded ? 1 : 0);
}

/** Forgets the links from `idx` on (a rewind continues in a fork; the parent keeps its own). */
export function dropChainFrom(db: Db, sid: number, idx: number): void {
  stmts(db).dropFrom.run(sid, idx);
}
