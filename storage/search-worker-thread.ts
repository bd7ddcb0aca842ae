// Worker-thread side of the search index query: its own read-only connection, one query per
// message, the (seq, sid) pairs sent back as a transferred Float64Array. Started and spoken
// to by storage/search-worker.ts only.
import { parentPort, workerData } from 'node:worker_threads';
import { openReadOnly } from './db.ts';
import { FTS_HITS_SQL, packHits } from './search.ts';

interface Ask {
  id: number;
  query: string;
  maxSeq: number;
}

const port = parentPort;
if (port !== null) {
  const db = openReadOnly((workerData as { path: string }).path);
  const stmt = db.prepare<[string, number], unknown[]>(FTS_HITS_SQL).raw();
  port.on('message', (ask: Ask) => {
    try {
      const pairs = packHits(stmt.all(ask.query, ask.maxSeq));
      port.postMessage({ id: ask.id, pairs }, [pairs.buffer as ArrayBuffer]);
    } catch (err) {
      port.postMessage({ id: ask.id, error: err instanceof Error ? err.message : String(err) });
    }
  });
  port.on('close', () => db.close());
}
