// Which session a proxied request belongs to, from what the agent sends: its account (or a
// hash of its credential) as the namespace, its own session id where it names one, and the
// conversation's opening, so a Task subagent under the same session id is its own session.
// Each wire says where its agent puts those (IdentitySource); finding or creating the session
// row is reconcile.ts's; this module only computes names.
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

export interface Identity {
  /** sha256 over namespace, the agent's session id and the conversation's opening. */
  identity: string;
  /** sha256 over namespace and the agent's session id: all conversations of one agent session. */
  family: string;
  /** sha256 of the namespace alone. */
  namespace: string;
  /** A readable stem for the session's name (`claude-73765bef`); made unique by the caller. */
  stem: string;
  /** The agent as its user-agent names it. */
  agent: string | null;
  /** The credential the request carries (forwarded as it came, never stored). */
  credential: string | null;
}

/** What a wire reads off a request for its identity. */
export interface IdentitySource {
  headers: IncomingHttpHeaders;
  /** The account (or device) the agent names; else the credential's hash is the namespace. */
  account: string | undefined;
  /** The agent's own session id, if it sends one. */
  sessionId: string | undefined;
  /** The agent's prompt as text: with the opening, a session's fingerprint when there is no session id. */
  prompt: string;
  /** The first user message in canonical form. */
  opening: string;
}

function sha(...parts: string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex');
}

export function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}

export function credentialOf(headers: IncomingHttpHeaders): string | null {
  return header(headers, 'x-api-key') ?? header(headers, 'authorization') ?? null;
}

function agentStem(agent: string | null): string {
  if (agent === null) return 'proxy';
  if (/^claude-cli\//i.test(agent) || /claude-code/i.test(agent)) return 'claude';
  if (/^codex[_-]/i.test(agent)) return 'codex';
  const m = /^([A-Za-z][A-Za-z0-9_-]{0,20})\//.exec(agent);
  return m === null ? 'proxy' : m[1]!.toLowerCase();
}

/**
 * The request's identity. The namespace is the account the agent names, else a hash of its
 * credential: a refreshed bearer token of a named account keeps its sessions, and one caller
 * cannot land in another's. Within it, the agent's session id with the first user message, or
 * without a session id the prompt with the first user message.
 */
export function identify(src: IdentitySource): Identity {
  const credential = credentialOf(src.headers);
  const namespace = src.account ?? `cred:${sha(credential ?? '')}`;
  const agent = header(src.headers, 'user-agent') ?? null;
  const stem = agentStem(agent);
  if (src.sessionId !== undefined) {
    const family = sha('family', namespace, src.sessionId);
    return { identity: sha('conversation', family, src.opening), family, namespace: sha('namespace', namespace), stem: `${stem}-${src.sessionId.replace(/[^A-Za-z0-9]/g, '').slice(0, 8)}`, agent, credential };
  }
  const fingerprint = sha('fingerprint', namespace, src.prompt, src.opening);
  return { identity: fingerprint, family: fingerprint, namespace: sha('namespace', namespace), stem: `${stem}-${fingerprint.slice(0, 12)}`, agent, credential };
}
