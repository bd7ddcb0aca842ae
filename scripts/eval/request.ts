// The eval's own arithmetic, kept apart from the replay so a test can check it on hand-made
// cases: how a request is serialized for the prompt-cache simulation, the cached prefix, the
// tokens that prefix stands for, and what a request costs at a price.
import type { PlainInput, ToolSpec } from '../../protocol/prepared.ts';
import type { EvalPrice } from './prices.ts';

export interface RequestParts {
  system: string;
  tools: readonly ToolSpec[];
  inputs: readonly PlainInput[];
}

/**
 * The request as a provider's cache sees it, in order: system prompt, tool schemas, then each
 * input. JSON.stringify of the daemon's answer is deterministic (key order is the daemon's).
 */
export function serializeRequest(r: RequestParts): Buffer {
  return Buffer.from([JSON.stringify(r.system), JSON.stringify(r.tools), ...r.inputs.map((x) => JSON.stringify(x))].join('\n'), 'utf8');
}

/** Bytes of the longest byte-identical prefix of `a` and `b`. */
export function commonPrefixBytes(a: Buffer, b: Buffer): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  // Eight bytes at a time while they agree, then byte by byte.
  while (i + 8 <= n && a.readBigUInt64LE(i) === b.readBigUInt64LE(i)) i += 8;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** Cached tokens for a request of `inputTokens` whose first `prefixBytes` of `totalBytes` were cached: the same tokens per byte. */
export function cachedTokens(inputTokens: number, prefixBytes: number, totalBytes: number): number {
  return totalBytes === 0 ? 0 : Math.round((inputTokens * prefixBytes) / totalBytes);
}

/**
 * The input cost of one request in dollars: cached tokens at the cache-read price, the rest at
 * the cache-write price (a provider that caches writes the new suffix), each falling back to
 * the plain input price when the model has none.
 */
export function requestCost(inputTokens: number, cached: number, price: EvalPrice): number {
  const read = price.cache_read ?? price.input;
  const write = price.cache_write ?? price.input;
  return (cached * read + (inputTokens - cached) * write) / 1e6;
}

/** A summarizer call's cost: its prompt at the input price, its answer at the output price. */
export function summarizerCost(tokensIn: number, tokensOut: number, price: EvalPrice): number {
  return (tokensIn * price.input + tokensOut * price.output) / 1e6;
}

/** The nearest-rank percentile (0-100) of `xs`; 0 for none. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
