// The bytes of a request body the proxy sends upstream: what `Buffer.from(JSON.stringify(body))`
// gives, made in pieces. V8 assembles one large stringify result from parts and flattens it on
// its first use, so encoding a ~450 KiB history as one string cost 3-4 ms before a byte was
// written (docs/bench.md, proxy); each element of a long top-level array (the history) is
// stringified and encoded on its own instead, small strings that encode at once.
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
