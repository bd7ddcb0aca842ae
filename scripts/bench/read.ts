// transcript_read: the first 20k-grapheme page of the main session, a page in the middle and
// one near the end (offsets estimated from SQL character counts), with the event-loop stall
// seen while each is read (readTranscript yields every 128 rows).
import { DEFAULT_READ_LIMIT } from '../../protocol/methods.ts';
import { readTranscript } from '../../storage/transcript-read.ts';
import type { Dataset } from './dataset.ts';
import { repeat, withLoopMonitor, type Stats } from './timing.ts';

export interface ReadResult {
  page: 'first' | 'middle' | 'near-end';
  offset: number;
  /** Graphemes returned. */
  returned: number;
  stats: Stats;
  max_stall_ms: number;
}

/**
 * Upper estimate of the rendered session's length: characters of text plus header and
 * separators. SQLite counts code points, which is at least the grapheme count, so an offset
 * at 98% of this still lands inside the rendering for this corpus.
 */
export function renderedLengthEstimate(ds: Dataset): number {
  const row = ds.db
    .prepare<[number], { n: number }>(
      `SELECT sum(length(text) + 1 + length(seq) + 1 + CASE kind WHEN 'user' THEN 4 WHEN 'assistant' THEN 9
                 WHEN 'tool_result' THEN 12 + length(call_id) ELSE 20 END + 2) AS n
         FROM transcript WHERE sid = ?`,
    )
    .get(ds.main.sid);
  return row?.n ?? 0;
}

export async function benchRead(ds: Dataset, log: (s: string) => void): Promise<{ estimated_graphemes: number; pages: ReadResult[] }> {
  const total = renderedLengthEstimate(ds);
  const limit = DEFAULT_READ_LIMIT;
  const plan: Array<{ page: ReadResult['page']; offset: number }> = [
    { page: 'first', offset: 0 },
    { page: 'middle', offset: Math.floor(total / 2) },
    { page: 'near-end', offset: Math.max(0, Math.floor(total * 0.98) - limit) },
  ];
  const pages: ReadResult[] = [];
  for (const p of plan) {
    const params = { session: ds.main.name, offset: p.offset, limit };
    const run = await withLoopMonitor(() => repeat(() => readTranscript(ds.db, params), { warmup: p.page === 'first' ? 2 : 0, minRuns: 3, maxRuns: 30, minTotalMs: 300 }));
    const returned = [...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(run.value.value.text)].length;
    const { value: _v, ...s } = run.value;
    pages.push({ page: p.page, offset: p.offset, returned, stats: s, max_stall_ms: run.maxStallMs });
    log(`  read ${p.page} @${p.offset}: median ${s.median_ms.toFixed(1)} ms (${s.runs} runs), stall ${run.maxStallMs.toFixed(1)} ms, ${returned} graphemes`);
  }
  return { estimated_graphemes: total, pages };
}
