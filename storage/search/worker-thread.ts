// Worker-thread side of the search index queries (transcript rows, lcm node summaries), the scan
// of rows past the index, and the storage page walk: its own read-only connection, one query per message, the packed answer
// (a counted page, (id, sid) pairs, or the parts) sent back as a transferred Float64Array. Started and spoken to by storage/search/worker.ts only.
import { parentPort, workerData } from 'node:worker_threads';
import { openReadOnly } from '../db.ts';
import { indexMatches, packHits, scanMatches, SUMMARY_HITS_SQL } from './grep.ts';
import type { SearchAsk } from './worker.ts';
import { packParts, pageWalk } from '../storage-size.ts';

type Ask = SearchAsk & { id: number };

const port = parentPort;
if (port !== null) {
  const db = openReadOnly((workerData as { path: string }).path);
  const summaries = db.prepare<[string, number], unknown[]>(SUMMARY_HITS_SQL).raw();
  port.on('message', (ask: Ask) => {
    try {
      const pairs = ask.kind === 'pages'
        ? packParts(pageWalk(db, ask.stateTables))
        : ask.kind === 'transcript'
        ? indexMatches(db, ask.ask)
        : ask.kind === 'scan'
        ? scanMatches(db, ask.ask)
        : packHits(summaries.all(ask.query, ask.sid));
      port.postMessage({ id: ask.id, pairs }, [pairs.buffer as ArrayBuffer]);
    } catch (err) {
      port.postMessage({ id: ask.id, error: err instanceof Error ? err.message : String(err) });
    }
  });
  port.on('close', () => db.close());
}
