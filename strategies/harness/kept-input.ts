// Inputs made from saved text (rolling's summary, the notes, the artifact ledger), kept in the
// kernel while that text stays the same. The saved text is one string per save (the state is
// parsed once per save, saved-state.ts), but the input around it used to be built again on
// every request: a new concatenation that the estimate then flattened and scanned (estimate.ts
// keeps a size on the part object, which a new object does not have) and that the reply looked
// up by content to find its JSON. Kept, the projection hands on the same part object from
// request to request, measured and encoded once.
import type { PlainInput } from '../../protocol/prepared.ts';
import type { CacheSlot, KernelCache } from './kernel-cache.ts';

/** The input made of `source` the last time, and `source` itself. */
export interface KeptInput {
  source: string;
  input: PlainInput;
}

/** Declares a kept input's slot: `cacheSlot<KeptInput>(name)`, so every caller names its own. */
export type KeptInputSlot = CacheSlot<KeptInput>;

/**
 * `make(source)`, or the input it made last time for this slot when `source` is the same text:
 * the same string (the usual case, compared by reference) or an equal one.
 */
export function keptInput(cache: KernelCache, slot: KeptInputSlot, source: string, make: (source: string) => PlainInput): PlainInput {
  const kept = cache.get(slot);
  if (kept !== undefined && kept.source === source) return kept.input;
  const input = make(source);
  cache.set(slot, { source, input });
  return input;
}
