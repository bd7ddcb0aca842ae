// Append throughput: rows/s through appendRows into a real SQLite file with synchronous=FULL,
// in batches of 1, 100 and 1000 rows of the realistic corpus mix, each batch size on a fresh
// database whose main session is first given some history (so indexes are not empty).
import fs from 'node:fs';
import path from 'node:path';
import type { RowIn } from '../../protocol/rows.ts';
import { openDb } from '../../storage/db.ts';
import { openSession } from '../../storage/sessions.ts';
import { appendRows } from '../../storage/transcript.ts';
import type { Corpus } from './corpus.ts';
import { RowStream } from './rows.ts';
import { nowMs } from './timing.ts';

export interface AppendResult {
  batch: number;
  rows: number;
  ms: number;
  rows_per_s: number;
  /** Text characters per second (row text only, not JSON overhead). */
  text_mb_per_s: number;
  /** Median and worst latency of one appendRows call (ms). */
  call_median_ms: number;
  call_max_ms: number;
}

function textChars(rows: readonly RowIn[]): number {
  let n = 0;
  for (const r of rows) for (const p of r.content) if (p.type === 'text') n += p.text.length;
  return n;
}

export async function benchAppend(tmp: string, corpus: Corpus, opts: { quick: boolean }): Promise<AppendResult[]> {
  const plan: Array<{ batch: number; rows: number }> = opts.quick
    ? [
        { batch: 1, rows: 300 },
        { batch: 100, rows: 5_000 },
        { batch: 1000, rows: 10_000 },
      ]
    : [
        { batch: 1, rows: 2_000 },
        { batch: 100, rows: 30_000 },
        { batch: 1000, rows: 100_000 },
      ];
  const prefill = opts.quick ? 2_000 : 20_000;
  const out: AppendResult[] = [];
  for (const { batch, rows } of plan) {
    const dir = fs.mkdtempSync(path.join(tmp, `append-${batch}-`));
    const db = openDb(path.join(dir, 'albedo.db'), { synchronous: 'FULL' });
    try {
      openSession(db, { session: 'a', workspace: '/w' });
      const stream = new RowStream(corpus, { keyPrefix: 'k' });
      for (let done = 0; done < prefill; done += 1000) await appendRows(db, 'a', stream.take(1000));
      // Prepare all batches first: only appendRows is timed.
      const batches: RowIn[][] = [];
      for (let done = 0; done < rows; done += batch) batches.push(stream.take(Math.min(batch, rows - done)));
      const chars = batches.reduce((n, b) => n + textChars(b), 0);
      const calls: number[] = [];
      const t0 = nowMs();
      for (const b of batches) {
        const c0 = nowMs();
        await appendRows(db, 'a', b);
        calls.push(nowMs() - c0);
      }
      const ms = nowMs() - t0;
      calls.sort((a, b) => a - b);
      out.push({
        batch,
        rows,
        ms,
        rows_per_s: rows / (ms / 1000),
        text_mb_per_s: chars / 1e6 / (ms / 1000),
        call_median_ms: calls[Math.floor(calls.length / 2)]!,
        call_max_ms: calls[calls.length - 1]!,
      });
    } finally {
      db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  return out;
}
