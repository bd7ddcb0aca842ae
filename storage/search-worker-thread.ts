// Worker-thread side of the trigram candidate query: its own read-only connection, one query
// per message, the matching seqs sent back as a transferred Float64Array. Started and spoken
// to by storage/search-worker.ts only.
import { parentPort, workerData } from 'node:worker_threads';
import { openReadOnly } from './db.ts';
import { FTS_CANDIDATES_SQL } from './search.ts';

interface Ask {
  id: number;
  query: string;
  maxSeq: number;
}

const port = parentPort;
if (port !== null) {
  const db = openReadOnly((workerData as { path: string }).path);
  const stmt = db.prepare<[string, number], number>(FTS_CANDIDATES_SQL).pluck();
  port.on('message', (ask: Ask) => {
    try {
      const seqs = Float64Array.from(stmt.all(ask.query, ask.maxSeq));
      port.postMessage({ id: ask.id, seqs }, [seqs.buffer]);
    } catch (err) {
      port.postMessage({ id: ask.id, error: err instanceof Error ? err.message : String(err) });
    }
  });
  port.on('close', () => db.close());
}
