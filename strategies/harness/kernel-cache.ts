// Typed per-kernel memory for derived values (verified cut positions, decoded rows, a recap).
// Each cache is a slot declared once beside the code that owns it, so no string key is shared
// across files; every slot holds one bounded value. Never the source of truth: SQLite is.
// Each kernel's cache knows about how many bytes it holds (`bytes`, an estimate), so the
// daemon bounds all kernels together by memory and not only by their number (daemon/kernels.ts).

/** A named place in a kernel's cache holding one value of type T. */
export interface CacheSlot<T> {
  readonly name: string;
  /** Type witness only; never set. */
  readonly __type?: T;
}

export function cacheSlot<T>(name: string): CacheSlot<T> {
  return Object.freeze({ name });
}

/** Arrays and maps longer than this are sized from a sample of their first entries. */
const SAMPLE = 64;
/** Objects visited per estimate at most; what lies beyond is not counted. */
const MAX_VISITS = 20_000;

/**
 * About how many bytes of heap a value holds: strings at two bytes a unit, a fixed overhead per
 * object, array element and map entry, typed arrays by their length. Long arrays, maps and sets
 * are sized from their first SAMPLE entries and scaled, so an estimate costs little even for a
 * large cache; values shared between two places are counted once per `seen`. WeakMaps cannot
 * be walked and count as empty. A ranking for eviction, not an exact measure.
 */
export function approxBytes(value: unknown, seen: Set<object> = new Set()): number {
  let visits = 0;
  const size = (v: unknown): number => {
    switch (typeof v) {
      case 'string':
        return 16 + 2 * v.length;
      case 'number':
      case 'boolean':
      case 'undefined':
      case 'bigint':
      case 'symbol':
        return 8;
      case 'function':
        return 32;
      case 'object':
        break;
    }
    if (v === null) return 8;
    const o = v;
    if (seen.has(o) || ++visits > MAX_VISITS) return 8;
    seen.add(o);
    if (ArrayBuffer.isView(o)) return 64 + o.byteLength;
    if (o instanceof ArrayBuffer) return 32 + o.byteLength;
    if (o instanceof WeakMap || o instanceof WeakSet) return 32;
    const sampled = (items: Iterable<unknown>, n: number, each: (x: unknown) => number): number => {
      let sum = 0;
      let k = 0;
      for (const x of items) {
        if (k === SAMPLE) break;
        sum += each(x);
        k++;
      }
      return k === 0 ? 0 : (sum / k) * n;
    };
    if (Array.isArray(o)) return 16 + sampled(o, o.length, (x) => 8 + size(x));
    if (o instanceof Map) return 32 + sampled(o, o.size, (e) => 24 + size((e as [unknown, unknown])[0]) + size((e as [unknown, unknown])[1]));
    if (o instanceof Set) return 32 + sampled(o, o.size, (x) => 16 + size(x));
    let sum = 32;
    for (const k of Object.keys(o)) sum += 8 + size((o as Record<string, unknown>)[k]);
    return sum;
  };
  const n = size(value);
  return n;
}

export class KernelCache {
  private readonly values = new Map<CacheSlot<unknown>, unknown>();
  private estimate = 0;

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
    this.estimate = 0;
  }

  /** The estimate of the bytes held, as of the last `measure()`. */
  get bytes(): number {
    return this.estimate;
  }

  /**
   * Re-estimates the bytes held (approxBytes of every value). Values are often mutated in
   * place after they are stored (a cache of cuts fills up), so the owner measures after each
   * piece of work rather than on every set.
   */
  measure(): number {
    let n = 0;
    const seen = new Set<object>();
    for (const v of this.values.values()) n += approxBytes(v, seen);
    this.estimate = n;
    return n;
  }

  /** Estimated bytes per slot name, largest first (for diagnostics). */
  slotSizes(): Array<{ slot: string; bytes: number }> {
    return [...this.values].map(([slot, v]) => ({ slot: slot.name, bytes: approxBytes(v) })).sort((a, b) => b.bytes - a.bytes);
  }
}
