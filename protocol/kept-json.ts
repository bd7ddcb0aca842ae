// JSON bytes kept beside the objects they encode. A proxied request body is the agent's whole
// history again, and nearly all of it is made from the same objects as the request before (the
// projection keeps its parts per row, and a wire builds its messages from those once). Encoding
// the whole body again with JSON.stringify and Buffer.from on every request was a large share of
// the proxy's CPU a request (docs/bench.md); this reuses the bytes of the objects it has encoded
// before, so that only what is new is serialized.
//
// An object is kept only when its maker says it never changes again (`keepJson`): the bytes are
// taken the first time it is encoded and reused while the object lives. The output equals
// JSON.stringify's byte for byte (the tests check it against JSON.stringify on generated values).
import { ByteChunks, ChunkBuilder } from './byte-chunks.ts';

const keepable = new WeakSet<object>();
/**
 * Kept JSON: a short one as its text, which joins the text around it into one UTF-8 encoding
 * (a Buffer of its own for each of a thousand small blocks cost more than their bytes); a long
 * one as its bytes, written as they are.
 */
const kept = new WeakMap<object, Buffer | string>();
/** Kept JSON shorter than this (in UTF-16 units) is kept as text. */
const SHORT_JSON = 2048;

/**
 * Marks `value` as never changed again, nor anything inside it: its JSON bytes may be kept for
 * as long as it lives. Answers `value`.
 */
export function keepJson<T extends object>(value: T): T {
  keepable.add(value);
  return value;
}

/**
 * The JSON bytes of `value`, taken once (by `encode` when given: bytes equal to JSON.stringify's
 * found another way) and marking it kept: nothing may change it afterwards.
 */
export function keptBytes(value: object, encode?: () => Buffer): Buffer {
  const k = kept.get(value);
  if (Buffer.isBuffer(k)) return k;
  const b = k !== undefined ? Buffer.from(k) : encode === undefined ? Buffer.from(JSON.stringify(value)) : encode();
  kept.set(value, b);
  keepable.add(value);
  return b;
}

/** Object keys as they are written (`"role":`): a wire's few keys come back on every message. */
const quotedKeys = new Map<string, string>();
const MAX_QUOTED_KEYS = 4096;

function quotedKey(k: string): string {
  let q = quotedKeys.get(k);
  if (q === undefined) {
    q = `${JSON.stringify(k)}:`;
    if (quotedKeys.size < MAX_QUOTED_KEYS) quotedKeys.set(k, q);
  }
  return q;
}

/** Whether JSON.stringify would leave this object member out (and write an array element as null). */
function skipped(v: unknown): boolean {
  return v === undefined || typeof v === 'function' || typeof v === 'symbol';
}

/** Serializes a value into pieces: pending text, and the kept bytes of kept objects as they are. */
class Encoder {
  private readonly out = new ChunkBuilder();
  private text = '';

  value(v: unknown): void {
    if (typeof v !== 'object' || v === null) {
      this.text += JSON.stringify(v);
      return;
    }
    if (keepable.has(v)) {
      this.kept(v);
      return;
    }
    // toJSON (a Date) and boxed primitives: JSON.stringify's own rules, for this value whole.
    if (typeof (v as { toJSON?: unknown }).toJSON === 'function' || v instanceof Number || v instanceof String || v instanceof Boolean) {
      this.text += JSON.stringify(v);
      return;
    }
    if (Array.isArray(v)) {
      this.text += '[';
      for (let i = 0; i < v.length; i++) {
        if (i > 0) this.text += ',';
        const e: unknown = v[i];
        if (skipped(e)) this.text += 'null';
        else this.value(e);
      }
      this.text += ']';
      return;
    }
    this.text += '{';
    let first = true;
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      const e = o[k];
      if (skipped(e)) continue;
      const key = quotedKey(k);
      this.text += first ? key : `,${key}`;
      first = false;
      this.value(e);
    }
    this.text += '}';
  }

  private kept(v: object): void {
    let k = kept.get(v);
    if (k === undefined) {
      const json = JSON.stringify(v);
      k = json.length < SHORT_JSON ? json : Buffer.from(json);
      kept.set(v, k);
    }
    if (typeof k === 'string') {
      this.text += k;
      return;
    }
    this.flush();
    this.out.push(k);
  }

  finish(): ByteChunks {
    this.flush();
    return this.out.finish();
  }

  private flush(): void {
    if (this.text === '') return;
    this.out.push(Buffer.from(this.text));
    this.text = '';
  }
}

/**
 * JSON.stringify(value) as UTF-8 bytes, in pieces: every object inside it marked with keepJson
 * is written with its kept bytes. `value` must be an object or array (a whole request body).
 */
export function encodeJson(value: object): ByteChunks {
  const e = new Encoder();
  e.value(value);
  return e.finish();
}
