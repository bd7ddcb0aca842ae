// Sessions: opening, looking up, listing and deleting the rows of the `sessions` table.
// Transcript rows, forks and excursions are written by storage/transcript/write.ts; payload bytes and
// their garbage collection belong to storage/images/payloads.ts.
import { randomUUID } from 'node:crypto';
import { AlbedoError, rpcError, RpcCode } from '../../protocol/errors.ts';
import { type Db, perDb } from '../db.ts';
import { releasePayloads } from '../images/payloads.ts';

/** A `sessions` row with its parent's public id resolved. */
export interface SessionRecord {
  sid: number;
  /** Public session id. */
  name: string;
  workspace: string | null;
  /** Milliseconds since the epoch. */
  created_at: number;
  parent_sid: number | null;
  /** Public id of the parent session; null for a root or once the parent was deleted. */
  parent: string | null;
  /** Parent seq the fork copied up to (inclusive). */
  fork_seq: number | null;
  /** Seq of the parent's excursion marker; null unless this session is an excursion. */
  excursion_marker: number | null;
  /** Seq of the parent's excursion_return notice once the excursion returned. */
  returned_seq: number | null;
}

/** One entry of `session.list`. */
export interface SessionSummary {
  session: string;
  /** Newest seq of the session; 0 when it has no rows. */
  head: number;
  rows: number;
  parent: string | null;
  workspace: string | null;
  created_at: number;
  /** The agent of a proxy session (migration 28); null otherwise. */
  agent: string | null;
  /** The `albedo run` a proxy session came through (migration 29); null otherwise. */
  run: string | null;
}

export interface NewSession {
  name: string;
  workspace: string | null;
  created_at: number;
  parent_sid?: number | null;
  fork_seq?: number | null;
  excursion_marker?: number | null;
}

function prepare(db: Db) {
  return {
    // Not the known-prompt columns: storage/log/known-prompt.ts reads those with a statement of its own.
    find: db.prepare<[string], SessionRecord>(
      `SELECT s.sid, s.name, s.workspace, s.created_at, s.parent_sid, p.name AS parent, s.fork_seq,
              s.excursion_marker, s.returned_seq
         FROM sessions s LEFT JOIN sessions p ON p.sid = s.parent_sid
        WHERE s.name = ?`,
    ),
    insert: db.prepare<[string, string | null, number, number | null, number | null, number | null]>(
      `INSERT INTO sessions (name, workspace, created_at, parent_sid, fork_seq, excursion_marker)
       VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
    ),
    fillWorkspace: db.prepare<[string, number]>(
      'UPDATE sessions SET workspace = ? WHERE sid = ? AND workspace IS NULL',
    ),
    fillParent: db.prepare<[number, number]>('UPDATE sessions SET parent_sid = ? WHERE sid = ? AND parent_sid IS NULL'),
    // Correlated subqueries walk the (sid, seq) index once per session: max() is a single
    // probe, count() a scan of that session's index range only.
    list: db.prepare<[], SessionSummary>(
      `SELECT s.name AS session,
              coalesce((SELECT max(t.seq) FROM transcript t WHERE t.sid = s.sid), 0) AS head,
              (SELECT count(*) FROM transcript t WHERE t.sid = s.sid) AS "rows",
              p.name AS parent, s.workspace, s.created_at, x.agent, x.run_id AS run
         FROM sessions s LEFT JOIN sessions p ON p.sid = s.parent_sid LEFT JOIN proxy_sessions x ON x.sid = s.sid
        ORDER BY s.sid`,
    ),
    delete: db.prepare<[string]>('DELETE FROM sessions WHERE name = ?'),
    stateStamp: db.prepare<[number], number>('SELECT state_stamp FROM sessions WHERE sid = ?').pluck(),
    // Every payload hash the session's rows or pinned prompt name.
    namedHashes: db
      .prepare<[number, number], string>(
        `SELECT r.hash FROM transcript t INDEXED BY transcript_session JOIN payload_refs r INDEXED BY payload_refs_seq ON r.seq = t.seq WHERE t.sid = ?
         UNION SELECT hash FROM payload_refs INDEXED BY payload_refs_pin WHERE pin_sid = ?`,
      )
      .pluck(),
  };
}

const stmts = perDb(prepare);

export function findSession(db: Db, name: string): SessionRecord | undefined {
  return stmts(db).find.get(name);
}

export function requireSession(db: Db, name: string): SessionRecord {
  const s = stmts(db).find.get(name);
  if (s === undefined) throw new AlbedoError('unknown_session', `unknown session "${name}"`, { session: name });
  return s;
}

/**
 * Inserts a session row; undefined when the name is taken. Forks pass their parent fields
 * (storage/transcript/write.ts); plain opens go through `openSession`.
 */
export function createSession(db: Db, s: NewSession): number | undefined {
  const r = stmts(db).insert.run(
    s.name,
    s.workspace,
    s.created_at,
    s.parent_sid ?? null,
    s.fork_seq ?? null,
    s.excursion_marker ?? null,
  );
  return r.changes === 0 ? undefined : Number(r.lastInsertRowid);
}

/**
 * Opens a session, creating it when absent (a fresh UUID when no id is given). Reopening keeps
 * the stored workspace and parent; a workspace or parent given for a session that had none is
 * recorded. A parent must exist (unknown_session) and cannot be the session itself.
 */
export function openSession(
  db: Db,
  opts: { session?: string; workspace?: string; parent?: string; now?: () => number },
): { session: string; sid: number; created: boolean } {
  const name = opts.session ?? randomUUID();
  const workspace = opts.workspace ?? null;
  if (opts.parent === name) throw rpcError(RpcCode.InvalidParams, 'invalid_params', `session "${name}" cannot be its own parent`, { session: name });
  return db.transaction(() => {
    const parentSid = opts.parent === undefined ? null : requireSession(db, opts.parent).sid;
    const sid = createSession(db, { name, workspace, created_at: (opts.now ?? Date.now)(), parent_sid: parentSid });
    if (sid !== undefined) return { session: name, sid, created: true };
    const existing = requireSession(db, name);
    if (workspace !== null && existing.workspace === null) stmts(db).fillWorkspace.run(workspace, existing.sid);
    if (parentSid !== null && existing.parent_sid === null) stmts(db).fillParent.run(parentSid, existing.sid);
    return { session: name, sid: existing.sid, created: false };
  })();
}

/**
 * A value that changes whenever the session's rolling summary or notes are written, deleted or
 * rolled back (triggers of migration 24); 0 before the first write. Readers keep a parsed state
 * while it holds.
 */
export function stateStamp(db: Db, sid: number): number {
  return stmts(db).stateStamp.get(sid) ?? 0;
}

/** Every session, oldest first, with its head and row count. */
export function listSessions(db: Db): SessionSummary[] {
  return stmts(db).list.all();
}

/**
 * Deletes a session with its rows, tool calls, fork entries and payload references (all by
 * cascade), then those of its payloads nothing else names. Child sessions stay, parentless.
 */
export function deleteSession(db: Db, name: string): boolean {
  return db.transaction(() => {
    const s = findSession(db, name);
    if (s === undefined) return false;
    const named = stmts(db).namedHashes.all(s.sid, s.sid);
    stmts(db).delete.run(name);
    releasePayloads(db, named);
    return true;
  })();
}
