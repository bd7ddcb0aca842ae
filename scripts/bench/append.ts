// Append throughput: rows/s through appendRows into a real SQLite file with synchronous=FULL,
// in batches of 1, 100 and 1000 rows of the realistic corpus mix, each batch size on a fresh
// database whose main session is first given some history (so indexes are not empty). Then the
// same rows against the SQLite floor (scripts/bench/floor.ts), in process and over a real
// daemon's socket, and append latency over the socket with the search indexer on and off.
import fs from 'node:fs';
import path from 'node:path';
import type { RowIn } from '../../protocol/rows.ts';
import { EncodedJson } from '../../protocol/rpc-message.ts';
import { openDb, openReadOnly } from '../../storage/db.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { startReplayDaemon, type ReplayDaemon } from '../replay/daemon.ts';
import type { Corpus } from './corpus.ts';
import type { AppendTimerBlocks, AppendTimerRequest } from './append-timer.ts';
import { runTimerChild } from './child-timer.ts';
import { AppendFloor, medianRatio, SchemaFloor } from './floor.ts';
import { agentPrompt, MODEL_ID, TAIL_PERCENT, WINDOW_TOKENS } from './prepare.ts';
import { RowStream } from './rows.ts';
import { nowMs, ownCpuMs, processCpuMs, stats, type Stats } from './timing.ts';
import { type FloorServer, startFloorServer } from './transport-floor.ts';

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

export interface FloorComparison {
  path: 'in-process' | 'socket';
  batch: number;
  rows: number;
  blocks: number;
  ours_rows_per_s: number;
  floor_rows_per_s: number;
  /** Median over blocks of (our time / the floor's time) for the same rows. */
  ratio: number;
  /**
   * In process: the same rows' columns into the daemon's schema with nothing computed
   * (floor.ts SchemaFloor), timed in the same blocks; its ratio is the median over blocks of its
   * time over the floor's. Not a verdict: the rest of our ratio is an append's own work.
   */
  schema?: { rows_per_s: number; ratio: number };
  /**
   * Over the socket: the transport floor (a bare server answering each batch's request with an
   * append's reply, transport-floor.ts) timed in the same blocks, and the median over blocks of our
   * time over the two floors' times added (issue 35, target 5).
   */
  transport?: { rows_per_s: number; ratio: number };
  /**
   * CPU time per row while the batches were timed (user + system, all threads): ours (the bench
   * process in process, the daemon over the socket), the floor's, and over the socket the
   * client's. Less noisy than the times on a shared machine; absent where /proc is not readable.
   */
  cpu_us_per_row?: { ours: number; floor: number; client?: number };
}

/** One kind of call timed with the indexer running and without. */
export interface LatencyPair {
  on: Stats;
  off: Stats;
  /** Median with the indexer running / median without. */
  ratio: number;
  p90_ratio: number;
}

export interface IndexerLatency extends LatencyPair {
  /** Append calls (100 rows each) timed per daemon, with a pause between calls. */
  calls: number;
  pause_ms: number;
  /** Rows the indexer had to catch up on when the timing started. */
  backlog_rows: number;
  /** Rows the indexer got through while the calls were timed (it must have been working). */
  indexed_rows: number;
  /** Nothing-due prepares of another session, one after each append and a pause. */
  prepare: LatencyPair;
}

export interface AppendSection {
  throughput: AppendResult[];
  floor: FloorComparison[];
  indexer?: IndexerLatency;
}

interface Side<T> {
  /**
   * A batch as this side sends it, made before the timing starts, as the floor's rows are: over
   * the socket the request's params are serialized here, since that is the client's work.
   */
  encode(rows: RowIn[]): T;
  /** Appends one batch; returns its milliseconds. */
  append(batch: T): Promise<number>;
  /** CPU milliseconds the process doing our side's work has used so far, when it can be read. */
  cpuMs(): number | undefined;
}

/**
 * Our side and the floor, given the same prefill and then the same batches in alternating
 * blocks (which side goes first alternates too).
 */
async function compare<T>(
  ours: Side<T>,
  floor: AppendFloor,
  stream: RowStream,
  opts: { batch: number; prefill: number; blocks: number; perBlock: number; schema?: SchemaFloor },
): Promise<FloorComparison> {
  const { schema } = opts;
  for (let done = 0; done < opts.prefill; done += 1000) {
    const rows = stream.take(1000);
    await ours.append(ours.encode(rows));
    floor.append(AppendFloor.flatten(rows));
    schema?.append(schema.flatten(rows));
  }
  const pairs: Array<{ ours: number; floor: number }> = [];
  const schemaPairs: Array<{ ours: number; floor: number }> = [];
  let oursMs = 0;
  let floorMs = 0;
  let schemaMs = 0;
  const cpu = { ours: 0, floor: 0, readable: true };
  for (let b = 0; b < opts.blocks; b++) {
    const batches = Array.from({ length: opts.perBlock }, () => stream.take(opts.batch));
    const flat = batches.map((x) => AppendFloor.flatten(x));
    const schemaFlat = schema === undefined ? [] : batches.map((x) => schema.flatten(x));
    const sent = batches.map((x) => ours.encode(x));
    let o = 0;
    let f = 0;
    let sf = 0;
    const runOurs = async (): Promise<void> => {
      const c0 = ours.cpuMs();
      for (const x of sent) o += await ours.append(x);
      const c1 = ours.cpuMs();
      if (c0 === undefined || c1 === undefined) cpu.readable = false;
      else cpu.ours += c1 - c0;
    };
    const runFloor = (): void => {
      const k0 = ownCpuMs();
      for (const x of flat) f += floor.append(x);
      cpu.floor += ownCpuMs() - k0;
    };
    if (b % 2 === 0) {
      await runOurs();
      runFloor();
    } else {
      runFloor();
      await runOurs();
    }
    if (schema !== undefined) {
      for (const x of schemaFlat) sf += schema.append(x);
      schemaPairs.push({ ours: sf, floor: f });
      schemaMs += sf;
    }
    pairs.push({ ours: o, floor: f });
    oursMs += o;
    floorMs += f;
  }
  const rows = opts.blocks * opts.perBlock * opts.batch;
  const perRow = (ms: number): number => (ms * 1000) / rows;
  return {
    path: 'in-process',
    batch: opts.batch,
    rows,
    blocks: opts.blocks,
    ours_rows_per_s: rows / (oursMs / 1000),
    floor_rows_per_s: rows / (floorMs / 1000),
    ratio: medianRatio(pairs),
    ...(schema === undefined ? {} : { schema: { rows_per_s: rows / (schemaMs / 1000), ratio: medianRatio(schemaPairs) } }),
    ...(cpu.readable
      ? { cpu_us_per_row: { ours: perRow(cpu.ours), floor: perRow(cpu.floor) } }
      : {}),
  };
}

function p90(samples: readonly number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))] ?? NaN;
}

function socketSide(d: ReplayDaemon, session: string): Side<EncodedJson> {
  return {
    encode: (rows) => new EncodedJson(Buffer.from(JSON.stringify({ session, rows }))),
    cpuMs: () => processCpuMs(d.pid),
    async append(params) {
      const t0 = nowMs();
      // raw: the client's own check of the result is not the daemon's cost.
      await d.client.raw('transcript.append', params);
      return nowMs() - t0;
    },
  };
}

function cpuNote(r: FloorComparison): string {
  const c = r.cpu_us_per_row;
  if (c === undefined) return '';
  const client = c.client === undefined ? '' : `, client ${c.client.toFixed(1)}`;
  return `; CPU µs/row ours ${c.ours.toFixed(1)} vs floor ${c.floor.toFixed(1)}${client}`;
}

/** appendRows and the socket, each against the floor on the same rows. */
export async function benchAppendFloor(tmp: string, corpus: Corpus, opts: { quick: boolean }, log: (s: string) => void): Promise<FloorComparison[]> {
  const out: FloorComparison[] = [];
  const prefill = opts.quick ? 2_000 : 20_000;
  const plan = opts.quick
    ? [
      { batch: 100, blocks: 6, perBlock: 10 },
      { batch: 1000, blocks: 4, perBlock: 2 },
    ]
    : [
      { batch: 100, blocks: 10, perBlock: 30 },
      { batch: 1000, blocks: 8, perBlock: 5 },
    ];
  for (const p of plan) {
    const dir = fs.mkdtempSync(path.join(tmp, `floor-${p.batch}-`));
    const db = openDb(path.join(dir, 'albedo.db'), { synchronous: 'FULL' });
    const floor = new AppendFloor(dir);
    const schema = new SchemaFloor(dir);
    try {
      openSession(db, { session: 'a', workspace: '/w' });
      const ours: Side<RowIn[]> = {
        encode: (rows) => rows,
        cpuMs: ownCpuMs,
        async append(rows) {
          const t0 = nowMs();
          await appendRows(db, 'a', rows);
          return nowMs() - t0;
        },
      };
      const r = await compare(ours, floor, new RowStream(corpus, { keyPrefix: 'k' }), { prefill, schema, ...p });
      const s = r.schema === undefined ? '' : `; the same columns into our schema, nothing computed: ${Math.round(r.schema.rows_per_s)} (${r.schema.ratio.toFixed(2)}x)`;
      log(`  append in process, batches of ${p.batch}: ${Math.round(r.ours_rows_per_s)} rows/s vs floor ${Math.round(r.floor_rows_per_s)} (${r.ratio.toFixed(2)}x)${cpuNote(r)}${s}`);
      out.push(r);
    } finally {
      schema.close();
      floor.close();
      db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  out.push(await benchAppendSocket(tmp, corpus, { prefill, ...(opts.quick ? { batch: 100, blocks: 6, perBlock: 10 } : { batch: 100, blocks: 10, perBlock: 30 }) }, log));
  return out;
}

/**
 * Appends over a real daemon's socket against both floors beneath them (issue 35, target 5): the
 * transport floor (a bare server answering with an append's reply) and the SQLite floor, timed
 * side by side by a client in a process of its own (append-timer.ts). The ratio to the SQLite
 * floor alone is issue 12's measure, kept for comparison with earlier runs.
 */
async function benchAppendSocket(
  tmp: string,
  corpus: Corpus,
  p: { prefill: number; batch: number; blocks: number; perBlock: number },
  log: (s: string) => void,
): Promise<FloorComparison> {
  const dir = fs.mkdtempSync(path.join(tmp, 'floor-socket-'));
  const floor = new AppendFloor(dir);
  const d = await startReplayDaemon({ window: 200_000, tmp, env: { ALBEDO_SEARCH_INDEXER: 'on' } });
  let transport: FloorServer | undefined;
  try {
    const session = 'a';
    await d.client.call('session.open', { session, workspace: '/w' });
    const stream = new RowStream(corpus, { keyPrefix: 'k' });
    for (let done = 0; done < p.prefill; done += 1000) {
      const rows = stream.take(1000);
      await d.client.raw('transcript.append', { session, rows });
      floor.append(AppendFloor.flatten(rows));
    }
    floor.close();
    // The transport floor answers every append with the reply to a batch of the timed size.
    const reply = await d.client.raw('transcript.append', { session, rows: stream.take(p.batch) });
    transport = await startFloorServer(dir, JSON.stringify(reply));
    const warm = Array.from({ length: 20 }, () => stream.take(p.batch));
    const blocks = Array.from({ length: p.blocks }, () => Array.from({ length: p.perBlock }, () => stream.take(p.batch)));
    const request: AppendTimerRequest = { daemon_socket: path.join(d.home, 'albedod.sock'), daemon_pid: d.pid, floor_socket: transport.socket, sqlite_dir: dir, session, warm, blocks };
    const t = await runTimerChild<AppendTimerBlocks>('append-timer.ts', [], dir, request);
    const rows = p.blocks * p.perBlock * p.batch;
    const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);
    const perRow = (ms: number): number => (ms * 1000) / rows;
    const both = {
      rows_per_s: rows / (sum(t.transport) / 1000),
      ratio: medianRatio(t.ours.map((o, i) => ({ ours: o, floor: t.transport[i]! + t.sqlite[i]! }))),
    };
    const r: FloorComparison = {
      path: 'socket',
      batch: p.batch,
      rows,
      blocks: p.blocks,
      ours_rows_per_s: rows / (sum(t.ours) / 1000),
      floor_rows_per_s: rows / (sum(t.sqlite) / 1000),
      ratio: medianRatio(t.ours.map((o, i) => ({ ours: o, floor: t.sqlite[i]! }))),
      transport: both,
      ...(t.cpu_ms === undefined ? {} : { cpu_us_per_row: { ours: perRow(t.cpu_ms.daemon), floor: perRow(t.cpu_ms.sqlite), client: perRow(t.cpu_ms.client) } }),
    };
    log(
      `  append over the socket, batches of ${p.batch}: ${Math.round(r.ours_rows_per_s)} rows/s; transport floor ${Math.round(both.rows_per_s)}, SQLite floor ${Math.round(r.floor_rows_per_s)}; ${both.ratio.toFixed(2)}x the two together, ${
        r.ratio.toFixed(2)
      }x the SQLite floor alone${cpuNote(r)}`,
    );
    return r;
  } finally {
    await transport?.stop();
    await d.stop();
    floor.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Rows the daemon's search index covers, read from its file beside it (a read-only connection). */
function indexedThrough(d: ReplayDaemon): number {
  const db = openReadOnly(path.join(d.home, 'albedo.db'));
  try {
    return db.prepare<[], number>('SELECT indexed_through FROM search_index_state WHERE id = 1').pluck().get() ?? 0;
  } finally {
    db.close();
  }
}

/**
 * Append and prepare latency over the socket while the indexer has a backlog to work through,
 * against a daemon whose indexer is off, in alternating blocks. Calls are spaced by a pause as
 * an agent's are, so the indexer does get idle time between them: each step appends 100 rows
 * to one session (the backlog grows), pauses, and prepares another session that has nothing
 * due (a prepare writes too: its record of the prepared request).
 */
export async function benchIndexerLatency(tmp: string, corpus: Corpus, opts: { quick: boolean }, log: (s: string) => void): Promise<IndexerLatency> {
  const prefill = opts.quick ? 5_000 : 30_000;
  const blocks = opts.quick ? 4 : 8;
  const perBlock = opts.quick ? 10 : 20;
  const pauseMs = 30;
  const { instructions, tools } = agentPrompt();
  const prepareParams = { session: 'p', model: MODEL_ID, instructions, tools };
  const extensions = { rolling: { contextWindowTokens: WINDOW_TOKENS, tailPercent: TAIL_PERCENT } };
  const on = await startReplayDaemon({ window: WINDOW_TOKENS, tmp, extensions, env: { ALBEDO_SEARCH_INDEXER: 'on' } });
  const off = await startReplayDaemon({ window: WINDOW_TOKENS, tmp, extensions, env: { ALBEDO_SEARCH_INDEXER: 'off' } });
  try {
    const sides = [
      { d: on, stream: new RowStream(corpus, { keyPrefix: 'k' }), append: [] as number[], prepare: [] as number[] },
      { d: off, stream: new RowStream(corpus, { keyPrefix: 'k' }), append: [] as number[], prepare: [] as number[] },
    ];
    for (const s of sides) {
      await s.d.client.call('session.open', { session: 'p', workspace: '/w' });
      await s.d.client.raw('transcript.append', { session: 'p', rows: new RowStream(corpus, { keyPrefix: 'p', idTag: 'p' }).take(1000) });
      await s.d.client.call('prepare', { ...prepareParams, force: true });
      await s.d.client.call('session.open', { session: 'a', workspace: '/w' });
      for (let done = 0; done < prefill; done += 1000) await s.d.client.raw('transcript.append', { session: 'a', rows: s.stream.take(1000) });
    }
    const startedAt = indexedThrough(on);
    const pause = (): Promise<void> => new Promise((r) => setTimeout(r, pauseMs));
    for (let b = 0; b < blocks; b++) {
      for (const s of b % 2 === 0 ? sides : [...sides].reverse()) {
        const side = socketSide(s.d, 'a');
        for (let i = 0; i < perBlock; i++) {
          await pause();
          s.append.push(await side.append(side.encode(s.stream.take(100))));
          await pause();
          const t0 = nowMs();
          const r = await s.d.client.call('prepare', prepareParams);
          s.prepare.push(nowMs() - t0);
          if (r.observation.due || r.compacted) throw new Error('prepare was due; the benchmark wants nothing due');
        }
      }
    }
    const indexedRows = indexedThrough(on) - startedAt;
    const [sOn, sOff] = sides as [(typeof sides)[0], (typeof sides)[0]];
    const compare = (on: number[], off: number[]): LatencyPair => {
      const a = stats(on);
      const b = stats(off);
      return { on: a, off: b, ratio: a.median_ms / b.median_ms, p90_ratio: p90(on) / p90(off) };
    };
    const ap = compare(sOn.append, sOff.append);
    const pr = compare(sOn.prepare, sOff.prepare);
    const r: IndexerLatency = { calls: ap.on.runs, pause_ms: pauseMs, backlog_rows: prefill, indexed_rows: indexedRows, ...ap, prepare: pr };
    log(`  append latency with the indexer on / off: median ${ap.on.median_ms.toFixed(2)} / ${ap.off.median_ms.toFixed(2)} ms (${ap.ratio.toFixed(2)}x), p90 ${ap.p90_ratio.toFixed(2)}x`);
    log(`  prepare latency with the indexer on / off: median ${pr.on.median_ms.toFixed(2)} / ${pr.off.median_ms.toFixed(2)} ms (${pr.ratio.toFixed(2)}x), p90 ${pr.p90_ratio.toFixed(2)}x; indexed meanwhile: ${indexedRows} rows`);
    return r;
  } finally {
    await on.stop();
    await off.stop();
  }
}
