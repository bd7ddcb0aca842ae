// A saved state (the rolling summary, the session notes) read and parsed once per write: every
// request checks the session's state stamp (storage/sessions.ts, migration 24) and reuses what
// the kernel parsed while the stamp holds. Callers must not modify what they get back.
import { stateStamp } from '../../storage/sessions.ts';
import type { StrategyInput } from '../contract.ts';
import { type CacheSlot, cacheSlot } from './kernel-cache.ts';

export type SavedSlot<T> = CacheSlot<{ stamp: number; value: T }>;

export function savedSlot<T>(name: string): SavedSlot<T> {
  return cacheSlot(name);
}

/** `load()` when the state was written since the kernel last read it, else what it read then. */
export function loadSaved<T>(input: StrategyInput, slot: SavedSlot<T>, load: () => T): T {
  const stamp = stateStamp(input.db, input.session.sid);
  const cached = input.cache.get(slot);
  if (cached !== undefined && cached.stamp === stamp) return cached.value;
  const value = load();
  input.cache.set(slot, { stamp, value });
  return value;
}
