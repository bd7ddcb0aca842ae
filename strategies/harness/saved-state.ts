// A saved state read and parsed once per write: every request reads a stamp that changes with
// each write and reuses what the kernel parsed while the stamp holds. The rolling summary and the
// session notes use the session's state stamp (storage/transcript/sessions.ts, migration 24, `loadSaved`);
// snapcompact's archive uses its save time (`loadStamped` with that). Callers must not modify
// what they get back.
import { stateStamp } from '../../storage/transcript/sessions.ts';
import type { StrategyInput } from '../contract.ts';
import { type CacheSlot, cacheSlot } from './kernel-cache.ts';

export type SavedSlot<T> = CacheSlot<{ stamp: number | undefined; value: T }>;

export function savedSlot<T>(name: string): SavedSlot<T> {
  return cacheSlot(name);
}

/** `load()` when `stamp` differs from the one the kernel last loaded under, else what it loaded then. */
export function loadStamped<T>(input: StrategyInput, slot: SavedSlot<T>, stamp: number | undefined, load: () => T): T {
  const cached = input.cache.get(slot);
  if (cached !== undefined && cached.stamp === stamp) return cached.value;
  const value = load();
  input.cache.set(slot, { stamp, value });
  return value;
}

/** `load()` when the session's state was written since the kernel last read it, else what it read then. */
export function loadSaved<T>(input: StrategyInput, slot: SavedSlot<T>, load: () => T): T {
  return loadStamped(input, slot, stateStamp(input.db, input.session.sid), load);
}
