// One call's deadline joined with the caller's cancellation, as a single AbortSignal that the
// backends hand to fetch or to the reverse request. What to do once it fires is the backend's.

export interface Deadline {
  /** Aborts when the caller cancels or the deadline passes, whichever comes first. */
  readonly signal: AbortSignal;
  /** True once the deadline itself has passed (as opposed to the caller cancelling). */
  readonly expired: () => boolean;
  /** True once the caller's own signal has aborted. */
  readonly cancelled: () => boolean;
  /** Clears the timer; call when the work is over. Idempotent. */
  readonly dispose: () => void;
}

/**
 * Unlike AbortSignal.timeout, the timer here is cleared as soon as the call ends and is not
 * unref'd: a summary still being awaited keeps the process alive until it settles or times out,
 * and a finished call leaves no timer behind.
 */
export function startDeadline(timeoutMs: number, caller: AbortSignal | undefined): Deadline {
  const timer = new AbortController();
  let expired = false;
  const handle = setTimeout(() => {
    expired = true;
    timer.abort(new DOMException(`timed out after ${timeoutMs} ms`, 'TimeoutError'));
  }, timeoutMs);
  const signal = caller === undefined ? timer.signal : AbortSignal.any([caller, timer.signal]);
  return {
    signal,
    expired: () => expired,
    cancelled: () => caller?.aborted === true,
    dispose: () => clearTimeout(handle),
  };
}
