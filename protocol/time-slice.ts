// Time slicing for long synchronous work, so one session's scan or computation never holds the
// event loop (and every other session) for long: generators that yield between steps, run to
// the end at once or a slice at a time. Nothing here knows about storage; the storage scans, the
// extractive summarizer and the strategies all slice their work with it.
//
// A turn also gives way to bytes in transit. A reply larger than the socket's buffer goes out
// over several turns of the loop, and a long request line comes in over several; with a long
// compaction running, each of those turns used to wait for one of its slices, so a 300 KB
// prepare reply reached its agent only after two or three of them. Whoever serves connections
// registers what is still moving on them (`giveWayTo`), and long work's turn (`giveWay`) waits,
// bounded, until that has moved.
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * What is moving on a server's connections: undefined when nothing is, otherwise a count of the
 * bytes moved so far, which grows while the transfer makes progress.
 */
export type Transit = () => number | undefined;

const transits = new Set<Transit>();
/** The bytes moved when a wait last ended because nothing moved (see giveWay). */
let stalledAt: number | undefined;

/** A transfer that moved nothing for this long is not waited for further (a client not reading). */
export const GIVE_WAY_STALL_MS = 10;
/** The longest a turn waits for transfers, however they progress. */
export const GIVE_WAY_MAX_MS = 50;

/** Long work gives way to `transit` at each turn from now on; call the result to stop. */
export function giveWayTo(transit: Transit): () => void {
  transits.add(transit);
  return () => transits.delete(transit);
}

/** Transfers of a server that are not a connection of its own (request bodies), as a Transit. */
export class TransitTally {
  private active = 0;
  private moved = 0;

  /** One more transfer under way; call the result once it is over (more than once is harmless). */
  begin(): () => void {
    this.active++;
    let over = false;
    return () => {
      if (over) return;
      over = true;
      this.active--;
    };
  }

  /** Bytes of some transfer moved. */
  add(bytes: number): void {
    this.moved += bytes;
  }

  readonly transit: Transit = () => (this.active > 0 ? this.moved : undefined);
}

/** Bytes moved by every registered transfer, or undefined when none is moving. */
function moving(): number | undefined {
  let moved: number | undefined;
  for (const t of transits) {
    const m = t();
    if (m !== undefined) moved = (moved ?? 0) + m;
  }
  return moved;
}

/** One turn of the event loop: whatever I/O is queued runs first. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Long work's turn between two slices: a turn of the event loop, then a wait while bytes are in
 * transit on a registered server's connections, until they have moved, until they stop moving
 * for GIVE_WAY_STALL_MS, or for GIVE_WAY_MAX_MS at most. Transfers that stalled a wait are not
 * waited for again until they move: a client that holds half a request, or stops reading,
 * slows long work by one stall, not by one per slice. Not for a short hop off a request's stack
 * (a reply's bookkeeping): that task would hold its session's lane through the wait.
 */
export async function giveWay(): Promise<void> {
  await yieldToEventLoop();
  if (transits.size === 0) return;
  let moved = moving();
  // Transfers that stalled a wait before and have not moved since are not waited for again.
  if (moved === undefined || moved === stalledAt) return;
  const started = performance.now();
  let progressed = started;
  for (;;) {
    // A timer, not setImmediate: the loop then waits in its poll for the socket, without spinning.
    await sleep(1);
    const now = performance.now();
    const m = moving();
    if (m === undefined || now - started >= GIVE_WAY_MAX_MS) return;
    if (m !== moved) {
      moved = m;
      progressed = now;
    } else if (now - progressed >= GIVE_WAY_STALL_MS) {
      stalledAt = m;
      return;
    }
  }
}

/**
 * Work between two turns of long work, in milliseconds. A request that arrives meanwhile waits
 * for the rest of the slice (and for whatever step or collection overruns it), so this is most
 * of what another session's prepare pays while one compacts (docs/performance.md, stop 47).
 */
export const SLICE_MS = 4;

/**
 * Long pure computations are written as generators that `yield` (nothing) between steps, so
 * one implementation runs both ways: `runSteps` to its end at once (tests, scripts), or
 * `runStepsSliced` with a turn for the event loop once a slice is used up (the daemon).
 */
export type Steps<T> = Generator<void, T, void>;

/** Runs `steps` to the end, without ever yielding to the event loop. */
export function runSteps<T>(steps: Steps<T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done === true) return r.value;
  }
}

/**
 * Runs `steps` to the end, giving the event loop a turn every SLICE_MS; `stop` is asked at each
 * turn and ends the run with what it throws (a cancelled request).
 */
export async function runStepsSliced<T>(steps: Steps<T>, stop?: () => void): Promise<T> {
  // The clock is read inline: awaiting a slicer at every step made a promise or two a step, and
  // the extractive summarizer takes millions of steps in a long compaction.
  let start = performance.now();
  for (;;) {
    const r = steps.next();
    if (r.done === true) return r.value;
    if (performance.now() - start < SLICE_MS) continue;
    await giveWay();
    stop?.();
    start = performance.now();
  }
}

/**
 * For loops over rows of unknown size: call the returned function after each unit of work;
 * once SLICE_MS have passed since the last yield it awaits `yieldNow` and starts a new slice.
 */
export function timeSlicer(yieldNow: () => Promise<void> = giveWay): () => Promise<void> {
  let start = performance.now();
  return async () => {
    if (performance.now() - start < SLICE_MS) return;
    await yieldNow();
    start = performance.now();
  };
}
