// Typed per-kernel memory for derived values (verified cut positions, decoded rows, a recap).
// Each cache is a slot declared once beside the code that owns it, so no string key is shared
// across files; every slot holds one bounded value. Never the source of truth: SQLite is.

/** A named place in a kernel's cache holding one value of type T. */
export interface CacheSlot<T> {
  readonly name: string;
  /** Type witness only; never set. */
  readonly __type?: T;
}

export function cacheSlot<T>(name: string): CacheSlot<T> {
  return Object.freeze({ name });
}

export class KernelCache {
  private readonly values = new Map<CacheSlot<unknown>, unknown>();

  get<T>(slot: CacheSlot<T>): T | undefined {
    return this.values.get(slot) as T | undefined;
  }

  set<T>(slot: CacheSlot<T>, value: T): void {
    this.values.set(slot, value);
  }

  /** The slot's value, computed and stored when absent. */
  getOrSet<T>(slot: CacheSlot<T>, make: () => T): T {
    if (this.values.has(slot)) return this.values.get(slot) as T;
    const v = make();
    this.values.set(slot, v);
    return v;
  }

  clear(): void {
    this.values.clear();
  }
}
