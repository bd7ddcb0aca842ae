// Checkpoints the daemon's write-ahead log without waiting for the disk on the event loop.
//
// SQLite's own checkpoint runs inside whichever commit takes the log past 1,000 pages, and it
// fsyncs the log and then the database file right there. On a busy disk one such fsync held the
// event loop for 135-155 ms (docs/performance.md, stop 52), and every session waited. Here the
// connection's automatic checkpoint is off, and a checkpoint runs in three steps instead:
//   1. a read transaction on a second connection pins the log's frames as they are now: SQLite
//      does not restart the log (write new frames over old ones) while a reader may need them;
//   2. the log is written out from the thread pool, then the pinned frames are copied into the
//      database file on the loop with `synchronous = OFF` (page writes into the OS's cache, no
//      fsync: a few milliseconds for the default 1,000 pages);
//   3. the database file is written out from the thread pool, and only then is the pin released.
// So a frame is in the database file on disk before the log may be overwritten, the order
// SQLite's own checkpoint keeps with its two fsyncs; a power cut at any step leaves either the
// log or the database file holding every committed page. Once the log is HARD_FRAMES long, one
// checkpoint runs on the loop instead, as SQLite's would, so that the log can start over.
//
// How far the log has run past the last checkpoint is read from the wal-index (the `-shm` file,
// whose header layout is part of SQLite's documented file format): a few bytes read, no query.
import fs from 'node:fs';
import os from 'node:os';
import type { Logger } from 'pino';
import { openReadOnly, syncFileOffLoop, type Db } from './db.ts';

/** Frames past the last checkpoint that start one: SQLite's own `wal_autocheckpoint` default. */
export const CHECKPOINT_FRAMES = 1000;
/** How often the log's length is read, in milliseconds (a few bytes from the `-shm` file). */
export const CHECK_EVERY_MS = 100;
/**
 * The log's length in frames at which it is checkpointed on the event loop instead, as SQLite's
 * own checkpoint does, fsyncs included. The log only starts over from its first frame at a write
 * that finds every frame copied and the database file on disk. Under writes without a pause (an
 * import, the indexer's backlog), each checkpoint here ends with the frames written during its
 * two writes-out still to copy, so the log never starts over: it grew by everything written until
 * the next quiet (289 MiB after 100k appended rows and their indexing, against 5 MiB with
 * SQLite's checkpoint). At this length, one checkpoint on the loop copies the few frames left
 * and makes the next write start the log over: one wait for the disk on the loop per 40 MiB or
 * so written, where SQLite's checkpoint waited at every 4 MiB.
 */
export const HARD_FRAMES = 10 * CHECKPOINT_FRAMES;
/**
 * What the log file is cut back to when it starts over (`journal_size_limit`), in bytes: the
 * file keeps the size it grew to until then.
 */
export const LOG_SIZE_LIMIT = 16 * 1024 * 1024;

// The wal-index header (https://www.sqlite.org/walformat.html), in the host's byte order:
// mxFrame, the last valid frame of the log, at byte 16 of the first header copy; nBackfill, the
// frames already copied into the database file, at byte 96 (the checkpoint info after both copies).
const MX_FRAME_AT = 16;
const N_BACKFILL_AT = 96;
const HEADER_BYTES = 100;

/** The log's length in frames and how many of them a checkpoint has copied into the database file, from an open `-shm` file. */
function readLogState(shm: number, header: Buffer): { frames: number; copied: number } {
  fs.readSync(shm, header, 0, HEADER_BYTES, 0);
  const le = os.endianness() === 'LE';
  return {
    frames: le ? header.readUInt32LE(MX_FRAME_AT) : header.readUInt32BE(MX_FRAME_AT),
    copied: le ? header.readUInt32LE(N_BACKFILL_AT) : header.readUInt32BE(N_BACKFILL_AT),
  };
}

/** `readLogState` for the database file at `dbPath` (opened by some connection in WAL mode), for tests and one-off looks. */
export function logState(dbPath: string): { frames: number; copied: number } {
  const shm = fs.openSync(`${dbPath}-shm`, 'r');
  try {
    return readLogState(shm, Buffer.alloc(HEADER_BYTES));
  } finally {
    fs.closeSync(shm);
  }
}

export interface LogCheckpointerOptions {
  log: Logger;
  /** Frames past the last checkpoint that start one (default CHECKPOINT_FRAMES). */
  frames?: number;
  /** The log's length at which a checkpoint runs on the loop (default HARD_FRAMES). */
  hardFrames?: number;
  /** Milliseconds between two looks at the log's length (default CHECK_EVERY_MS). */
  checkEveryMs?: number;
  /** How a file is written out from the thread pool; syncFileOffLoop unless a test needs to hold or fail it. */
  syncFile?: (path: string) => Promise<void>;
}

export class LogCheckpointer {
  private readonly frames: number;
  private readonly hardFrames: number;
  private readonly syncFile: (path: string) => Promise<void>;
  /** The second connection whose read transaction pins the log during a checkpoint. */
  private readonly pin: Db;
  private readonly pinStatements: { begin: { run(): unknown }; read: { get(): unknown }; end: { run(): unknown } };
  private readonly shm: number;
  private readonly header = Buffer.alloc(HEADER_BYTES);
  private readonly checkEveryMs: number;
  /** The look at the log every checkEveryMs, while something may be written (wake); none in a quiet daemon. */
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Set once a checkpoint failed: SQLite's automatic checkpoint is back on, and none runs here again. */
  private broken = false;
  private closed = false;
  /**
   * The log's length in frames below which no checkpoint starts: set past the current length
   * when one copied nothing (a reader holds the frames), so that it is not tried again until the
   * log has grown by as much again or started over.
   */
  private retryAt = 0;
  /** The log's length when retryAt was set: a shorter log has started over. */
  private retrySetAt = 0;
  /** Checkpoints finished off the loop, and run on it (HARD_FRAMES): what tests can look at. */
  done = 0;
  onLoop = 0;

  /**
   * Turns the connection's automatic checkpoint off and checkpoints from here on. `db` must be a
   * file in WAL mode (openDb's), and this process's only writer of it.
   */
  constructor(
    private readonly db: Db,
    private readonly opts: LogCheckpointerOptions,
  ) {
    this.frames = opts.frames ?? CHECKPOINT_FRAMES;
    this.hardFrames = opts.hardFrames ?? HARD_FRAMES;
    this.syncFile = opts.syncFile ?? syncFileOffLoop;
    this.pin = openReadOnly(db.name);
    this.pinStatements = {
      begin: this.pin.prepare('BEGIN'),
      // Any read starts the transaction's snapshot, and with it the pin on the log.
      read: this.pin.prepare('SELECT 1 FROM sqlite_schema LIMIT 1'),
      end: this.pin.prepare('COMMIT'),
    };
    try {
      this.shm = fs.openSync(`${db.name}-shm`, 'r');
    } catch (err) {
      this.pin.close();
      throw err;
    }
    db.pragma('wal_autocheckpoint = 0');
    db.pragma(`journal_size_limit = ${LOG_SIZE_LIMIT}`);
    this.checkEveryMs = opts.checkEveryMs ?? CHECK_EVERY_MS;
    this.wake();
  }

  /**
   * Something may be written from now on (a request, a unit of idle work): the log is looked at
   * every CHECK_EVERY_MS until a look finds every frame copied, so that a quiet daemon does not
   * wake ten times a second for nothing.
   */
  wake(): void {
    if (this.timer !== undefined || this.broken || this.closed) return;
    this.timer = setInterval(() => this.check(), this.checkEveryMs).unref();
  }

  /** Whether the log is being looked at (wake): for tests. */
  get watching(): boolean {
    return this.timer !== undefined;
  }

  /** Frames in the log that are not in the database file yet. */
  framesWaiting(): number {
    const { frames, copied } = readLogState(this.shm, this.header);
    return Math.max(0, frames - copied);
  }

  /**
   * Starts a checkpoint when the log has run CHECKPOINT_FRAMES past the last one, or runs one on
   * the loop once the log is HARD_FRAMES long.
   */
  private check(): void {
    if (this.running !== undefined || this.broken || this.closed) return;
    const { frames, copied } = readLogState(this.shm, this.header);
    if (frames === copied) {
      clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    // A log that started over is past any wait for a reader.
    if (frames < this.retrySetAt) this.retryAt = this.retrySetAt = 0;
    if (frames < this.retryAt) return;
    if (frames >= this.hardFrames && frames > copied && !this.db.inTransaction) this.checkpointOnLoop(frames, copied);
    else if (frames - copied >= this.frames) this.start();
  }

  /** SQLite's checkpoint, on the loop at the connection's level: every frame no reader holds copied, so that the next write starts the log over. */
  private checkpointOnLoop(frames: number, copied: number): void {
    try {
      this.db.pragma('wal_checkpoint(PASSIVE)');
    } catch (err) {
      this.fail(err);
      return;
    }
    this.onLoop++;
    this.noteProgress(frames, copied);
  }

  /** After a checkpoint that copied nothing, waits for the log to grow by CHECKPOINT_FRAMES before the next. */
  private noteProgress(frames: number, copiedBefore: number): void {
    const after = readLogState(this.shm, this.header);
    const progressed = after.copied > copiedBefore || after.frames < frames;
    this.retrySetAt = progressed ? 0 : after.frames;
    this.retryAt = progressed ? 0 : after.frames + this.frames;
  }

  /**
   * Checkpoints whatever the log holds, however little (the idle work's long quiet), unless one
   * is running. Resolves when it is done; never rejects (a failure is logged, see fail).
   */
  checkpointNow(): Promise<void> {
    if (this.running === undefined && !this.broken && !this.closed && this.framesWaiting() > 0) this.start();
    return this.running ?? Promise.resolve();
  }

  private start(): void {
    const before = readLogState(this.shm, this.header);
    this.running = this.run()
      .then(
        (copied) => {
          if (!copied) return;
          this.done++;
          this.noteProgress(before.frames, before.copied);
        },
        (err: unknown) => this.fail(err),
      )
      .finally(() => {
        this.running = undefined;
      });
  }

  /** Not tried again: SQLite's automatic checkpoint takes over, on the event loop as before. */
  private fail(err: unknown): void {
    this.broken = true;
    clearInterval(this.timer);
    this.timer = undefined;
    this.db.pragma(`wal_autocheckpoint = ${CHECKPOINT_FRAMES}`);
    this.opts.log.error({ err, method: 'checkpoint' }, 'the write-ahead log could not be checkpointed in the background; SQLite checkpoints it at commits again');
  }

  /** One checkpoint; false when the connection was inside a transaction and none could run. */
  private async run(): Promise<boolean> {
    const st = this.pinStatements;
    st.begin.run();
    st.read.get();
    try {
      await this.syncFile(`${this.db.name}-wal`);
      // SQLite refuses to change the level inside a transaction; the next look tries again.
      if (this.db.inTransaction) return false;
      const level = this.db.pragma('synchronous', { simple: true }) as number;
      this.db.pragma('synchronous = OFF');
      try {
        this.db.pragma('wal_checkpoint(PASSIVE)');
      } finally {
        this.db.pragma(`synchronous = ${level}`);
      }
      await this.syncFile(this.db.name);
      return true;
    } finally {
      st.end.run();
    }
  }

  /** Stops checking, waits for a checkpoint under way, and gives the connection its automatic checkpoint back. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
    this.pin.close();
    fs.closeSync(this.shm);
    if (this.db.open) this.db.pragma(`wal_autocheckpoint = ${CHECKPOINT_FRAMES}`);
  }
}
