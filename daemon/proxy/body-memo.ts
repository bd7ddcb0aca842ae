// Request bodies parsed from where they changed. An agent sends its whole history with every
// request, the same bytes as before up to the point where it grew (or where it moved its cache
// marker). Decoding and parsing those ~450 KB again was the largest share of the proxy's CPU a
// request. So the memo keeps a few recent bodies with the byte offset where each element of the
// history array ended. A new body that starts with the same bytes as one of them takes the
// parsed values of the elements both share from it, and parses only the rest.
//
// The result equals JSON.parse of the whole body: same values, same key order, the last of
// duplicate keys, `__proto__` as an own property. The tests check it against JSON.parse. Shared
// element values are the same objects in both results, so nothing may change a parsed body
// (every wire copies what it alters).
import { randomBytes } from 'node:crypto';

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

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

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
    const value: unknown = JSON.parse(bytes.toString('utf8'));
    if (bytes.length >= this.opts.minBytes && isRecord(value)) {
      const entry = scanBody(bytes, key, value);
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
      let rest: unknown;
      try {
        rest = JSON.parse(`{${JSON.stringify(REST)}:[0${bytes.toString('utf8', from)}`);
      } catch {
        return undefined; // the whole body is parsed, and throws its own error
      }
      if (!isRecord(rest)) return undefined;
      const more = rest[REST];
      if (!Array.isArray(more) || more[0] !== 0) return undefined;
      const ends = elementEnds(bytes, from, more.length - 1);
      if (ends === null) return undefined;
      const history: unknown[] = [...e.history.slice(0, k), ...(more as unknown[]).slice(1)];
      const out: Record<string, unknown> = {};
      for (const [m, v] of e.before) define(out, m, v);
      define(out, key, history);
      for (const m of Object.keys(rest)) if (m !== REST) define(out, m, rest[m]);
      this.keep({ bytes, key, before: e.before, history, ends: [...e.ends.slice(0, k), ...ends] }, n);
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

/** `b[i]` opens a string: the offset just past its closing quote, or -1. */
function stringEnd(b: Buffer, i: number): number {
  let from = i + 1;
  for (;;) {
    const q = b.indexOf(QUOTE, from);
    if (q === -1) return -1;
    let k = q - 1;
    while (b[k] === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q + 1;
    from = q + 1;
  }
}

/** `b[i]` starts a value that JSON.parse accepted: the offset just past it, or -1. */
function valueEnd(b: Buffer, i: number): number {
  const c = b[i];
  if (c === QUOTE) return stringEnd(b, i);
  if (c === OPEN_BRACE || c === OPEN_BRACKET) {
    let depth = 0;
    let j = i;
    while (j < b.length) {
      const d = b[j];
      if (d === QUOTE) {
        j = stringEnd(b, j);
        if (j === -1) return -1;
        continue;
      }
      if (d === OPEN_BRACE || d === OPEN_BRACKET) depth++;
      else if (d === CLOSE_BRACE || d === CLOSE_BRACKET) {
        depth--;
        if (depth === 0) return j + 1;
      }
      j++;
    }
    return -1;
  }
  let j = i;
  while (j < b.length) {
    const d = b[j];
    if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || isSpace(d)) break;
    j++;
  }
  return j;
}

function skipSpace(b: Buffer, i: number): number {
  while (isSpace(b[i])) i++;
  return i;
}

/** The ends of `count` more array elements from `from` (just past an element), or null. */
function elementEnds(b: Buffer, from: number, count: number): number[] | null {
  const ends: number[] = [];
  let i = from;
  for (let n = 0; n < count; n++) {
    i = skipSpace(b, i);
    if (b[i] !== COMMA) return null;
    i = valueEnd(b, skipSpace(b, i + 1));
    if (i === -1) return null;
    ends.push(i);
  }
  return ends;
}

/**
 * What to keep of a body JSON.parse accepted as `value`: its members before `key` and where
 * each history element ends. Null when there is nothing to share (no such array) or when a
 * top-level key repeats (the later value would not be the one in the shared bytes).
 */
function scanBody(b: Buffer, key: string, value: Record<string, unknown>): Entry | null {
  const history = value[key];
  if (!Array.isArray(history) || history.length === 0) return null;
  let i = skipSpace(b, 0);
  if (b[i] !== OPEN_BRACE) return null;
  i = skipSpace(b, i + 1);
  const seen = new Set<string>();
  const before: Array<[string, unknown]> = [];
  let ends: number[] | null = null;
  while (i < b.length && b[i] === QUOTE) {
    const keyEnd = stringEnd(b, i);
    if (keyEnd === -1) return null;
    const name = JSON.parse(b.toString('utf8', i, keyEnd)) as string;
    if (seen.has(name)) return null;
    seen.add(name);
    i = skipSpace(b, keyEnd);
    if (b[i] !== COLON) return null;
    const start = skipSpace(b, i + 1);
    if (name === key) {
      if (b[start] !== OPEN_BRACKET) return null;
      const first = skipSpace(b, start + 1);
      const firstEnd = valueEnd(b, first);
      if (firstEnd === -1) return null;
      const rest = elementEnds(b, firstEnd, history.length - 1);
      if (rest === null) return null;
      ends = [firstEnd, ...rest];
      i = skipSpace(b, rest.length === 0 ? firstEnd : rest[rest.length - 1]!);
      if (b[i] !== CLOSE_BRACKET) return null;
      i++;
    } else {
      i = valueEnd(b, start);
      if (i === -1) return null;
      if (ends === null) before.push([name, value[name]]);
    }
    i = skipSpace(b, i);
    if (b[i] !== COMMA) break;
    i = skipSpace(b, i + 1);
  }
  return ends === null ? null : { bytes: b, key, before, history, ends };
}
