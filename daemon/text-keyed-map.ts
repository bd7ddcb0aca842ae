// A map keyed by long texts that arrive as new strings on every request: a session's
// instructions, its running summary, its notes. A JS Map keyed by the text hashes a new string
// whole on every lookup, which for a text as long as a prompt made such caches cost most of
// what they saved. Here an entry is found by a short probe (the text's length and both ends)
// and confirmed by comparing the text, a memcmp. Texts that share a probe replace each other:
// the price of a collision is a miss, never a wrong value.

/** Texts up to this long are their own key: hashing them costs about what building a probe does. */
const WHOLE_KEY_CHARS = 1024;
const END_CHARS = 48;

function probe(text: string): string {
  if (text.length <= WHOLE_KEY_CHARS) return text;
  return `${text.length}:${text.slice(0, END_CHARS)}${text.slice(-END_CHARS)}`;
}

/** Entries in insertion order (a `set` makes its entry the newest), so callers can bound it. */
export class TextKeyedMap<V> {
  private readonly entries = new Map<string, { text: string; value: V }>();

  get size(): number {
    return this.entries.size;
  }

  get(text: string): V | undefined {
    const e = this.entries.get(probe(text));
    return e?.text === text ? e.value : undefined;
  }

  /**
   * Stores `value` under `text` as the newest entry. Returns the entry it displaced (the same
   * text's, or another text's with the same probe), so a caller that counts bytes can.
   */
  set(text: string, value: V): { text: string; value: V } | undefined {
    const key = probe(text);
    const old = this.entries.get(key);
    this.entries.delete(key);
    this.entries.set(key, { text, value });
    return old;
  }

  /** Removes the oldest entry and returns it; undefined when empty. */
  shift(): { text: string; value: V } | undefined {
    const first = this.entries.entries().next();
    if (first.done === true) return undefined;
    this.entries.delete(first.value[0]);
    return first.value[1];
  }
}
