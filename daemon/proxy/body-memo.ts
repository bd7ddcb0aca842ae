// Request bodies parsed from where they changed. An agent sends its whole history with every
// request, the same bytes as before up to the point where it grew (or where it moved its cache
// marker). Decoding and parsing all of it again was the largest share of the proxy's CPU a
// request (docs/bench.md). So the memo keeps a few recent bodies with the byte offset where each element of the
// history array ended. A new body that starts with the same bytes as one of them takes the
// parsed values of the elements both share from it, and parses only the rest.
//
// The result equals JSON.parse of the whole body: same values, same key order, the last of
// duplicate keys, `__proto__` as an own property. The tests check it against JSON.parse. Shared
// element values are the same objects in both results, so nothing may change a parsed body
// (every wire copies what it alters).
import { randomBytes } from 'node:crypto';
import { CLOSE_BRACKET, COMMA, OPEN_BRACE, OPEN_BRACKET, QUOTE, skipSpace, valueEnd } from '../../protocol/json-tokens.ts';
import { isRecord } from '../../protocol/is-record.ts';

/** What the memo keeps of one body. */
interface Entry {
  bytes: Buffer;
  /** The top-level member holding the history array (`messages`, `input`). */
  key: string;
  /** The members before it, in order, with their values. */
  before: Array<[string, unknown]>;
  history: readonly unknown[];
  /** `ends[i]`: the offset just past history element i. */
  ends: number[];
}

export interface BodyMemoOptions {
  /** Bodies kept, most recent first (one per agent conversation in flight). */
  maxEntries: number;
  /** Their bytes together at most. */
  maxBytes: number;
  /** Smaller bodies are parsed whole and not kept: nothing worth sharing. */
  minBytes: number;
}

const DEFAULTS: BodyMemoOptions = { maxEntries: 8, maxBytes: 32 * 2 ** 20, minBytes: 16 * 1024 };

/** The member the rest of a body is parsed under: no body can know it, so none can repeat it. */
const REST = `\u0000albedo-rest-${randomBytes(8).toString('hex')}`;

/** Sets a member as JSON.parse does: an own data property (`__proto__` too), a repeated key's place kept. */
function define(o: Record<string, unknown>, k: string, value: unknown): void {
  Object.defineProperty(o, k, { value, writable: true, enumerable: true, configurable: true });
}

export class BodyMemo {
  private entries: Entry[] = [];
  private readonly opts: BodyMemoOptions;

  constructor(opts: Partial<BodyMemoOptions> = {}) {
    this.opts = { ...DEFAULTS, ...opts };
  }

  /**
   * JSON.parse of `bytes` (UTF-8), whose top-level member `key` is expected to hold the
   * history. Throws JSON.parse's SyntaxError for a body that is not JSON.
   */
  parse(bytes: Buffer, key: string): unknown {
    const shared = this.fromRecent(bytes, key);
    if (shared !== undefined) return shared;
    const text = bytes.toString('utf8');
    const value: unknown = JSON.parse(text);
    if (bytes.length >= this.opts.minBytes && isRecord(value)) {
      const entry = scanBody(bytes, text, key, value);
      if (entry !== null) this.keep(entry, -1);
    }
    return value;
  }

  /** The body read with the elements it shares with a kept body; undefined when it shares none. */
  private fromRecent(bytes: Buffer, key: string): Record<string, unknown> | undefined {
    for (let n = 0; n < this.entries.length; n++) {
      const e = this.entries[n]!;
      if (e.key !== key) continue;
      const k = sharedElements(e, bytes);
      if (k === 0) continue;
      const from = e.ends[k - 1]!;
      // The rest continues inside the history array, after an element: parsed in the same place
      // of an object of its own, it is valid exactly when the whole body is.
      const tail = bytes.toString('utf8', from);
      let rest: unknown;
      try {
        rest = JSON.parse(`{${JSON.stringify(REST)}:[0${tail}`);
      } catch {
        return undefined; // the whole body is parsed, and throws its own error
      }
      if (!isRecord(rest)) return undefined;
      const more = rest[REST];
      if (!Array.isArray(more) || more[0] !== 0) return undefined;
      const run = elementEnds(tail, 0, from, more.length - 1);
      if (run === null) return undefined;
      const history: unknown[] = [...e.history.slice(0, k), ...(more as unknown[]).slice(1)];
      const out: Record<string, unknown> = {};
      for (const [m, v] of e.before) define(out, m, v);
      define(out, key, history);
      for (const m of Object.keys(rest)) if (m !== REST) define(out, m, rest[m]);
      this.keep({ bytes, key, before: e.before, history, ends: [...e.ends.slice(0, k), ...run.ends] }, n);
      return out;
    }
    return undefined;
  }

  /** Keeps `entry` first, in place of entry `replacing` (-1: none), within the bounds. */
  private keep(entry: Entry, replacing: number): void {
    const rest = this.entries.filter((_, i) => i !== replacing);
    const kept = [entry];
    let bytes = entry.bytes.length;
    for (const e of rest) {
      if (kept.length >= this.opts.maxEntries || bytes + e.bytes.length > this.opts.maxBytes) break;
      kept.push(e);
      bytes += e.bytes.length;
    }
    this.entries = entry.bytes.length > this.opts.maxBytes ? kept.slice(1) : kept;
  }
}

/**
 * How many leading history elements `bytes` shares with the kept body: the most whose bytes,
 * and all before them, are the same. Only an element that is an object or array counts as the
 * last one shared: it ends itself, where a number could go on in the new body.
 */
function sharedElements(e: Entry, bytes: Buffer): number {
  const same = (c: number): boolean => {
    const end = e.ends[c - 1]!;
    return end <= bytes.length && bytes.compare(e.bytes, 0, end, 0, end) === 0;
  };
  let lo = 0;
  let hi = e.ends.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (same(mid)) lo = mid;
    else hi = mid - 1;
  }
  while (lo > 0 && (typeof e.history[lo - 1] !== 'object' || e.history[lo - 1] === null)) lo--;
  return lo;
}

/** A run of array elements: the byte offset just past each, and the text index past the last. */
interface Run {
  ends: number[];
  next: number;
}

/**
 * `count` more array elements of `text` from index `from` (just past an element, at byte
 * `byteFrom` of the body; JSON.parse accepted the text in place), or null where the text is not
 * such a run of elements.
 */
function elementEnds(text: string, from: number, byteFrom: number, count: number): Run | null {
  const ends: number[] = [];
  let i = from;
  let byte = byteFrom;
  for (let n = 0; n < count; n++) {
    const at = i;
    i = skipSpace(text, i);
    if (text.charCodeAt(i) !== COMMA) return null;
    i = valueEnd(text, skipSpace(text, i + 1));
    byte += Buffer.byteLength(text.slice(at, i));
    ends.push(byte);
  }
  return { ends, next: i };
}

/**
 * What to keep of a body JSON.parse accepted as `value` from `text`: its members before `key`
 * and the byte offset where each history element ends. Null when there is nothing to share (no
 * such array) or when a top-level key repeats (the later value would not be the one in the
 * shared bytes).
 */
function scanBody(bytes: Buffer, text: string, key: string, value: Record<string, unknown>): Entry | null {
  const history = value[key];
  if (!Array.isArray(history) || history.length === 0) return null;
  let i = skipSpace(text, 0);
  if (text.charCodeAt(i) !== OPEN_BRACE) return null;
  i = skipSpace(text, i + 1);
  const seen = new Set<string>();
  const before: Array<[string, unknown]> = [];
  let ends: number[] | null = null;
  while (i < text.length && text.charCodeAt(i) === QUOTE) {
    const keyEnd = valueEnd(text, i);
    const name = JSON.parse(text.slice(i, keyEnd)) as string;
    if (seen.has(name)) return null;
    seen.add(name);
    const start = skipSpace(text, skipSpace(text, keyEnd) + 1);
    if (name === key) {
      if (text.charCodeAt(start) !== OPEN_BRACKET) return null;
      const firstEnd = valueEnd(text, skipSpace(text, start + 1));
      const firstByte = Buffer.byteLength(text.slice(0, firstEnd));
      const rest = elementEnds(text, firstEnd, firstByte, history.length - 1);
      if (rest === null) return null;
      ends = [firstByte, ...rest.ends];
      i = skipSpace(text, rest.next);
      if (text.charCodeAt(i) !== CLOSE_BRACKET) return null;
      i++;
    } else {
      i = valueEnd(text, start);
      if (ends === null) before.push([name, value[name]]);
    }
    i = skipSpace(text, i);
    if (text.charCodeAt(i) !== COMMA) break;
    i = skipSpace(text, i + 1);
  }
  return ends === null ? null : { bytes, key, before, history, ends };
}
