// compaction.prepare end to end: a real daemon, a session of N rows appended over its socket and
// compacted once (forced, as an agent's daemon would have), then nothing-due prepares timed
// round trip (request written, response read and JSON-parsed by the client, as a Python or
// any untyped client would; the typed client's result validation is the client's own cost)
// against JSON.stringify of the response the client got and against the transport floor
// (transport-floor.ts: the same request answered with the same bytes by a bare server), in
// alternating blocks of the same run.
import type { Corpus } from './corpus.ts';
import { startReplayDaemon, type ReplayDaemon } from '../replay/daemon.ts';
import type { Dataset } from './dataset.ts';
import { agentPrompt, MODEL_ID, TAIL_PERCENT, WINDOW_TOKENS } from './prepare.ts';
import { RowStream } from './rows.ts';
import { nowMs, stats, type Stats } from './timing.ts';
import { startTransportFloor } from './transport-floor.ts';

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

async function timePrepares(d: ReplayDaemon, session: string, rows: number, opts: { blocks: number; perBlock: number }, log: (s: string) => void): Promise<SocketPrepareResult> {
  const { instructions, tools } = agentPrompt();
  const params = { session, model: MODEL_ID, instructions, tools };
  const forced = await d.client.call('prepare', { ...params, force: true });
  if (!forced.compacted) log(`  prepare over the socket @${rows}: the forced prepare did not compact`);
  const once = async (): Promise<unknown> => {
    const r = (await d.client.raw('prepare', params)) as { compacted: boolean; observation: { due: boolean } };
    if (r.observation.due || r.compacted) throw new Error('prepare was due; the benchmark wants nothing due');
    return r;
  };
  let response = await once();
  for (let i = 0; i < 5; i++) response = await once();
  const floor = await startTransportFloor(d.home, JSON.stringify(response));
  try {
    for (let i = 0; i < 5; i++) await floor.call('prepare', params);
    const sp: number[] = [];
    const sf: number[] = [];
    const sj: number[] = [];
    for (let b = 0; b < opts.blocks; b++) {
      for (let i = 0; i < opts.perBlock; i++) {
        const t0 = nowMs();
        response = await once();
        sp.push(nowMs() - t0);
      }
      for (let i = 0; i < opts.perBlock; i++) {
        const t0 = nowMs();
        await floor.call('prepare', params);
        sf.push(nowMs() - t0);
      }
      for (let i = 0; i < opts.perBlock; i++) {
        const t0 = nowMs();
        JSON.stringify(response);
        sj.push(nowMs() - t0);
      }
    }
    const P = stats(sp);
    const F = stats(sf);
    const J = stats(sj);
    const out = { history_rows: rows, response_bytes: Buffer.byteLength(JSON.stringify(response)), prepare: P, stringify: J, floor: F, ratio: P.median_ms / J.median_ms, floor_ratio: P.median_ms / F.median_ms };
    log(`  prepare over the socket @${rows}: median ${P.median_ms.toFixed(2)} ms, transport floor ${F.median_ms.toFixed(2)} ms (${out.floor_ratio.toFixed(1)}x), stringify ${J.median_ms.toFixed(3)} ms (${out.ratio.toFixed(1)}x)`);
    return out;
  } finally {
    await floor.stop();
  }
}
