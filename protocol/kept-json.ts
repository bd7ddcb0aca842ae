// JSON bytes kept beside the objects they encode. A proxied request body is the agent's whole
// history again, and nearly all of it is made from the same objects as the request before (the
// projection keeps its parts per row, and a wire builds its messages from those once). Encoding
// 450 KB with JSON.stringify and Buffer.from again on every request was a fifth of the proxy's
// CPU a request; this encodes a value once its kept objects are known, so that only what is new
// is serialized.
//
// An object is kept only when its maker says it never changes again (`keepJson`): the bytes are
// taken the first time it is encoded and reused while the object lives. The output equals
// JSON.stringify's byte for byte (the tests check it against JSON.stringify on generated values).
import { ByteChunks, ChunkBuilder } from './byte-chunks.ts';

const keepable = new WeakSet<object>();
const kept = new WeakMap<object, Buffer>();

/**
 * Marks `value` as never changed again, nor anything inside it: its JSON bytes may be kept for
 * as long as it lives. Answers `value`.
 */
export function keepJson<T extends object>(value: T): T {
  keepable.add(value);
  return value;
}

/** The JSON bytes of an object marked with keepJson, taken once. */
function keptBytes(value: object): Buffer {
  let b = kept.get(value);
  if (b === undefined) {
    b = Buffer.from(JSON.stringify(value));
    kept.set(value, b);
  }
  return b;
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
      this.flush();
      this.out.push(keptBytes(v));
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
      this.text += first ? `${JSON.stringify(k)}:` : `,${JSON.stringify(k)}:`;
      first = false;
      this.value(e);
    }
    this.text += '}';
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
