// The background search indexer on a thread of its own (storage/index-worker-thread.ts), with
// its own connection to the database file. Indexing costs from ~50 µs to several ms a row and
// its commit flushes an FTS segment; on the main thread a request that arrived meanwhile waited
// for the whole slice. Here the main thread only flips shared words: `requestStarted` marks a
// request and, when the indexer holds the write lock, waits for it to roll back, which it does
// within one row (indexSlice's `yieldNow`). The thread starts when there are rows to index and
// stops after a while caught up: a worker is a V8 instance of its own (tens of MiB).
import { Worker } from 'node:worker_threads';
import { IndexerShared, SLOT, epochMs } from './index-worker-shared.ts';
import type { IndexerThreadData, IndexerThreadMessage } from './index-worker-thread.ts';

export interface IndexerOptions {
  /** The thread indexes only after this long without a request, in milliseconds. */
  idleMs?: number;
  /** Work per write transaction, in milliseconds. */
  sliceMs?: number;
  /** A thread caught up for this long is stopped. */
  idleStopMs?: number;
  /** A slice failed (the thread retries after a pause). */
  onError: (message: string) => void;
}

/** Atomics.waitAsync is in Node 20 (V8) but not in the TypeScript lib this project targets. */
type WaitAsync = (a: Int32Array, index: number, value: number, timeoutMs: number) => { async: false; value: string } | { async: true; value: Promise<string> };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/** Longest a request waits for the indexer to give the lock back; then SQLite's busy wait takes over. */
const MAX_LOCK_WAIT_MS = 1000;

export class SearchIndexer {
  private readonly shared = new IndexerShared();
  private worker: Worker | undefined;
  /** A kick came while the previous thread was stopping: start a new one when it has exited. */
  private restart = false;
  private closed = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly idleMs: number;
  private readonly sliceMs: number;
  private readonly idleStopMs: number;

  constructor(
    private readonly dbPath: string,
    private readonly opts: IndexerOptions,
  ) {
    this.idleMs = opts.idleMs ?? 20;
    this.sliceMs = opts.sliceMs ?? 5;
    this.idleStopMs = opts.idleStopMs ?? 5000;
  }

  /** Whether the thread runs (tests). */
  get running(): boolean {
    return this.worker !== undefined;
  }

  /**
   * There may be rows past the cursor: wake the thread, or start one when `pending()` says
   * there are (a thread costs its start-up, so not for nothing).
   */
  kick(pending: () => boolean): void {
    if (this.closed) return;
    clearTimeout(this.idleTimer);
    Atomics.add(this.shared.i32, SLOT.wake, 1);
    Atomics.notify(this.shared.i32, SLOT.wake);
    if (this.worker === undefined) {
      if (pending()) this.start();
    } else if (this.stopping) this.restart = true;
  }

  /**
   * A request begins. Resolves once the indexer holds no write transaction (at once, almost
   * always); it will not open another until requestEnded has been called as often.
   */
  requestStarted(): Promise<void> | undefined {
    const w = this.shared.i32;
    Atomics.add(w, SLOT.busy, 1);
    this.shared.lastRequestAt = epochMs();
    if (Atomics.load(w, SLOT.txn) === 0) return undefined;
    const waited = waitAsync(w, SLOT.txn, 1, MAX_LOCK_WAIT_MS);
    return waited.async ? waited.value.then(() => undefined) : undefined;
  }

  requestEnded(): void {
    const w = this.shared.i32;
    this.shared.lastRequestAt = epochMs();
    if (Atomics.sub(w, SLOT.busy, 1) === 1) Atomics.notify(w, SLOT.busy);
  }

  private get stopping(): boolean {
    return this.worker !== undefined && this.generation !== Atomics.load(this.shared.i32, SLOT.stop);
  }

  private generation = 0;

  private start(): void {
    const generation = Atomics.load(this.shared.i32, SLOT.stop);
    this.generation = generation;
    const data: IndexerThreadData = { path: this.dbPath, buffer: this.shared.buffer, generation, idleMs: this.idleMs, sliceMs: this.sliceMs };
    // The boot file registers tsx inside the worker, then loads the TypeScript worker.
    const worker = new Worker(new URL('./index-worker-boot.js', import.meta.url), { workerData: data });
    worker.on('message', (msg: IndexerThreadMessage) => {
      if ('error' in msg) this.opts.onError(msg.error);
      else this.stopWhenIdle(worker);
    });
    worker.on('error', (err) => this.opts.onError(err.stack ?? err.message));
    worker.on('exit', () => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      if (this.restart && !this.closed) {
        this.restart = false;
        this.start();
      }
    });
    // Pending rows must not keep a process alive that is otherwise done.
    worker.unref();
    this.worker = worker;
  }

  private stopWhenIdle(worker: Worker): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.worker === worker) this.stopThread();
    }, this.idleStopMs).unref();
  }

  /** Tells the thread to end after its current slice (it rolls back or commits first). */
  private stopThread(): void {
    const w = this.shared.i32;
    Atomics.add(w, SLOT.stop, 1);
    // Also a wake: a thread about to wait for one (it saw no stop a moment ago) then finds the
    // word changed and does not sleep through the notify below.
    Atomics.add(w, SLOT.wake, 1);
    for (const slot of Object.values(SLOT)) Atomics.notify(w, slot);
  }

  /** Stops the thread and resolves once it has closed its connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.idleTimer);
    const worker = this.worker;
    if (worker === undefined) return;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    // Unreferenced, its exit would not keep the process alive long enough to be waited for.
    worker.ref();
    this.stopThread();
    await exited;
  }
}
