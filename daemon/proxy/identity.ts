// Which session a proxied request belongs to, from what the agent sends: its account (or a
// hash of its credential) as the namespace, its own session id where it names one, and the
// conversation's opening, so a Task subagent under the same session id is its own session.
// Finding or creating the session row is session.ts's; this module only computes names.
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { canonicalMessage, systemText, type MessagesRequest, type WireMessage } from './anthropic-wire.ts';

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

function sha(...parts: string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex');
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Claude Code's `metadata.user_id`: a JSON string with device, account and session ids. */
function userIdFields(body: MessagesRequest): { account?: string; device?: string; session?: string } {
  const raw = body.metadata?.user_id;
  if (raw === undefined) return {};
  try {
    const v = JSON.parse(raw) as unknown;
    if (typeof v !== 'object' || v === null) return { account: raw };
    const r = v as Record<string, unknown>;
    const str = (x: unknown): string | undefined => (typeof x === 'string' && x !== '' ? x : undefined);
    return { account: str(r.account_uuid), device: str(r.device_id), session: str(r.session_id) };
  } catch {
    // An opaque user id (the API's own meaning) names the end user: a namespace.
    return { account: raw };
  }
}

export function credentialOf(headers: IncomingHttpHeaders): string | null {
  const key = header(headers, 'x-api-key');
  if (key !== undefined && key !== '') return key;
  const auth = header(headers, 'authorization');
  return auth === undefined || auth === '' ? null : auth;
}

function agentStem(agent: string | null): string {
  if (agent === null) return 'proxy';
  if (/^claude-cli\//i.test(agent) || /claude-code/i.test(agent)) return 'claude';
  const m = /^([A-Za-z][A-Za-z0-9_-]{0,20})\//.exec(agent);
  return m === null ? 'proxy' : m[1]!.toLowerCase();
}

/**
 * The request's identity. The namespace is the account the agent names, else its device, else
 * a hash of its credential: a refreshed bearer token of a named account keeps its sessions,
 * and one caller cannot land in another's. Within it, the agent's session id (Claude Code's
 * header or `metadata.user_id`) with the first user message, or without a session id the
 * system prompt with the first user message.
 */
export function identify(headers: IncomingHttpHeaders, body: MessagesRequest, conversation: readonly WireMessage[]): Identity {
  const credential = credentialOf(headers);
  const fields = userIdFields(body);
  const namespace = fields.account ?? fields.device ?? `cred:${sha(credential ?? '')}`;
  const sessionId = header(headers, 'x-claude-code-session-id') ?? fields.session ?? null;
  const first = conversation.find((m) => m.role === 'user');
  const opening = first === undefined ? '' : canonicalMessage(first);
  const agent = header(headers, 'user-agent') ?? null;
  const stem = agentStem(agent);
  if (sessionId !== null) {
    const family = sha('family', namespace, sessionId);
    return { identity: sha('conversation', family, opening), family, namespace: sha('namespace', namespace), stem: `${stem}-${sessionId.replace(/[^A-Za-z0-9]/g, '').slice(0, 8)}`, agent, credential };
  }
  const fingerprint = sha('fingerprint', namespace, systemText(body.system), opening);
  return { identity: fingerprint, family: fingerprint, namespace: sha('namespace', namespace), stem: `${stem}-${fingerprint.slice(0, 12)}`, agent, credential };
}
