// What every wire does with the agent's own prompt and with message hashing. The agent's
// system-role messages (Claude Code's environment message, Codex's developer messages, a Chat
// agent's system message) are its prompt: taken out of the conversation before reconcile and
// put back where they were around the prepared history, never compacted. And the one JSON form
// a message is hashed in, so that key order and dropped empty fields do not make it another.
import { isRecord } from '../../protocol/is-record.ts';

/** A client prompt message and the number of conversation messages before it. */
export interface PlacedPrompt<T> {
  message: T;
  before: number;
}

/** Splits the agent's messages into the conversation and its prompt messages with their places. */
export function splitClientPrompt<T>(messages: readonly T[], isPrompt: (m: T) => boolean): { conversation: T[]; prompt: Array<PlacedPrompt<T>> } {
  const conversation: T[] = [];
  const prompt: Array<PlacedPrompt<T>> = [];
  for (const m of messages) {
    if (isPrompt(m)) prompt.push({ message: m, before: conversation.length });
    else conversation.push(m);
  }
  return { conversation, prompt };
}

/**
 * The prompt messages put back around the prepared history: those that opened the history stay
 * first (then `own`, the daemon's context, if any); any other goes right after the history's first
 * message, where agents put their environment.
 */
export function placeClientPrompt<T>(messages: readonly T[], prompt: ReadonlyArray<PlacedPrompt<T>>, own: readonly T[] = []): T[] {
  const head = prompt.filter((s) => s.before === 0).map((s) => s.message);
  const after = prompt.filter((s) => s.before > 0).map((s) => s.message);
  if (after.length === 0) return [...head, ...own, ...messages];
  return [...head, ...own, ...messages.slice(0, 1), ...after, ...messages.slice(1)];
}

/**
 * JSON with object keys sorted and `cache_control` and undefined fields left out. Stored chains
 * (proxy_messages) are hashes of this text, so its output must never change; it is written into
 * one string as it walks, with no per-level arrays, because every request hashes its whole history.
 */
export function canonicalJson(v: unknown): string {
  return writeCanonical(v, '');
}

function writeCanonical(v: unknown, out: string): string {
  if (typeof v === 'string') return out + JSON.stringify(v);
  if (Array.isArray(v)) {
    out += '[';
    for (let i = 0; i < v.length; i++) out = writeCanonical(v[i], i === 0 ? out : out + ',');
    return out + ']';
  }
  if (!isRecord(v)) return out + (JSON.stringify(v) ?? 'null');
  let keys = Object.keys(v);
  for (let i = 1; i < keys.length; i++) {
    if (keys[i - 1]! > keys[i]!) {
      keys = keys.sort();
      break;
    }
  }
  out += '{';
  let first = true;
  for (const k of keys) {
    const x = v[k];
    if (x === undefined || k === 'cache_control') continue;
    out = writeCanonical(x, `${first ? out : out + ','}${JSON.stringify(k)}:`);
    first = false;
  }
  return out + '}';
}
