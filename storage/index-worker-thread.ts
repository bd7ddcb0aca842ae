// Worker-thread side of the background search indexer: its own connection to the database
// file, a loop that indexes in short slices (storage/search-index.ts indexSlice) while the main
// thread has no request, and sleeps on the shared words (storage/index-worker-shared.ts)
// otherwise. Started and stopped by storage/index-worker.ts only.
import { parentPort, workerData } from 'node:worker_threads';
import { openDb, type Db } from './db.ts';
import { IndexerShared, SLOT, epochMs } from './index-worker-shared.ts';
import { indexSlice } from './search-index.ts';

export interface IndexerThreadData {
  path: string;
  buffer: SharedArrayBuffer;
  /** This thread runs while the stop word still holds this value. */
  generation: number;
  idleMs: number;
  sliceMs: number;
}

/** Rows read per slice: read before the first insert, where no request cuts in, so few; the time budget usually ends the slice first. */
const SLICE_ROWS = 32;
/** After a failed slice, the thread waits this long before trying again. */
const RETRY_MS = 1000;

function run(db: Db, data: IndexerThreadData, post: (msg: IndexerThreadMessage) => void): void {
  const shared = new IndexerShared(data.buffer);
  const w = shared.i32;
  const running = (): boolean => Atomics.load(w, SLOT.stop) === data.generation;
  const yieldNow = (): boolean => Atomics.load(w, SLOT.busy) > 0 || !running();
  while (running()) {
    const wake = Atomics.load(w, SLOT.wake);
    const busy = Atomics.load(w, SLOT.busy);
    if (busy > 0) {
      // The main thread notifies this word when its last request ends.
      Atomics.wait(w, SLOT.busy, busy, 100);
      continue;
    }
    const quietFor = epochMs() - shared.lastRequestAt;
    if (quietFor < data.idleMs) {
      // A plain sleep that a stop cuts short (stop notifies every word).
      Atomics.wait(w, SLOT.stop, data.generation, data.idleMs - quietFor);
      continue;
    }
    // Claim the lock before looking at `busy` again; the main thread sets `busy` before it
    // looks at `txn`, so one of the two always sees the other (both are sequentially consistent).
    Atomics.store(w, SLOT.txn, 1);
    let end: string;
    try {
      end = yieldNow() ? 'yielded' : indexSlice(db, { maxRows: SLICE_ROWS, budgetMs: data.sliceMs, yieldNow }).end;
    } catch (err) {
      end = 'failed';
      post({ error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    } finally {
      Atomics.store(w, SLOT.txn, 0);
      Atomics.notify(w, SLOT.txn);
    }
    if (end === 'failed') Atomics.wait(w, SLOT.stop, data.generation, RETRY_MS);
    else if (end === 'caught-up') {
      post({ caughtUp: true });
      // Until the main thread says there may be more (or stops this thread).
      Atomics.wait(w, SLOT.wake, wake);
    }
  }
}

export type IndexerThreadMessage = { caughtUp: true } | { error: string };

const port = parentPort;
if (port !== null) {
  const data = workerData as IndexerThreadData;
  const db = openDb(data.path);
  try {
    run(db, data, (msg) => port.postMessage(msg));
  } finally {
    db.close();
  }
}
