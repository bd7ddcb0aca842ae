// Runs the search index queries (grep's over rows, lcm_grep's over node summaries), grep's scan of
// the rows the index has not reached, and the page walk that sizes the database's parts, on a worker thread, so a query that takes long on a large index never stalls the daemon's event loop. One
// worker, requests answered in order; grep works the same without it (tests and scripts run the
// query inline). The thread starts with the first query: a worker is a V8 instance of its own
// with the TypeScript loader in it (tens of MiB), which a daemon nobody searches does not need;
// for the same reason it stops after a while without queries, and the next one starts it again.
import { Worker } from 'node:worker_threads';
import type { IndexAsk, ScanAsk } from './grep.ts';

/** One query for the thread: over indexed transcript rows, or over one session's node summaries. */
export type SearchAsk =
  | { kind: 'transcript'; ask: IndexAsk }
  | { kind: 'scan'; ask: ScanAsk }
  | { kind: 'summaries'; query: string; sid: number }
  | { kind: 'pages'; stateTables: readonly string[] };

interface Pending {
  resolve: (pairs: Float64Array) => void;
  reject: (err: Error) => void;
}

/** A worker without a query for this long is stopped (its heap and connection freed). */
export const DEFAULT_IDLE_STOP_MS = 60_000;

export class SearchWorker {
  private started: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly idleStopMs: number;
  private readonly onStart: ((kind: SearchAsk['kind']) => void) | undefined;

  /** `onStart`: told each time the thread starts, with the kind of the ask that started it. */
  constructor(
    private readonly dbPath: string,
    opts: { idleStopMs?: number; onStart?: (kind: SearchAsk['kind']) => void } = {},
  ) {
    this.idleStopMs = opts.idleStopMs ?? DEFAULT_IDLE_STOP_MS;
    this.onStart = opts.onStart;
  }

  private get worker(): Worker {
    if (this.started !== undefined) return this.started;
    // The boot file registers tsx inside the worker, then loads the TypeScript worker.
    const worker = new Worker(new URL('./worker-boot.js', import.meta.url), { workerData: { path: this.dbPath } });
    worker.on('message', (msg: { id: number; pairs?: Float64Array; error?: string }) => {
      const p = this.pending.get(msg.id);
      if (p === undefined) return;
      this.pending.delete(msg.id);
      if (this.pending.size === 0) {
        worker.unref();
        this.stopWhenIdle(worker);
      }
      if (msg.error !== undefined || msg.pairs === undefined) p.reject(new Error(`search worker: ${msg.error ?? 'no answer'}`));
      else p.resolve(msg.pairs);
    });
    // A worker stopped for idleness is no longer `started`: its exit concerns no query.
    worker.on('error', (err) => this.started === worker && this.failAll(err));
    worker.on('exit', (code) => this.started === worker && this.failAll(new Error(`search worker exited with code ${code}`)));
    // An idle worker must not keep the process alive; one with a query out must.
    worker.unref();
    this.started = worker;
    return worker;
  }

  /** Whether the thread was started (by a first query) and still runs. */
  get running(): boolean {
    return this.started !== undefined && !this.closed;
  }

  // The searches are bound, so they are handed on as they are: together as `searches`, the
  // `hits` / `scan` / `summaryHits` options of grep, grepTree and a memory tool's search.

  /** The index part of a transcript search, counted and paged in the thread (indexMatches). */
  readonly hits = (ask: IndexAsk): Promise<Float64Array> => this.ask({ kind: 'transcript', ask });

  /** One batch of a transcript search's scan of rows the index has not reached (scanMatches). */
  readonly scan = (ask: ScanAsk): Promise<Float64Array> => this.ask({ kind: 'scan', ask });

  /** Nodes of one session whose summary matches the phrase query, as (node, sid) pairs (SUMMARY_HITS_SQL). */
  readonly summaryHits = (query: string, sid: number): Promise<Float64Array> => this.ask({ kind: 'summaries', query, sid });

  /** The three searches, as the search options of grep, grepTree and the memory tools. */
  readonly searches = { hits: this.hits, scan: this.scan, summaryHits: this.summaryHits } as const;

  /** The file's page bytes per storage part (storage/storage-size.ts pageWalk), packed. */
  pageParts(stateTables: readonly string[]): Promise<Float64Array> {
    return this.ask({ kind: 'pages', stateTables });
  }

  private ask(msg: SearchAsk): Promise<Float64Array> {
    if (this.closed) return Promise.reject(new Error('search worker is closed'));
    const id = this.nextId++;
    clearTimeout(this.idleTimer);
    const starts = this.started === undefined;
    const worker = this.worker;
    if (starts) this.onStart?.(msg.kind);
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) worker.ref();
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, ...msg });
    });
  }

  /** Stops the worker once it has had no query for idleStopMs. */
  private stopWhenIdle(worker: Worker): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.started !== worker || this.pending.size > 0) return;
      this.started = undefined;
      void worker.terminate();
    }, this.idleStopMs).unref();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.idleTimer);
    this.failAll(new Error('search worker is closed'));
    if (this.started === undefined) return;
    this.started.ref();
    await this.started.terminate();
  }

  /** The thread died (an error, or an exit nobody asked for): its queries fail, the next query starts a new one. */
  private failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    const dead = this.started;
    this.started = undefined;
    if (dead !== undefined) void dead.terminate();
  }
}
