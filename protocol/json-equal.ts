// Equality of two parsed JSON values, key order included: what a request that arrives as new
// objects every turn (its tools, its conversation) is compared with, so that what was derived
// from the last one (digests, token counts, encoded bytes) can be kept instead of made again.

/** Whether two parsed JSON values are the same, key order included. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const kx = Object.keys(x);
  const ky = Object.keys(y);
  if (kx.length !== ky.length) return false;
  for (let i = 0; i < kx.length; i++) {
    const k = kx[i]!;
    if (k !== ky[i] || !sameJson(x[k], y[k])) return false;
  }
  return true;
}
