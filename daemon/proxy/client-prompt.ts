// What every wire does with the agent's own prompt and with message hashing. The agent's
// system-role messages (Claude Code's environment message, Codex's developer messages, a Chat
// agent's system message) are its prompt: taken out of the conversation before reconcile and
// put back where they were around the prepared history, never compacted. And the one JSON form
// a message is hashed in, so that key order and dropped empty fields do not make it another.

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

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** JSON with object keys sorted and `cache_control` and undefined fields left out. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (isRecord(v)) {
    const keys = Object.keys(v)
      .filter((k) => k !== 'cache_control' && v[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}
