// Time slicing for long synchronous work, so one session's scan or computation never holds the
// event loop (and every other session) for long: generators that yield between steps, run to
// the end at once or a slice at a time. Nothing here knows about storage; the storage scans, the
// extractive summarizer and the strategies all slice their work with it.
/** Lets queued I/O run between batches of a long synchronous scan. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Work between two yields of a long scan, in milliseconds (the daemon's budget is 50). */
export const SLICE_MS = 8;

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
  const slice = timeSlicer(async () => {
    await yieldToEventLoop();
    stop?.();
  });
  for (;;) {
    const r = steps.next();
    if (r.done === true) return r.value;
    await slice();
  }
}

/**
 * For loops over rows of unknown size: call the returned function after each unit of work;
 * once SLICE_MS have passed since the last yield it awaits `yieldNow` and starts a new slice.
 */
export function timeSlicer(yieldNow: () => Promise<void> = yieldToEventLoop): () => Promise<void> {
  let start = performance.now();
  return async () => {
    if (performance.now() - start < SLICE_MS) return;
    await yieldNow();
    start = performance.now();
  };
}
