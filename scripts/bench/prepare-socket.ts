// compaction.prepare end to end: a real daemon, a session of N rows appended over its socket and
// compacted once (forced, as an agent's daemon would have), then nothing-due prepares timed
// round trip (request written, response read and JSON-parsed by the client, as a Python or
// any untyped client would; the typed client's result validation is the client's own cost)
// against the transport floor (transport-floor.ts: the same request answered with the same
// bytes by a bare server), in alternating blocks of the same run, by a client in a process of
// its own after both sides are warm (socket-timer.ts). JSON.stringify of the response is
// reported for scale.
import path from 'node:path';
import { runTimerChild } from './child-timer.ts';
import type { Corpus } from './corpus.ts';
import { startReplayDaemon, type ReplayDaemon } from '../replay/daemon.ts';
import type { Dataset } from './dataset.ts';
import { agentPrompt, MODEL_ID, TAIL_PERCENT, WINDOW_TOKENS } from './prepare.ts';
import { RowStream } from './rows.ts';
import { nowMs, processCpuMs, stats, type Stats } from './timing.ts';
import { startFloorServer } from './transport-floor.ts';

export interface SocketPrepareResult {
  history_rows: number;
  response_bytes: number;
  prepare: Stats;
  stringify: Stats;
  /** The same request answered with the same bytes by a bare Node server (transport-floor.ts). */
  floor: Stats;
  /** Median round trip over median stringify. */
  ratio: number;
  /** Median round trip over the floor's median. */
  floor_ratio: number;
}

const ROLLING = { rolling: { contextWindowTokens: WINDOW_TOKENS, tailPercent: TAIL_PERCENT } };

/** A session of `rows` rows appended over a fresh daemon's socket (the 1k-row baseline and small sizes). */
export async function benchPrepareSocket(
  tmp: string,
  corpus: Corpus,
  rows: number,
  opts: { blocks: number; perBlock: number; nodeArgs?: string[] },
  log: (s: string) => void,
): Promise<SocketPrepareResult> {
  const d = await startReplayDaemon({ window: WINDOW_TOKENS, tmp, ...(opts.nodeArgs === undefined ? {} : { nodeArgs: opts.nodeArgs }), extensions: ROLLING });
  try {
    const session = 'p';
    await d.client.call('session.open', { session, workspace: '/w' });
    const stream = new RowStream(corpus, { keyPrefix: 'k' });
    for (let done = 0; done < rows; done += 1000) await d.client.raw('transcript.append', { session, rows: stream.take(Math.min(1000, rows - done)) });
    return await timePrepares(d, session, rows, opts, log);
  } finally {
    await d.stop();
  }
}

/**
 * The main session of a benchmark dataset, through a daemon started on the dataset's own folder
 * (its albedo.db): the sizes too large to append over the socket within the run, a million rows
 * among them. The dataset must not be written meanwhile.
 */
export async function benchPrepareSocketOn(ds: Dataset, opts: { blocks: number; perBlock: number }, log: (s: string) => void): Promise<SocketPrepareResult> {
  const d = await startReplayDaemon({ window: WINDOW_TOKENS, home: ds.dir, extensions: ROLLING });
  try {
    return await timePrepares(d, ds.main.name, ds.main.rows, opts, log);
  } finally {
    await d.stop();
  }
}

/** Requests each side gets before timing: enough for V8 to have optimized the daemon's request path. */
const WARM_REQUESTS = 300;

/**
 * How the round trips are timed: blocks of each side in turn. Blocks of 8 (the in-process
 * section's run count, used here until stop 54) timed every eighth request just after the
 * client had switched servers, when both sides' processes had slept for the other's block: on
 * the same daemon, 8-request blocks read 1.52 ms against a floor of 0.92, 100-request blocks
 * 1.08 against 0.71 (one scratch run each). 500 round trips a side take about a second.
 */
export const SOCKET_BLOCKS = { full: { blocks: 10, perBlock: 50 }, quick: { blocks: 4, perBlock: 25 } } as const;

/** CPU a settled daemon may still use in a SETTLE_POLL_MS poll (its checkpointer's looks, timers). */
const SETTLED_CPU_MS = 10;
const SETTLE_POLL_MS = 500;
/** A daemon that has not settled by then is timed anyway, and the log says so. */
const SETTLE_LIMIT_MS = 300_000;

/**
 * Waits until the daemon's background work is done: the search index has every row, and then
 * the daemon used under SETTLED_CPU_MS of CPU in a poll. Until then its idle work indexes a
 * backlog between calls and merges the index's segments whenever the client pauses (between
 * the alternating blocks), and a prepare waits for those units: the indexer's cost (the import,
 * append and fairness sections measure it), not the request's. On a 100k-row session just
 * indexed, the daemon's main thread spent 3.0 ms of CPU a prepare during the timing, and
 * 0.65 ms after a 90 s wait (scratch, stop 54). The full run's grep section has filled this
 * size's index long before; `--only prepare` starts on an unindexed dataset.
 */
async function daemonSettled(d: ReplayDaemon, rows: number, log: (s: string) => void): Promise<void> {
  const started = nowMs();
  let behind = (await d.client.call('daemon.status', {})).search.rows_behind;
  if (behind > 0) log(`  prepare over the socket @${rows}: waiting for the search index (${behind} rows behind) and the daemon to settle`);
  let cpu = processCpuMs(d.pid);
  for (;;) {
    await new Promise((r) => setTimeout(r, SETTLE_POLL_MS));
    behind = (await d.client.call('daemon.status', {})).search.rows_behind;
    const now = processCpuMs(d.pid);
    const used = cpu === undefined || now === undefined ? 0 : now - cpu;
    cpu = now;
    if (behind === 0 && used < SETTLED_CPU_MS) return;
    if (nowMs() - started > SETTLE_LIMIT_MS) {
      log(`  prepare over the socket @${rows}: the daemon had not settled after ${SETTLE_LIMIT_MS / 1000} s (${behind} rows behind, ${used} ms of CPU in the last poll); timed anyway`);
      return;
    }
  }
}

async function timePrepares(d: ReplayDaemon, session: string, rows: number, opts: { blocks: number; perBlock: number }, log: (s: string) => void): Promise<SocketPrepareResult> {
  const { instructions, tools } = agentPrompt();
  const params = { session, model: MODEL_ID, instructions, tools };
  const forced = await d.client.call('prepare', { ...params, force: true });
  if (!forced.compacted) log(`  prepare over the socket @${rows}: the forced prepare did not compact`);
  await daemonSettled(d, rows, log);
  const response = (await d.client.raw('prepare', params)) as { compacted: boolean; observation: { due: boolean } };
  if (response.observation.due || response.compacted) throw new Error('prepare was due; the benchmark wants nothing due');
  const floor = await startFloorServer(d.home, JSON.stringify(response));
  try {
    const samples = await runTimerChild<{ ours: number[]; floor: number[]; stringify: number[] }>('socket-timer.ts', [path.join(d.home, 'albedod.sock'), floor.socket], d.home, {
      method: 'prepare',
      params,
      warm: WARM_REQUESTS,
      blocks: opts.blocks,
      per_block: opts.perBlock,
    });
    const P = stats(samples.ours);
    const F = stats(samples.floor);
    const J = stats(samples.stringify);
    const out = { history_rows: rows, response_bytes: Buffer.byteLength(JSON.stringify(response)), prepare: P, stringify: J, floor: F, ratio: P.median_ms / J.median_ms, floor_ratio: P.median_ms / F.median_ms };
    log(`  prepare over the socket @${rows}: median ${P.median_ms.toFixed(2)} ms, transport floor ${F.median_ms.toFixed(2)} ms (${out.floor_ratio.toFixed(1)}x), stringify ${J.median_ms.toFixed(3)} ms (${out.ratio.toFixed(1)}x)`);
    return out;
  } finally {
    await floor.stop();
  }
}
