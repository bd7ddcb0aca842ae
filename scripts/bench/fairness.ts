// Section `fairness`: what one session's big compaction costs every other session on the host.
// A home holds a session of FAIRNESS_ROWS rows and three forks of it, never compacted. For each
// strategy a real daemon is started on that home (through stall-entry.ts: it records its own
// event-loop gaps), and AGENTS agent connections each open a small session of their own and,
// once a second, append a turn and prepare, as agents between model calls do. A stretch with
// nothing else happening gives their idle latency; then one big session's first prepare
// compacts its whole history under the strategy while the agents go on. That prepare is made
// from a process of its own (fairness-compactor.ts), so that its work, client summaries
// included, never delays the timed agents here. Measured for each: the agents' p99 prepare
// latency during the compaction against the idle p99 just before it (an agent's prepare that
// compacts its own session is its own cost and left out), the daemon's longest event-loop gap,
// and its peak resident set above where the fresh daemon stood. The search indexer is off
// (ALBEDO_SEARCH_INDEXER): filling the index is the grep section's measurement, and here it
// would only add its own slices to both stretches.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { AlbedoClient } from '../../protocol/client.ts';
import { startReplayDaemon, type ReplayDaemon } from '../replay/daemon.ts';
import type { Corpus } from './corpus.ts';
import { agentPrompt, MODEL_ID } from './prepare.ts';
import type { Verdict } from './report.ts';
import { RowStream } from './rows.ts';
import { fmtBytes, fmtMs, nowMs } from './timing.ts';

export const FAIRNESS_ROWS = 100_000;
export const AGENTS = 8;
/** The agents' p99 prepare during a compaction over their p99 with nothing compacting. */
export const P99_RATIO_TARGET = 2;
export const STALL_TARGET_MS = 50;
/** Peak resident set of the daemon during a first compaction, above where it stood before. */
export const PEAK_RSS_TARGET_BYTES = 100 * 2 ** 20;

/** Rows each agent session starts with, and appends with each turn. */
const AGENT_ROWS = 100;
const TURN_ROWS = 3;
const PERIOD_MS = 1000;
const IDLE_MS = 20_000;
const RSS_SAMPLE_MS = 20;

const here = path.dirname(fileURLToPath(import.meta.url));

/** How the big session's compaction runs: its strategy, and whether its summary is the agent's (client) or extractive. */
const CASES = [
  { name: 'rolling extractive', strategy: 'rolling', client: false },
  { name: 'rolling client', strategy: 'rolling', client: true },
  { name: 'lcm', strategy: 'lcm', client: false },
  { name: 'snapcompact', strategy: 'snapcompact', client: false },
] as const;

export interface Latencies {
  samples: number;
  median_ms: number;
  p99_ms: number;
  max_ms: number;
}

export interface FairnessCase {
  name: string;
  compacted: boolean;
  compaction_ms: number;
  /** The agents' prepares in the stretch right before it, with nothing compacting, and the longest stall then. */
  idle: Latencies & { max_stall_ms: number };
  /** The agents' prepares that overlapped the compaction. */
  during: Latencies;
  ratio: number;
  max_stall_ms: number;
  rss_before_bytes: number;
  peak_rss_bytes: number;
}

export interface FairnessResult {
  history_rows: number;
  agents: number;
  build_ms: number;
  cases: FairnessCase[];
  /** Agent prepares that compacted their own session: their own cost, left out of the latencies. */
  agent_compactions: number;
}

interface Sample {
  start: number;
  end: number;
  ms: number;
  /** The agent's own session compacted on this prepare: its own cost, left out of the latencies. */
  compacted: boolean;
}

function latencies(samples: readonly Sample[]): Latencies {
  const ms = samples.map((s) => s.ms).sort((a, b) => a - b);
  const n = ms.length;
  const at = (q: number): number => (n === 0 ? NaN : ms[Math.min(n - 1, Math.ceil(q * n) - 1)]!);
  return { samples: n, median_ms: at(0.5), p99_ms: at(0.99), max_ms: ms[n - 1] ?? NaN };
}

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? 0 : Number(m[1]) * 1024;
}

/** The daemon's recorded gaps whose end fell within [from, to] (wall clock), the longest. */
function longestStall(home: string, from: number, to: number): number {
  const file = path.join(home, 'stalls.jsonl');
  if (!fs.existsSync(file)) return 0;
  let max = 0;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line === '') continue;
    const s = JSON.parse(line) as { at: number; ms: number };
    if (s.at >= from && s.at <= to) max = Math.max(max, s.ms);
  }
  return max;
}

/** One agent: its own session, a turn appended and a prepare once a period, each prepare timed. */
class Agent {
  readonly samples: Sample[] = [];
  compactions = 0;
  private running = true;
  private loop: Promise<void> | undefined;

  private constructor(
    private readonly client: AlbedoClient,
    private readonly session: string,
    private readonly stream: RowStream,
    private readonly params: Record<string, unknown>,
  ) {}

  /** `name` is the agent's session; `k` places its stream in the corpus. */
  static async start(socket: string, corpus: Corpus, name: string, k: number): Promise<Agent> {
    const client = await AlbedoClient.connect(socket, { client: { name: `agent-${name}`, version: '1' } });
    const session = `agent-${name}`;
    const stream = new RowStream(corpus, { keyPrefix: `a${name}-`, start: 997 * (k + 1), idTag: `a${name}` });
    const { instructions, tools } = agentPrompt();
    await client.call('session.open', { session, workspace: `/work/agent-${name}` });
    await client.raw('transcript.append', { session, rows: stream.take(AGENT_ROWS) });
    const agent = new Agent(client, session, stream, { session, model: MODEL_ID, instructions, tools });
    await agent.prepare();
    return agent;
  }

  private async prepare(): Promise<Sample> {
    const start = Date.now();
    const t0 = nowMs();
    const r = (await this.client.raw('prepare', this.params)) as { compacted: boolean };
    const ms = nowMs() - t0;
    if (r.compacted) this.compactions++;
    return { start, end: Date.now(), ms, compacted: r.compacted };
  }

  run(phase: number): void {
    this.loop = (async () => {
      await sleep(phase);
      while (this.running) {
        const due = nowMs() + PERIOD_MS;
        await this.client.raw('transcript.append', { session: this.session, rows: this.stream.take(TURN_ROWS) });
        this.samples.push(await this.prepare());
        const wait = due - nowMs();
        if (wait > 0) await sleep(wait);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await this.client.close();
  }
}

/** The big session's first prepare, made by fairness-compactor.ts in a process of its own. */
function compactInChild(socket: string, session: string, client: boolean): Promise<{ ms: number; compacted: boolean; backend: string | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'fairness-compactor.ts'), socket, session, MODEL_ID, ...(client ? ['client'] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`fairness-compactor exited ${code}: ${err}`));
      else resolve(JSON.parse(out) as { ms: number; compacted: boolean; backend: string | null });
    });
  });
}

/** A daemon on `home` that records its own event-loop gaps (stall-entry.ts), the indexer off. */
function startDaemon(home: string): Promise<ReplayDaemon> {
  return startReplayDaemon({ window: 200_000, home, entry: path.join(here, 'stall-entry.ts'), env: { ALBEDO_SEARCH_INDEXER: 'off' }, extensions: {} });
}

/**
 * `rows`: the big sessions' history (FAIRNESS_ROWS; fewer with --quick). Each case runs on a
 * daemon of its own, started on the same home, with agents of its own: its idle stretch is
 * taken right before its compaction, and its resident set starts where a fresh daemon's does.
 */
export async function benchFairness(tmp: string, corpus: Corpus, rows: number, log: (s: string) => void): Promise<FairnessResult> {
  const home = fs.mkdtempSync(path.join(tmp, 'albedo-fairness-'));
  try {
    const t0 = nowMs();
    const builder = await startDaemon(home);
    try {
      await builder.client.call('session.open', { session: 'big-0', workspace: '/work/big' });
      const stream = new RowStream(corpus, { keyPrefix: 'b' });
      for (let done = 0; done < rows; done += 1000) await builder.client.raw('transcript.append', { session: 'big-0', rows: stream.take(Math.min(1000, rows - done)) });
      for (let i = 1; i < CASES.length; i++) await builder.client.call('session.fork', { session: 'big-0', branch: `big-${i}` });
    } finally {
      await builder.stop();
    }
    const buildMs = nowMs() - t0;
    log(`  fairness: ${CASES.length} sessions of ${rows} rows built in ${fmtMs(buildMs)}`);

    const cases: FairnessCase[] = [];
    let agentCompactions = 0;
    for (const [i, c] of CASES.entries()) {
      const d = await startDaemon(home);
      const agents: Agent[] = [];
      try {
        const socket = path.join(d.home, 'albedod.sock');
        for (let k = 0; k < AGENTS; k++) agents.push(await Agent.start(socket, corpus, `${i}-${k}`, k));
        agents.forEach((a, k) => a.run((k * PERIOD_MS) / AGENTS));
        const inside = (from: number, to: number): Sample[] => agents.flatMap((a) => a.samples.filter((s) => s.start < to && s.end > from && !s.compacted));
        const idleFrom = Date.now();
        await sleep(IDLE_MS);
        const idleTo = Date.now();
        const idle = { ...latencies(inside(idleFrom, idleTo)), max_stall_ms: longestStall(d.home, idleFrom, idleTo) };

        const session = `big-${i}`;
        await d.client.call('extensions.select', { session, enable: [c.strategy] });
        const before = rssBytes(d.pid);
        let peak = before;
        const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(d.pid))), RSS_SAMPLE_MS);
        const from = Date.now();
        const r = await compactInChild(socket, session, c.client).finally(() => clearInterval(sampler));
        const to = Date.now();
        peak = Math.max(peak, rssBytes(d.pid));
        const during = latencies(inside(from, to));
        const out: FairnessCase = {
          name: c.name,
          compacted: r.compacted,
          compaction_ms: r.ms,
          idle,
          during,
          ratio: during.p99_ms / idle.p99_ms,
          max_stall_ms: longestStall(d.home, from, to),
          rss_before_bytes: before,
          peak_rss_bytes: peak - before,
        };
        cases.push(out);
        log(
          `  fairness: ${c.name} (${r.backend ?? 'no'} summarizer) ${fmtMs(r.ms)}: agents' p99 ${fmtMs(during.p99_ms)} over ${during.samples} prepares against ${fmtMs(idle.p99_ms)} idle (${out.ratio.toFixed(2)}x), longest stall ${
            fmtMs(out.max_stall_ms)
          } (idle ${fmtMs(idle.max_stall_ms)}), peak RSS +${fmtBytes(out.peak_rss_bytes)}`,
        );
      } finally {
        await Promise.all(agents.map((a) => a.stop()));
        agentCompactions += agents.reduce((n, a) => n + a.compactions, 0);
        await d.stop();
      }
    }
    return { history_rows: rows, agents: AGENTS, build_ms: buildMs, cases, agent_compactions: agentCompactions };
  } finally {
    fs.rmSync(home, { recursive: true, force: true });
  }
}

export function judgeFairness(r: FairnessResult): Verdict[] {
  return r.cases.flatMap((c) => [
    {
      target: `fairness: ${r.agents} agents' p99 prepare while a ${r.history_rows}-row session compacts (${c.name}) within ${P99_RATIO_TARGET}x of idle`,
      measured: `${fmtMs(c.during.p99_ms)} over ${c.during.samples} prepares vs ${fmtMs(c.idle.p99_ms)} over ${c.idle.samples} idle (${c.ratio.toFixed(2)}x)`,
      pass: c.compacted && c.ratio <= P99_RATIO_TARGET,
    },
    {
      target: `fairness: no event-loop stall over ${STALL_TARGET_MS} ms while a ${r.history_rows}-row session compacts (${c.name})`,
      measured: `longest ${fmtMs(c.max_stall_ms)} in ${fmtMs(c.compaction_ms)} (idle: ${fmtMs(c.idle.max_stall_ms)})`,
      pass: c.compacted && c.max_stall_ms <= STALL_TARGET_MS,
    },
    {
      target: `memory: a first compaction of ${r.history_rows} rows (${c.name}) peaks at most +${fmtBytes(PEAK_RSS_TARGET_BYTES)} of daemon RSS`,
      measured: `+${fmtBytes(c.peak_rss_bytes)} over ${fmtBytes(c.rss_before_bytes)}`,
      pass: c.compacted && c.peak_rss_bytes <= PEAK_RSS_TARGET_BYTES,
    },
  ]);
}

export function renderFairness(r: FairnessResult): string {
  const lines = [
    `fairness: ${r.agents} agents each appending a turn and preparing once a second while one ${r.history_rows}-row session compacts for the first time`,
    '  | compaction | its time | agents p99: during / idle (ratio) | median: during / idle | prepares: during / idle | longest stall: during / idle | peak RSS above before |',
    '  | --- | --- | --- | --- | --- | --- | --- |',
    ...r.cases.map((c) =>
      `  | ${c.name} | ${fmtMs(c.compaction_ms)} | ${fmtMs(c.during.p99_ms)} / ${fmtMs(c.idle.p99_ms)} (${c.ratio.toFixed(2)}x) | ${fmtMs(c.during.median_ms)} / ${fmtMs(c.idle.median_ms)} | ${c.during.samples} / ${c.idle.samples} | ${
        fmtMs(c.max_stall_ms)
      } / ${fmtMs(c.idle.max_stall_ms)} | +${fmtBytes(c.peak_rss_bytes)} of ${fmtBytes(c.rss_before_bytes)} |`
    ),
  ];
  if (r.agent_compactions > 0) lines.push(`  note: ${r.agent_compactions} agent prepare(s) compacted their own session during the run; they are left out of the latencies`);
  return lines.join('\n');
}
