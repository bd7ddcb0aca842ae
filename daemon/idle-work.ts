// The daemon's background work between requests: packing long row bodies still stored as text,
// indexing new rows for search, indexing lcm's new summaries, merging both indexes' segments,
// giving free pages back to the file system, and checkpointing the write-ahead log. None of it may make a request wait
// long, and SQLite cannot stop a statement halfway, so the work is cut into short units, one per
// event-loop turn, each started only while the daemon is quiet; a request that arrives during a
// unit waits for that unit alone. Which unit comes next, and how big each one is, is decided
// here; what a unit does is storage's (storage/transcript/row-packing.ts, storage/search/indexer.ts,
// storage/state/lcm-tree.ts).
import type { Logger } from 'pino';
import { SLICE_MS } from '../protocol/time-slice.ts';
import { flushLogOffLoop, freePages, releaseFreePages, type Db } from '../storage/db.ts';
import { packPending } from '../storage/transcript/row-packing.ts';
import { indexWaitingSummaries, mergeSummaryIndex } from '../storage/state/lcm-tree.ts';
import { indexPending, mergeSearchIndex, seqsBehindIndex } from '../storage/search/indexer.ts';

/** Quiet (no request in flight, none for this long, in ms) before the first unit starts. */
export const QUIET_MS = 20;
/**
 * Quiet after which the daemon counts as idle, not just between two calls of a busy client:
 * an agent waiting on its model leaves seconds. Units may then be longer, and checkpoints run.
 */
export const LONG_QUIET_MS = 150;

/**
 * Rows (in seqs) the search index may lag by before it stops waiting for quiet: its units then
 * also run while a request is in flight, and between calls once quiet has not come for
 * STARVED_MS, whenever no request's bytes are moving. A search reads each row the index has not
 * reached (tens of µs a row, on the search worker), and an import or a run of searches leaves
 * the daemon never quiet, so waiting for quiet let an import's backlog last a minute
 * (docs/performance.md, "Search right after an import"). An agent's turns add a few rows each,
 * far below this: the quiet between its calls indexes them.
 */
export const BACKLOG_ROWS = 1024;

/**
 * How long a backlog waits between calls for a quiet unit before it runs without one. Agents
 * calling with pauses between leave quiet often enough, and a unit started between two of their
 * calls is what the next one waits for (measured: prepare latency with the indexer working read
 * up to 1.44x of the indexer off when a backlog's units ran between calls at once, docs/performance.md).
 */
export const STARVED_MS = 250;

/** How soon to look again, in ms, when a backlog's unit waits for bytes in transit to arrive. */
const TRANSIT_RECHECK_MS = 1;

/**
 * Free pages left in the file after a release: room for the next writes, so pages are not moved
 * out only to be allocated again at once. A 32nd of the pages in use, at most 1024 (4 MiB at
 * 4 KiB pages): a flat 4 MiB was a large share of a small file's text.
 */
export function freePagesKept(db: Db): number {
  const used = (db.pragma('page_count', { simple: true }) as number) - freePages(db);
  return Math.min(1024, Math.floor(used / 32));
}

/**
 * What one unit aims to take, in ms, by how long the daemon has been quiet: about the most a
 * request arriving during it waits. Each kind of unit adapts its size to stay near its pace's
 * target, since each costs about in proportion to its own measure: characters indexed, pages
 * merged, bytes packed.
 * Short units cost throughput (each commit adds an index segment for merging to fold in), so
 * they are only used where a request may be close: between calls of a busy client. A backlog
 * (BACKLOG_ROWS) runs at the length of the slices long requests give way at (SLICE_MS), whether
 * requests are in flight or not: at 1 ms its segments were a handful of rows each, and merging
 * them cost more than indexing.
 */
export const UNIT_MS = { short: 1, backlog: SLICE_MS, long: 8 } as const;
type Pace = keyof typeof UNIT_MS;

const ROWS = { min: 1, start: 16, max: 2048 } as const;
const CHARS = { min: 1_000, start: 8_000, max: 256_000 } as const;
const PAGES = { min: 4, start: 16, max: 256 } as const;
const RELEASE = { min: 16, start: 256, max: 65_536 } as const;
const PACK_ROWS = { min: 16, start: 256, max: 4096 } as const;
const PACK_BYTES = { min: 16_384, start: 65_536, max: 4_194_304 } as const;

/**
 * Sizes of the next pack unit (rows looked at, bytes compressed), index unit (rows, characters),
 * merge unit and release unit (pages) at one pace.
 */
interface Sizes {
  packRows: number;
  packBytes: number;
  rows: number;
  chars: number;
  pages: number;
  release: number;
}

function startSizes(): Sizes {
  return { packRows: PACK_ROWS.start, packBytes: PACK_BYTES.start, rows: ROWS.start, chars: CHARS.start, pages: PAGES.start, release: RELEASE.start };
}

/** Grows a unit's size when it ran well under its target, shrinks it when it ran over. */
function adapt(size: number, tookMs: number, targetMs: number, bounds: { min: number; max: number }): number {
  if (tookMs < targetMs / 2) return Math.min(bounds.max, size * 2);
  if (tookMs > targetMs) return Math.max(bounds.min, Math.floor(size / 2));
  return size;
}

export interface IdleWorkHost {
  /** A request is in flight or arriving: not idle, whatever the clock says. */
  busy(): boolean;
  /**
   * Bytes are moving in or out of the daemon right now (a request arriving, a reply going out,
   * a client about to call again): a backlog's units, which run while requests are in flight,
   * still wait for these.
   */
  moving(): boolean;
  /** When the last request arrived or finished (performance.now()). */
  lastRequestAt(): number;
}

export interface IdleWorkOptions {
  /**
   * Index rows and lcm summaries for search (and merge both indexes); off, only packing, free-page
   * releases and checkpoints run, and lcm_grep indexes the summaries it needs itself.
   */
  indexer: boolean;
  log: Logger;
  /** How the log is written out after unsynced units; flushLogOffLoop unless a test needs it to fail. */
  flushLog?: (db: Db) => Promise<void>;
  /**
   * The daemon's checkpoints (storage/log-checkpoint.ts), which wait for the disk off the event
   * loop: `now` in the long quiet, `wake` whenever something may be written (a request, a unit).
   * Without them, SQLite's checkpoint on the loop in the long quiet.
   */
  checkpoints?: { now(): void; wake(): void };
}

export class IdleWork {
  private next: { cancel(): void } | undefined;
  private stopped = false;
  private readonly sizes: Record<Pace, Sizes> = {
    short: startSizes(),
    backlog: startSizes(),
    long: startSizes(),
  };
  /**
   * Rows past the packer's cursor may hold bodies stored as text. Only a file from before
   * migration 22 has such rows (appends pack their own), so this is true from the start until
   * the packer has caught up once, and never set again.
   */
  private packDue = true;
  /** The last unit run was a pack unit. */
  private lastWasPack = false;
  /** The index got segments since the last merge step that found nothing to merge. */
  private mergeDue = true;
  /** The next index unit may find rows (an append happened since indexing caught up). */
  private indexDue = true;
  /** seqsBehindIndex as of the last append or index unit: at BACKLOG_ROWS, units may stop waiting for quiet. */
  private behind = 0;
  /** When the last unit ran in quiet (performance.now()): a backlog without one for STARVED_MS stops waiting for it. */
  private lastQuietUnitAt = -Infinity;
  /** The last unit run was an index unit. */
  private lastWasIndex = false;
  /**
   * lcm summaries may wait for their index: any request may have run a compaction that wrote
   * some (storage/state/lcm-tree.ts), so every request sets this, and a unit that finds none clears it.
   */
  private summariesDue = true;
  /** The summaries' index got segments since its last merge step that found nothing to merge. */
  private summaryMergeDue = true;
  /** Something was committed since the last checkpoint (and may have freed pages). */
  private logDirty = true;
  /** Free pages may be over freePagesKept. */
  private releaseDue = true;
  /**
   * Units committed without an fsync since the last flush of the log began (flushLog), and
   * whether one is running.
   */
  private unflushed = false;
  private flushing = false;
  /** A flush failed: logged once, and not tried again (appends' own fsyncs still write the log). */
  private flushBroken = false;
  /** Units run (and log flushes finished), by kind: what tests can look at. */
  readonly done = { pack: 0, index: 0, merge: 0, summaries: 0, summaryMerge: 0, release: 0, checkpoint: 0, flush: 0 };

  constructor(
    private readonly db: Db,
    private readonly host: IdleWorkHost,
    private readonly opts: IdleWorkOptions,
  ) {}

  /** Rows were added (appended, imported, forked): index them at the next quiet. */
  rowsAdded(): void {
    this.indexDue = true;
    if (this.opts.indexer) this.behind = seqsBehindIndex(this.db);
    this.requestDone();
  }

  /** A request finished; it may have committed, so a checkpoint is due at the next long quiet. */
  requestDone(): void {
    this.opts.checkpoints?.wake();
    this.logDirty = true;
    this.summariesDue = true;
    this.releaseDue = true;
    this.schedule();
  }

  /** Stops for good: nothing scheduled runs, and nothing more is scheduled. */
  stop(): void {
    this.stopped = true;
    this.next?.cancel();
    this.next = undefined;
  }

  /** Whether any unit is due; with none, nothing is scheduled until the next request. */
  private due(): boolean {
    return this.packDue || this.indexWork() || this.releaseDue || this.logDirty;
  }

  /** Index or merge units (rows' or summaries') are due: they run after the short quiet. */
  private indexWork(): boolean {
    return this.opts.indexer && (this.indexDue || this.mergeDue || this.summariesDue || this.summaryMergeDue);
  }

  private schedule(): void {
    if (this.next !== undefined || this.stopped || !this.due()) return;
    const wait = this.waitFor();
    if (wait > 0) {
      const timer = setTimeout(() => {
        this.next = undefined;
        this.schedule();
      }, wait + 1);
      this.next = { cancel: () => clearTimeout(timer) };
      return;
    }
    const turn = setImmediate(() => {
      this.next = undefined;
      if (this.stopped) return;
      if (this.waitFor() > 0) {
        this.schedule();
        return;
      }
      this.runUnit();
      this.flushLog();
      this.schedule();
    });
    this.next = { cancel: () => clearImmediate(turn) };
  }

  /**
   * The index lags by a backlog (an import, a burst of appends): its units run at the backlog
   * pace whenever no bytes are moving, while a request is in flight, and between calls once
   * quiet has not come for STARVED_MS.
   */
  private backlog(): boolean {
    if (!this.opts.indexer || !this.indexDue || this.behind < BACKLOG_ROWS) return false;
    // A request in flight with no bytes moving is waiting (on the search worker, a summarizer,
    // the disk), and the loop is free; or it is long work between two of its slices, and a unit
    // is one slice more for it (a compaction takes longer while a backlog lasts). Between calls,
    // the next one is likely close: only once quiet has not come for a while.
    return this.host.busy() || performance.now() - this.lastQuietUnitAt >= STARVED_MS;
  }

  /** Milliseconds until the quiet the next unit needs (0: now), given what is due. */
  private waitFor(): number {
    if (this.backlog()) return this.host.moving() ? TRANSIT_RECHECK_MS : 0;
    if (this.host.busy()) return QUIET_MS;
    const needs = this.packDue || this.indexWork() ? QUIET_MS : LONG_QUIET_MS;
    return Math.max(0, needs - this.quietFor());
  }

  /** A unit committed without an fsync: a checkpoint is due at the long quiet, a flush of the log now. */
  private committedUnsynced(): void {
    this.opts.checkpoints?.wake();
    this.logDirty = true;
    this.unflushed = true;
  }

  /**
   * Writes the log out from the thread pool after units that committed without an fsync, so
   * that the next append's fsync does not also wait for their bytes (measured: append latency
   * with the indexer working rose by the index's writes between two appends). One at a time.
   */
  private flushLog(): void {
    if (!this.unflushed || this.flushing || this.flushBroken || this.stopped) return;
    this.unflushed = false;
    this.flushing = true;
    (this.opts.flushLog ?? flushLogOffLoop)(this.db)
      .then(
        () => void this.done.flush++,
        (err: unknown) => {
          this.flushBroken = true;
          this.opts.log.error({ err, method: 'idle-work' }, 'the write-ahead log could not be flushed in the background; appends write it with their own fsync');
        },
      )
      .finally(() => {
        this.flushing = false;
        this.flushLog();
      });
  }

  private quietFor(): number {
    return performance.now() - this.host.lastRequestAt();
  }

  /** One merge step of an index (the rows' or the summaries'), its size adapted; whether it merged anything. */
  private mergeStep(merge: (db: Db, pages: number) => boolean, size: Sizes, started: number, target: number): boolean {
    const merged = merge(this.db, size.pages);
    if (merged) {
      size.pages = adapt(size.pages, performance.now() - started, target, PAGES);
      this.committedUnsynced();
    }
    return merged;
  }

  private runUnit(): void {
    const quiet = !this.host.busy() && this.quietFor() >= QUIET_MS;
    const pace: Pace = quiet && this.quietFor() >= LONG_QUIET_MS ? 'long' : this.backlog() ? 'backlog' : 'short';
    if (quiet) this.lastQuietUnitAt = performance.now();
    const size = this.sizes[pace];
    const target = UNIT_MS[pace];
    const started = performance.now();
    try {
      // The packer's backlog (an upgraded file's old rows) takes turns with the index's units,
      // so that searches do not wait for it.
      const indexWaits = this.opts.indexer && (this.indexDue || this.mergeDue);
      this.lastWasPack = this.packDue && !(this.lastWasPack && indexWaits);
      if (this.lastWasPack) {
        const looked = packPending(this.db, size.packRows, size.packBytes);
        const took = performance.now() - started;
        this.done.pack++;
        if (looked === 0) {
          this.packDue = false;
          return;
        }
        size.packBytes = adapt(size.packBytes, took, target, PACK_BYTES);
        size.packRows = adapt(size.packRows, took, target, PACK_ROWS);
        this.committedUnsynced();
        return;
      }
      // While merging has work, index and merge units alternate, so the segments indexing adds
      // never pile up ahead of the merging.
      if (this.opts.indexer && this.indexDue && !(this.mergeDue && this.lastWasIndex)) {
        const indexed = indexPending(this.db, size.rows, size.chars);
        const took = performance.now() - started;
        this.done.index++;
        this.lastWasIndex = true;
        this.behind = seqsBehindIndex(this.db);
        if (indexed === 0) {
          this.indexDue = false;
          return;
        }
        size.chars = adapt(size.chars, took, target, CHARS);
        // Rows are fetched (and their text derived) before the character budget stops the
        // batch, so the row count never runs far ahead of what the budget lets through.
        size.rows = Math.min(adapt(size.rows, took, target, ROWS), Math.max(ROWS.min, indexed * 2));
        this.mergeDue = true;
        this.committedUnsynced();
        return;
      }
      if (this.opts.indexer && this.mergeDue) {
        this.done.merge++;
        this.lastWasIndex = false;
        this.mergeDue = this.mergeStep(mergeSearchIndex, size, started, target);
        return;
      }
      // lcm's summaries once the rows' index has caught up: a search finds rows by it first, and
      // lcm_grep indexes the summaries it needs itself when idle time has not.
      if (this.opts.indexer && this.summariesDue) {
        const indexed = indexWaitingSummaries(this.db, null, size.chars);
        this.done.summaries++;
        if (indexed === 0) {
          this.summariesDue = false;
          return;
        }
        size.chars = adapt(size.chars, performance.now() - started, target, CHARS);
        this.summaryMergeDue = true;
        this.committedUnsynced();
        return;
      }
      if (this.opts.indexer && this.summaryMergeDue) {
        this.done.summaryMerge++;
        this.summaryMergeDue = this.mergeStep(mergeSummaryIndex, size, started, target);
        return;
      }
      // From here on the daemon has been quiet for LONG_QUIET_MS (waitFor).
      if (this.releaseDue) {
        const excess = freePages(this.db) - freePagesKept(this.db);
        if (excess > 0) {
          const released = releaseFreePages(this.db, Math.min(excess, size.release));
          this.done.release++;
          size.release = adapt(size.release, performance.now() - started, target, RELEASE);
          this.releaseDue = released > 0 && released < excess;
          this.committedUnsynced();
          return;
        }
        this.releaseDue = false;
      }
      if (this.logDirty) {
        if (this.opts.checkpoints === undefined) this.db.pragma('wal_checkpoint(PASSIVE)');
        else this.opts.checkpoints.now();
        this.done.checkpoint++;
        this.logDirty = false;
      }
    } catch (err) {
      // A unit that failed is not retried in a loop: the next write asks again (the packer's
      // backlog, at the next start).
      this.packDue = false;
      this.indexDue = false;
      this.mergeDue = false;
      this.summariesDue = false;
      this.summaryMergeDue = false;
      this.releaseDue = false;
      this.logDirty = false;
      this.opts.log.error({ err, method: 'idle-work' }, 'background work failed; it is tried again after the next write (meanwhile searches scan unindexed rows)');
    }
  }
}
