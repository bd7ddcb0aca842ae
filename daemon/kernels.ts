// Session kernels: the in-memory side of each loaded session. Work on one session runs in two
// lanes, each one task at a time in arrival order: `transcript` (appends and reads, which keep
// the rows' order) and `engine` (prepare, compact, context, extensions), so an append never
// waits behind a model call; `all` waits for both lanes and holds both (delete, fork).
// Different sessions run concurrently. Idle kernels are unloaded least-recently-used first, while
// more than `maxLoaded` are loaded or their caches together hold more than `maxBytes` (each
// kernel's cache is measured when a task of its session settles; a large cache at most every
// MEASURE_INTERVAL_MS, and otherwise by a sweep that follows within that interval). Unloading
// loses nothing, because state lives in SQLite. A session has at most one slot at any time: a
// slot leaves the map only once it is idle.
import { KernelCache } from '../strategies/harness/kernel-cache.ts';

/** In-memory state of one loaded session. Strategies and handlers keep their caches in `cache`. */
export interface Kernel {
  session: string;
  /** Milliseconds since the epoch when the kernel was loaded. */
  loadedAt: number;
  /** Typed caches of derived values (strategies' and the handlers'), dropped with the kernel. */
  cache: KernelCache;
}

/** Which of a session's queues a task joins. */
export type Lane = 'engine' | 'transcript' | 'all';

interface Slot {
  kernel: Kernel;
  /** Tail of each of the session's task queues. */
  tails: { engine: Promise<unknown>; transcript: Promise<unknown> };
  pending: number;
  /** Set by forget while tasks are queued: the slot is dropped as soon as its queue drains. */
  forgotten: boolean;
  /** When its cache was last measured (performance.now()), and what that measure took (ms). */
  measuredAt: number;
  measureMs: number;
  /** A task settled since that measure without one: the next sweep measures it. */
  stale: boolean;
}

/**
 * How often one kernel's cache is re-measured at most. Measuring walks the cached values (a
 * fraction of a millisecond for a warm kernel), which a session's back-to-back requests would
 * otherwise pay on every one of them; a task settling sooner leaves it to the sweep.
 */
const MEASURE_INTERVAL_MS = 250;
/**
 * A cache whose last measure took less than this (ms) is cheap to measure: every time. Timed,
 * not counted in objects: a few hundred objects with many keys already cost a sizeable share
 * of a warm prepare's own work.
 */
const CHEAP_MEASURE_MS = 0.02;

function freshKernel(session: string): Kernel {
  return { session, loadedAt: Date.now(), cache: new KernelCache() };
}

function remeasure(slot: Slot, now: number): void {
  slot.kernel.cache.measure();
  slot.measureMs = performance.now() - now;
  slot.measuredAt = now;
  slot.stale = false;
}

/** Default bound of all kernels' caches together (estimated bytes). */
export const DEFAULT_KERNEL_CACHE_BYTES = 16 * 2 ** 20;

export class SessionKernels {
  private readonly slots = new Map<string, Slot>();
  private readonly maxLoaded: number;
  private readonly maxBytes: number;
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(opts: { maxLoaded?: number; maxBytes?: number } = {}) {
    this.maxLoaded = opts.maxLoaded ?? 256;
    this.maxBytes = opts.maxBytes ?? DEFAULT_KERNEL_CACHE_BYTES;
  }

  /** Estimated bytes held by every loaded kernel's cache, as last measured. */
  get cacheBytes(): number {
    let n = 0;
    for (const s of this.slots.values()) n += s.kernel.cache.bytes;
    return n;
  }

  get loaded(): number {
    return this.slots.size;
  }

  /** The sessions with a kernel in memory now (the live ones), least recently used first. */
  loadedSessions(): string[] {
    return [...this.slots.keys()];
  }

  /**
   * Runs `task` after every earlier task of the same session in its lane has settled (for
   * `all`: in both lanes, and both wait for it). A failing task does not poison the queue: the
   * next one still runs.
   */
  run<T>(session: string, task: (kernel: Kernel) => Promise<T> | T, lane: Lane = 'engine'): Promise<T> {
    const slot = this.slotFor(session);
    slot.pending += 1;
    const before = lane === 'all' ? Promise.all([slot.tails.engine, slot.tails.transcript]) : slot.tails[lane];
    const result = before.then(() => task(slot.kernel));
    const done = result.then(
      () => this.settled(session, slot),
      () => this.settled(session, slot),
    );
    if (lane !== 'transcript') slot.tails.engine = done;
    if (lane !== 'engine') slot.tails.transcript = done;
    return result;
  }

  /**
   * Drops a session's kernel (after delete). An idle slot goes at once. A busy one (forget is
   * usually called from one of its own tasks) keeps its queue, so a task for the same session
   * arriving now still waits for every earlier one; it gets a fresh kernel, and the slot is
   * dropped when its queue drains unless such a task took it up again. Deleting the slot while
   * tasks wait on it would let a new request start a second queue and run beside the old one.
   */
  forget(session: string): void {
    const slot = this.slots.get(session);
    if (slot === undefined) return;
    if (slot.pending === 0) {
      this.slots.delete(session);
      return;
    }
    slot.kernel = freshKernel(session);
    slot.forgotten = true;
  }

  /** Resolves when every queued task of every session has settled. */
  async idle(): Promise<void> {
    while (this.slots.size > 0 && [...this.slots.values()].some((s) => s.pending > 0)) {
      await Promise.all([...this.slots.values()].flatMap((s) => [s.tails.engine, s.tails.transcript]));
    }
  }

  private slotFor(session: string): Slot {
    let slot = this.slots.get(session);
    if (slot) {
      slot.forgotten = false;
      // Refresh recency: Map iteration order is insertion order.
      this.slots.delete(session);
      this.slots.set(session, slot);
      return slot;
    }
    slot = {
      kernel: freshKernel(session),
      tails: { engine: Promise.resolve(), transcript: Promise.resolve() },
      pending: 0,
      forgotten: false,
      measuredAt: -Infinity,
      measureMs: 0,
      stale: false,
    };
    this.slots.set(session, slot);
    this.evictIdle();
    return slot;
  }

  private settled(session: string, slot: Slot): void {
    slot.pending -= 1;
    this.measure(slot);
    if (slot.pending !== 0 || this.slots.get(session) !== slot) return;
    if (slot.forgotten) this.slots.delete(session);
    else this.evictIdle();
  }

  /** Measures the slot's cache now when due, else leaves it to the sweep. */
  private measure(slot: Slot): void {
    const now = performance.now();
    if (slot.measureMs < CHEAP_MEASURE_MS || now - slot.measuredAt >= MEASURE_INTERVAL_MS) {
      remeasure(slot, now);
      return;
    }
    slot.stale = true;
    this.sweepTimer ??= setTimeout(() => this.sweep(), MEASURE_INTERVAL_MS).unref();
  }

  /** Measures every kernel left stale since its last measure, then applies the bounds. */
  private sweep(): void {
    this.sweepTimer = undefined;
    const now = performance.now();
    for (const slot of this.slots.values()) if (slot.stale) remeasure(slot, now);
    this.evictIdle();
  }

  /**
   * Unloads the least recently used idle kernels while more than `maxLoaded` are loaded or
   * their caches hold more than `maxBytes`. The most recently used kernel stays whatever its
   * size: a session too large for the bound still keeps its caches while it is the one at work.
   */
  private evictIdle(): void {
    let bytes = this.cacheBytes;
    if (this.slots.size <= this.maxLoaded && bytes <= this.maxBytes) return;
    let left = this.slots.size;
    for (const [name, slot] of this.slots) {
      if (this.slots.size <= this.maxLoaded && bytes <= this.maxBytes) break;
      if (--left === 0) break;
      if (slot.pending !== 0) continue;
      this.slots.delete(name);
      bytes -= slot.kernel.cache.bytes;
    }
  }
}
