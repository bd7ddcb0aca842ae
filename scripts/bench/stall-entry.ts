// A daemon entry for the benchmark that watches its own event loop: a timer due every
// millisecond, on the monotonic clock, and every gap between two ticks longer than
// STALL_RECORD_MS appended to $ALBEDO_HOME/stalls.jsonl as {at, ms} (`at` the wall clock at the
// gap's end, so the bench can match it against what it was doing then). Then the daemon itself
// starts, as daemon/main.ts does. The ticker is unref'd: it never keeps a stopping daemon alive.
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

/** Gaps shorter than this are not written (the file stays small; the verdicts are at 50 ms). */
const STALL_RECORD_MS = 10;
const TICK_MS = 1;

const home = process.env.ALBEDO_HOME;
if (home === undefined) throw new Error('stall-entry needs ALBEDO_HOME');
const out = path.join(home, 'stalls.jsonl');
let last = performance.now();
const tick = (): void => {
  const now = performance.now();
  const gap = now - last - TICK_MS;
  last = now;
  if (gap >= STALL_RECORD_MS) fs.appendFileSync(out, `${JSON.stringify({ at: Date.now(), ms: Math.round(gap * 10) / 10 })}\n`);
  setTimeout(tick, TICK_MS).unref();
};
setTimeout(tick, TICK_MS).unref();

await import('../../daemon/main.ts');
