// The memory the daemon's main thread and the indexer thread share (storage/index-worker.ts,
// storage/index-worker-thread.ts): plain words read and written with Atomics, so each side
// sees the other's state without a message, and the indexer can give the write lock back
// within one row of a request arriving instead of after its slice.

/** Int32 slots. */
export const SLOT = {
  /** Requests the main thread is handling (the indexer yields while this is above 0). */
  busy: 0,
  /** 1 while the indexer is inside (or about to open) its write transaction. */
  txn: 1,
  /** Bumped by the main thread when there may be rows to index; the idle indexer waits on it. */
  wake: 2,
  /** Set to 1 to make the indexer thread close its connection and end. */
  stop: 3,
} as const;

/** BigInt64 slot (after the Int32 ones): when the last request arrived or finished, epoch µs. */
const LAST_REQUEST_I64 = 2;
const BYTES = 8 * (LAST_REQUEST_I64 + 1);

/** Epoch milliseconds with sub-millisecond resolution, comparable across threads. */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

export class IndexerShared {
  readonly i32: Int32Array;
  private readonly i64: BigInt64Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(BYTES)) {
    this.i32 = new Int32Array(buffer, 0, 4);
    // Through Atomics: a plain 64-bit read of shared memory may tear.
    this.i64 = new BigInt64Array(buffer);
  }

  get lastRequestAt(): number {
    return Number(Atomics.load(this.i64, LAST_REQUEST_I64)) / 1000;
  }

  set lastRequestAt(ms: number) {
    Atomics.store(this.i64, LAST_REQUEST_I64, BigInt(Math.round(ms * 1000)));
  }
}
