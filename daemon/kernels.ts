// Session kernels: the in-memory side of each loaded session. Work on one session runs one
// task at a time, in arrival order; different sessions run concurrently. Idle kernels are
// unloaded least-recently-used first; unloading loses nothing, because state lives in SQLite.
// A session has at most one queue at any time: a slot leaves the map only once it is idle.
import { KernelCache } from '../strategies/harness/kernel-cache.ts';

/** In-memory state of one loaded session. Strategies and handlers keep their caches in `cache`. */
export interface Kernel {
  session: string;
  /** Milliseconds since the epoch when the kernel was loaded. */
  loadedAt: number;
  /** Typed caches of derived values (strategies' and the handlers'), dropped with the kernel. */
  cache: KernelCache;
}

interface Slot {
  kernel: Kernel;
  /** Tail of the session's task queue. */
  tail: Promise<unknown>;
  pending: number;
  /** Set by forget while tasks are queued: the slot is dropped as soon as its queue drains. */
  forgotten: boolean;
}

function freshKernel(session: string): Kernel {
  return { session, loadedAt: Date.now(), cache: new KernelCache() };
}

export class SessionKernels {
  private readonly slots = new Map<string, Slot>();
  private readonly maxLoaded: number;

  constructor(opts: { maxLoaded?: number } = {}) {
    this.maxLoaded = opts.maxLoaded ?? 256;
  }

  get loaded(): number {
    return this.slots.size;
  }

  /**
   * Runs `task` after every earlier task of the same session has settled. A failing task does
   * not poison the queue: the next one still runs.
   */
  run<T>(session: string, task: (kernel: Kernel) => Promise<T> | T): Promise<T> {
    const slot = this.slotFor(session);
    slot.pending += 1;
    const result = slot.tail.then(() => task(slot.kernel));
    slot.tail = result.then(
      () => this.settled(session, slot),
      () => this.settled(session, slot),
    );
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
      await Promise.all([...this.slots.values()].map((s) => s.tail));
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
    slot = { kernel: freshKernel(session), tail: Promise.resolve(), pending: 0, forgotten: false };
    this.slots.set(session, slot);
    this.evictIdle();
    return slot;
  }

  private settled(session: string, slot: Slot): void {
    slot.pending -= 1;
    if (slot.pending !== 0 || this.slots.get(session) !== slot) return;
    if (slot.forgotten) this.slots.delete(session);
    else this.evictIdle();
  }

  /** Unloads the least recently used idle kernels while more than `maxLoaded` are loaded. */
  private evictIdle(): void {
    if (this.slots.size <= this.maxLoaded) return;
    for (const [name, slot] of this.slots) {
      if (this.slots.size <= this.maxLoaded) break;
      if (slot.pending === 0) this.slots.delete(name);
    }
  }
}
