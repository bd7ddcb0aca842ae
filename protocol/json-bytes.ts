// JSON.parse of a line's UTF-8 bytes without decoding the line whole. V8 puts every string over
// 128 KiB in its large-object space, a fresh mmap each time, and on a VM touching those pages
// is slow: decoding a long line whole costs many times more a byte than decoding pieces under
// 64 KiB. Decoding in pieces and concatenating gains nothing (JSON.parse flattens a cons string
// first), so a large line is split where its JSON allows: one linear scan finds the separators
// of every object and array, those over the threshold are built from their members, and the
// members between them are parsed by JSON.parse in runs under the threshold. Only a single
// string (or number) token longer than the threshold is still decoded whole: that value must
// exist anyway.
//
// Nothing here recurses: open containers are kept on explicit stacks, so no nesting depth can
// overflow the call stack (JSON.parse, which parses the runs, bounds its own depth).
import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, COLON, COMMA, isSpace, OPEN_BRACE, OPEN_BRACKET, QUOTE, topLevelMemberTokens } from './json-tokens.ts';
import { isRecord } from './is-record.ts';

/**
 * Lines up to this many bytes are decoded whole. UTF-8 of n bytes decodes to at most n UTF-16
 * units, at most 2n bytes of string, so a piece this size (plus two brackets) stays under V8's
 * 128 KiB bound; a 64 KiB piece with one non-Latin-1 character measured many times slower.
 */
export const JSON_BYTES_THRESHOLD = 64 * 1024 - 64;

export interface JsonBytesOptions {
  /** Containers (and the whole line) up to this many bytes are decoded whole. Default JSON_BYTES_THRESHOLD. */
  thresholdBytes?: number;
}

export interface ParsedJsonBytes {
  value: unknown;
  /**
   * What `topLevelMemberTokens(line, name)` gives for the decoded line, except that a member
   * whose value is a container over the threshold has no token (undefined): it is never a number.
   */
  tokens: Array<string | undefined>;
}

// Faster than toString on pieces. ignoreBOM keeps a leading U+FEFF, as toString does, so that
// JSON.parse sees (and refuses) it.
const decoder = new TextDecoder('utf-8', { ignoreBOM: true });

function syntaxError(what: string, at: number): SyntaxError {
  return new SyntaxError(`${what} in JSON at position ${at}`);
}

/**
 * Exactly what `JSON.parse(buf.toString('utf8'))` returns or throws, for valid UTF-8 input (the
 * framing refuses any other): a SyntaxError, or the value with JSON.parse's key order, the last
 * of duplicate keys, and `__proto__` as an own data property.
 */
export function parseJsonBytes(buf: Buffer, opts: JsonBytesOptions = {}): unknown {
  return parse(buf, opts.thresholdBytes ?? JSON_BYTES_THRESHOLD, undefined).value;
}

/** parseJsonBytes, and the raw tokens of member `name` (topLevelMemberTokens) from the same scan. */
export function parseJsonBytesWithTokens(buf: Buffer, name: string, opts: JsonBytesOptions = {}): ParsedJsonBytes {
  return parse(buf, opts.thresholdBytes ?? JSON_BYTES_THRESHOLD, name);
}

/**
 * Separator positions, in a typed array kept from line to line: a JS array pushed to hundreds
 * of thousands of entries is copied into a fresh large-object backing store at every growth
 * (measured: a push then cost many times the scan). Parsing is synchronous, so one store serves
 * all.
 */
class Positions {
  private store = new Uint32Array(4096);
  length = 0;
  /** Entries a store may keep between lines (1 MiB). */
  static readonly KEEP = 256 * 1024;

  push(p: number): void {
    if (this.length === this.store.length) {
      const grown = new Uint32Array(this.store.length * 2);
      grown.set(this.store);
      this.store = grown;
    }
    this.store[this.length++] = p;
  }

  at(i: number): number {
    return this.store[i]!;
  }

  /** Empties the store for the next line, letting a large one go. */
  reset(): void {
    this.length = 0;
    if (this.store.length > Positions.KEEP) this.store = new Uint32Array(4096);
  }
}

const positions = new Positions();

/** A member container over the threshold, built already. */
interface Built {
  start: number;
  end: number;
  value: unknown;
  /** Its member `name`'s raw token, when it is an object in a top-level array. */
  token: string | undefined;
}

/** What building a container reads: the line, the threshold, the separators and built members so far. */
interface Scan {
  buf: Buffer;
  limit: number;
  seps: Positions;
  built: Built[];
}

function parseWhole(text: string, name: string | undefined): ParsedJsonBytes {
  const value: unknown = JSON.parse(text);
  return { value, tokens: name === undefined ? [] : topLevelMemberTokens(text, name) };
}

function parse(buf: Buffer, limit: number, name: string | undefined): ParsedJsonBytes {
  const n = buf.length;
  const first = skipSpace(buf, 0, n);
  if (n <= limit || (buf[first] !== OPEN_BRACE && buf[first] !== OPEN_BRACKET)) return parseWhole(buf.toString('utf8'), name);
  const seps = positions;
  seps.reset();
  try {
    return scan({ buf, limit, seps, built: [] }, first, name);
  } finally {
    seps.reset();
  }
}

/** The one pass over the line from the container opening at `first`. */
function scan(sc: Scan, first: number, name: string | undefined): ParsedJsonBytes {
  const { buf, limit, seps, built } = sc;
  const n = buf.length;
  // Per open container: where it opened, and where its entries in `seps` and `built` begin.
  const starts: number[] = [];
  const sepBase: number[] = [];
  const builtBase: number[] = [];
  let i = first;
  while (i < n) {
    const c = buf[i];
    if (c === QUOTE) {
      i = stringEnd(buf, i);
      continue;
    }
    if (c === COMMA || c === COLON) seps.push(i);
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      starts.push(i);
      sepBase.push(seps.length);
      builtBase.push(built.length);
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      const start = starts.pop();
      if (start === undefined) throw syntaxError('Unexpected bracket', i);
      if (buf[start] !== (c === CLOSE_BRACE ? OPEN_BRACE : OPEN_BRACKET)) throw syntaxError('Mismatched bracket', i);
      const sb = sepBase.pop()!;
      const bb = builtBase.pop()!;
      const end = i + 1;
      if (starts.length === 0) {
        const rest = skipSpace(buf, end, n);
        if (rest !== n) throw syntaxError('Unexpected non-whitespace character after JSON', rest);
        if (end - start <= limit) return parseWhole(buf.toString('utf8', start, end), name);
        return build(sc, start, end, sb, bb, name);
      }
      // A container within the threshold is parsed as part of a run of its parent's members.
      if (end - start > limit) {
        // An object in a top-level array (a batch) keeps its member `name`'s token.
        const inBatch = name !== undefined && c === CLOSE_BRACE && starts.length === 1 && buf[starts[0]!] === OPEN_BRACKET;
        const { value, tokens } = build(sc, start, end, sb, bb, inBatch ? name : undefined);
        built.length = bb;
        built.push({ start, end, value, token: tokens[0] });
      }
      seps.length = sb;
    }
    i++;
  }
  throw syntaxError('Unterminated JSON', n);
}

function skipSpace(buf: Buffer, i: number, end: number): number {
  while (i < end && isSpace(buf[i])) i++;
  return i;
}

function trimEnd(buf: Buffer, start: number, end: number): number {
  while (end > start && isSpace(buf[end - 1])) end--;
  return end;
}

/** `buf[i]` opens a string: the index just past its closing quote (the end when there is none). */
function stringEnd(buf: Buffer, i: number): number {
  let from = i + 1;
  for (;;) {
    const q = buf.indexOf(QUOTE, from);
    if (q === -1) return buf.length;
    let k = q - 1;
    while (buf[k] === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q + 1; // an even run of backslashes: the quote is not escaped
    from = q + 1;
  }
}

/**
 * The container `buf[start, end)` from its separators (`seps` from `sb`) and its built members
 * (`built` from `bb`). A built member must stand alone between its separators (after its key and
 * colon in an object). The members between built ones are parsed in runs of up to `limit` bytes,
 * cut at commas and wrapped in the container's brackets, so JSON.parse checks their syntax and a
 * tiny member costs no call of its own. With `name`, also the raw tokens of member `name`: an
 * object's own (the last), or one per element of an array.
 */
function build(sc: Scan, start: number, end: number, sb: number, bb: number, name: string | undefined): ParsedJsonBytes {
  const { buf, limit, seps, built } = sc;
  const close = end - 1;
  const isObject = buf[start] === OPEN_BRACE;
  // An array's elements come in parts joined once at the end (a built element as a part of one):
  // pushing them one by one regrows a large array many times.
  const parts: unknown[][] = [];
  let members: Record<string, unknown> | undefined;
  const tokens: Array<string | undefined> = [];
  let token: string | undefined;

  const define = (key: string, value: unknown): void => {
    members ??= {};
    // Assigning `__proto__` would set the prototype; JSON.parse makes it an own data property.
    if (key === '__proto__') Object.defineProperty(members, key, { value, writable: true, enumerable: true, configurable: true });
    else members[key] = value;
  };
  /** Members in `buf[from, to)` with separators seps[s0, s1), none built. */
  const run = (from: number, to: number, s0: number, s1: number): void => {
    let s = s0;
    while (from <= to) {
      // Up to the last comma within the limit, or past one member longer than it.
      let cut = to;
      if (to - from > limit) {
        let at = -1;
        for (; s < s1; s++) {
          const p = seps.at(s);
          if (buf[p] !== COMMA) continue;
          if (p - from > limit && at !== -1) break;
          at = s;
          if (p - from > limit) break;
        }
        if (at !== -1) {
          cut = seps.at(at);
          s = at + 1;
        }
      }
      if (skipSpace(buf, from, cut) === cut) {
        if (from === start + 1 && cut === close) return; // an empty container
        throw syntaxError('Unexpected token', cut);
      }
      const text = decoder.decode(buf.subarray(from, cut));
      const wrapped = isObject ? `{${text}}` : `[${text}]`;
      const value = JSON.parse(wrapped) as Record<string, unknown> | unknown[];
      if (Array.isArray(value)) {
        parts.push(value);
        if (name !== undefined) {
          // Scanned for tokens only when some element has the member at all.
          const has = value.some((v) => isRecord(v) && Object.hasOwn(v, name));
          for (const t of has ? topLevelMemberTokens(wrapped, name) : value.map(() => undefined)) tokens.push(t);
        }
      } else {
        // Object.assign sets, so a `__proto__` member is copied by define.
        if (members === undefined) members = value;
        else if (Object.hasOwn(value, '__proto__')) { for (const key of Object.keys(value)) define(key, value[key]); }
        else Object.assign(members, value);
        if (name !== undefined && Object.hasOwn(value, name)) token = topLevelMemberTokens(wrapped, name)[0];
      }
      from = cut + 1;
    }
  };
  const onlySpace = (from: number, to: number): void => {
    const x = skipSpace(buf, from, to);
    if (x !== to) throw syntaxError('Unexpected token', x);
  };

  let from = start + 1; // where the members not read yet begin
  let s = sb; // their first separator
  for (let b = bb; b < built.length; b++) {
    const child = built[b]!;
    let p = s;
    while (p < seps.length && seps.at(p) < child.start) p++;
    // The comma before this member, when members before it are still to be read.
    const m = isObject ? p - 2 : p - 1;
    if (m >= s) {
      if (buf[seps.at(m)] !== COMMA) throw syntaxError('Expected comma', seps.at(m));
      run(from, seps.at(m), s, m);
    } else if (m < s - 1) throw syntaxError('Expected colon', child.start);
    const memberFrom = m >= s ? seps.at(m) + 1 : from;
    if (isObject) {
      const colon = seps.at(p - 1);
      if (buf[colon] !== COLON) throw syntaxError('Expected colon', colon);
      const kx = skipSpace(buf, memberFrom, colon);
      if (buf[kx] !== QUOTE) throw syntaxError('Expected property name', kx);
      const key = JSON.parse(buf.toString('utf8', kx, trimEnd(buf, kx, colon))) as string;
      onlySpace(colon + 1, child.start);
      define(key, child.value);
      // A built member has no token: a container is never a number id.
      if (key === name) token = undefined;
    } else {
      onlySpace(memberFrom, child.start);
      parts.push([child.value]);
      if (name !== undefined) tokens.push(child.token);
    }
    const after = p < seps.length ? seps.at(p) : close;
    onlySpace(child.end, after);
    if (after !== close && buf[after] !== COMMA) throw syntaxError('Expected comma', after);
    from = after + 1;
    s = p + 1;
  }
  if (from <= close) run(from, close, s, seps.length);
  if (!isObject) return { value: concat(parts), tokens };
  if (name !== undefined) tokens.push(token);
  return { value: members ?? {}, tokens };
}

/** The parts joined: concat sizes its result once. In slices, so no call takes too many arguments. */
function concat(parts: unknown[][]): unknown[] {
  if (parts.length === 1) return parts[0]!;
  let out: unknown[] = [];
  for (let i = 0; i < parts.length; i += 8192) out = out.concat(...parts.slice(i, i + 8192));
  return out;
}
