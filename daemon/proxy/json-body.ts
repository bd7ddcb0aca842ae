// A request body's bytes and its JSON, both ways, at the speed a proxy needs at ~450 KiB of
// history (docs/bench.md, proxy):
// - in: V8 decodes UTF-8 at ~100 MB/s on this machine, so a body whose bytes over 0x7f are all
//   raw UTF-8 inside strings is read as Latin-1 (a copy), parsed, and only its strings holding
//   such bytes decoded after: the values JSON.parse(body.toString('utf8')) gives, in half the time;
// - out: V8 assembles one large stringify result from parts and flattens it on its first use, so
//   encoding a history as one string cost 3-4 ms before a byte was written; each element of a
//   long top-level array (the history) is stringified and encoded on its own instead.
import { isAscii } from 'node:buffer';

const LONG = 16;

/** `Buffer.from(JSON.stringify(body))` for a plain object, byte for byte. */
export function jsonBody(body: Record<string, unknown>): Buffer {
  const parts: Buffer[] = [];
  let pending = '{';
  let first = true;
  for (const [k, v] of Object.entries(body)) {
    // Left out as JSON.stringify leaves them out of an object.
    if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
    pending += `${first ? '' : ','}${JSON.stringify(k)}:`;
    first = false;
    if (!Array.isArray(v) || v.length < LONG) {
      pending += JSON.stringify(v);
      continue;
    }
    parts.push(Buffer.from(`${pending}[`));
    pending = '';
    for (let i = 0; i < v.length; i++) parts.push(Buffer.from(`${i === 0 ? '' : ','}${JSON.stringify(v[i]) ?? 'null'}`));
    pending = ']';
  }
  parts.push(Buffer.from(`${pending}}`));
  return Buffer.concat(parts);
}

/** `JSON.parse(body.toString('utf8'))`, the same values and the same errors. */
export function parseJsonBody(body: Buffer): unknown {
  if (isAscii(body)) return JSON.parse(body.toString('latin1'));
  // A \u escape of a character over 0x7f would be taken for raw UTF-8 once parsed.
  if (escapesHigh(body)) return JSON.parse(body.toString('utf8'));
  return decodeHigh(JSON.parse(body.toString('latin1')));
}

const BACKSLASH_U = Buffer.from('\\u', 'latin1');

/**
 * Whether a `\uXXXX` escape in the body may stand for a character over 0x7f. A `u` after an
 * even run of backslashes is text (source code quoting `\u2014`), not an escape.
 */
function escapesHigh(body: Buffer): boolean {
  for (let i = body.indexOf(BACKSLASH_U); i !== -1; i = body.indexOf(BACKSLASH_U, i + 2)) {
    let start = i;
    while (start > 0 && body[start - 1] === 0x5c) start--;
    if ((i - start) % 2 === 1) continue;
    const code = Number.parseInt(body.toString('latin1', i + 2, i + 6), 16);
    if (!(code < 0x80)) return true;
  }
  return false;
}

/** Characters 0x80-0xff: the bytes of raw UTF-8 read as Latin-1. */
const HIGH = /[\x80-\xff]/;

function utf8(s: string): string {
  return HIGH.test(s) ? Buffer.from(s, 'latin1').toString('utf8') : s;
}

/** The parsed value with every string and key that held raw UTF-8 decoded; fresh objects are changed in place. */
function decodeHigh(v: unknown): unknown {
  if (typeof v === 'string') return utf8(v);
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = decodeHigh(v[i]);
    return v;
  }
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  if (!keys.some((k) => HIGH.test(k))) {
    for (const k of keys) o[k] = decodeHigh(o[k]);
    return o;
  }
  // A key to decode: the object again, keys in their order (defined, so that a key named
  // __proto__ stays an own property, as JSON.parse makes it; a repeated key keeps its first place).
  const out: Record<string, unknown> = {};
  for (const k of keys) Object.defineProperty(out, utf8(k), { value: decodeHigh(o[k]), writable: true, enumerable: true, configurable: true });
  return out;
}
