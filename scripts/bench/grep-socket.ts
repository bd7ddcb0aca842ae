// transcript_grep as a client sees it: a real daemon started on the grep section's own database
// (its folder as ALBEDO_HOME, once the index caught up), each pattern timed from the request
// written to the response parsed, against the anchor tool over the same dumped text. The two
// alternate in blocks (ours, anchor, ours, anchor ...) so both come from the same stretch of this
// shared machine; the in-process figures (grep.ts) stay as extra lines.
import { startReplayDaemon } from '../replay/daemon.ts';
import type { Dataset } from './dataset.ts';
import { anchorCount, PATTERNS, SLOW_ANCHOR_MS } from './grep-anchor.ts';
import { nowMs, stats, type Stats } from './timing.ts';

export interface SocketGrepCase {
  scope: 'session' | 'cross';
  pattern_name: string;
  pattern: string;
  /** `total` of the daemon's answer and the anchor's count of matching lines: equal when exact. */
  matches: number;
  anchor_matches: number;
  ours: Stats;
  anchor: Stats;
  /** ours best / anchor best. */
  ratio: number;
}

/** Blocks of each side, and runs per block. */
const BLOCKS = 5;
const PER_BLOCK = 3;

export async function benchGrepSocket(ds: Dataset, dump: { all: string; main: string }, log: (s: string) => void): Promise<SocketGrepCase[]> {
  const d = await startReplayDaemon({ window: 200_000, home: ds.dir });
  try {
    const cases: SocketGrepCase[] = [];
    for (const scope of ['session', 'cross'] as const) {
      for (const p of PATTERNS) {
        const params = { pattern: p.pattern, offset: 0, limit: 50, ...(scope === 'session' ? { session: ds.main.name } : {}) };
        const file = scope === 'session' ? dump.main : dump.all;
        let matches = -1;
        let anchorMatches = -1;
        const ours = async (): Promise<void> => {
          matches = (await d.client.call('transcript_grep', params)).total;
        };
        const anchor = (): void => {
          anchorMatches = anchorCount(p.pattern, file);
        };
        // Warm-up: the worker thread's start, the page cache for both (one run of the anchor,
        // a whole process, reads its file into the cache). A slow anchor is timed once a block:
        // five runs, one in each block, give its best as well as fifteen.
        for (let i = 0; i < 2; i++) await ours();
        const warm = nowMs();
        anchor();
        const anchorRuns = nowMs() - warm > SLOW_ANCHOR_MS ? 1 : PER_BLOCK;
        const so: number[] = [];
        const sa: number[] = [];
        for (let b = 0; b < BLOCKS; b++) {
          for (let i = 0; i < PER_BLOCK; i++) {
            const t0 = nowMs();
            await ours();
            so.push(nowMs() - t0);
          }
          for (let i = 0; i < anchorRuns; i++) {
            const t0 = nowMs();
            anchor();
            sa.push(nowMs() - t0);
          }
        }
        const O = stats(so);
        const A = stats(sa);
        const c: SocketGrepCase = { scope, pattern_name: p.name, pattern: p.pattern, matches, anchor_matches: anchorMatches, ours: O, anchor: A, ratio: O.min_ms / A.min_ms };
        cases.push(c);
        log(
          `  grep over the socket ${scope} ${p.name}: best ${O.min_ms.toFixed(1)} ms (median ${O.median_ms.toFixed(1)}) vs anchor ${A.min_ms.toFixed(1)} ms (median ${A.median_ms.toFixed(1)}) = ${
            c.ratio.toFixed(2)
          }x, ${matches}/${anchorMatches} matches`,
        );
      }
    }
    return cases;
  } finally {
    await d.stop();
  }
}
