// Section `images`, elision half: a session of 1,000 tool results with a screenshot each (and a
// short tail), one elision job over all of them run as the daemon runs it (batches with a turn
// of the event loop between them), timed whole, with the event loop's longest stall measured
// meanwhile by a monitor that ticks every millisecond. The garbage collection of the freed
// payloads is inside the batches, so it is in both figures.
import fs from 'node:fs';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import sharp from 'sharp';
import { finishElision } from '../../daemon/image-elision.ts';
import { RowIn } from '../../protocol/rows.ts';
import { openDb } from '../../storage/db.ts';
import { elisionStats, scheduleElision } from '../../storage/images/elision.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { fmtMs, nowMs } from './timing.ts';

export const ELISION_ROWS = 1_000;
/** The longest the event loop may wait on elision work, in ms (the daemon's slice rule). */
export const ELISION_STALL_TARGET_MS = 50;

export interface ElisionResult {
  rows: number;
  images_elided: number;
  payloads_deleted: number;
  bytes_freed: number;
  /** The whole job, batches and yields included. */
  total_ms: number;
  /** Longest event-loop delay seen while the job ran. */
  max_stall_ms: number;
  build_ms: number;
}

/** A distinct small screenshot per row, so each has a payload of its own to collect. */
function screenshot(i: number): Promise<Buffer> {
  return sharp({ create: { width: 120 + (i % 97), height: 80 + (i % 53), channels: 3, background: { r: i % 256, g: (i >> 8) % 256, b: 77 } } })
    .png()
    .toBuffer();
}

export async function benchElision(root: string, rows = ELISION_ROWS): Promise<ElisionResult> {
  const dir = fs.mkdtempSync(path.join(root, 'elision-'));
  const db = openDb(path.join(dir, 'albedo.db'));
  try {
    const t0 = nowMs();
    openSession(db, { session: 'shots' });
    let below = 0;
    for (let i = 0; i < rows + 5; i += 50) {
      const batch = [];
      for (let j = i; j < Math.min(i + 50, rows + 5); j++) {
        batch.push(
          { kind: 'user' as const, content: [{ type: 'text' as const, text: `look at view ${j}` }] },
          { kind: 'assistant' as const, content: [{ type: 'tool_call' as const, id: `c${j}`, name: 'screenshot', arguments: { view: j } }] },
          {
            kind: 'tool_result' as const,
            call_id: `c${j}`,
            content: [
              { type: 'text' as const, text: `view ${j} rendered\n` + 'layout line\n'.repeat(20) },
              { type: 'image' as const, media_type: 'image/png' as const, data: (await screenshot(j)).toString('base64') },
            ],
          },
        );
      }
      const { seqs } = await appendRows(db, 'shots', batch.map((r) => RowIn.parse(r)));
      // The first `rows` results are what the compaction covered; the last few stay in the tail.
      const lastCovered = Math.min(i + 50, rows) - i;
      if (lastCovered > 0) below = seqs[lastCovered * 3 - 1]! + 1;
    }
    const build_ms = nowMs() - t0;
    const sid = db.prepare<[string], number>('SELECT sid FROM sessions WHERE name = ?').pluck().get('shots')!;
    scheduleElision(db, sid, below);
    const monitor = monitorEventLoopDelay({ resolution: 1 });
    monitor.enable();
    const t1 = nowMs();
    await finishElision(db, sid);
    const total_ms = nowMs() - t1;
    monitor.disable();
    const s = elisionStats(db, sid);
    return {
      rows,
      images_elided: s.imagesElided,
      payloads_deleted: s.payloadsDeleted,
      bytes_freed: s.bytesFreed,
      total_ms,
      max_stall_ms: monitor.max / 1e6,
      build_ms,
    };
  } finally {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function judgeElision(r: ElisionResult): { target: string; measured: string; pass: boolean } {
  return {
    target: `images: eliding ${r.rows} screenshot rows after a compaction stalls the event loop at most ${ELISION_STALL_TARGET_MS} ms`,
    measured: `longest stall ${fmtMs(r.max_stall_ms)}; whole job ${fmtMs(r.total_ms)}`,
    pass: r.max_stall_ms <= ELISION_STALL_TARGET_MS,
  };
}

export function renderElision(r: ElisionResult): string {
  return (
    `\nimages: elision of ${r.rows} tool-output screenshots (marks, references, payload deletes; synchronous=FULL)\n` +
    `  ${r.images_elided} images elided · ${r.payloads_deleted} payloads deleted · ${(r.bytes_freed / 1024).toFixed(0)} KiB freed · ` +
    `job ${fmtMs(r.total_ms)} (${((r.total_ms * 1000) / Math.max(1, r.rows)).toFixed(0)} µs/row) · longest event-loop stall ${fmtMs(r.max_stall_ms)} · built in ${fmtMs(r.build_ms)}`
  );
}
