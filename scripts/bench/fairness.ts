// Section `fairness`: what one session's big compaction costs every other session on the host.
// A home holds a session of FAIRNESS_ROWS rows and three forks of it, never compacted. For each
// strategy a real daemon is started on that home (through stall-entry.ts: it records its own
// event-loop gaps), and AGENTS agent connections each open a small session of their own and,
// once a second, append a turn and prepare, as agents between model calls do; they run in a
// process of their own (fairness-agents.ts), as agents do, not in the bench's. After a warm-up,
// a stretch with nothing else happening gives their idle latency; then one big session's first prepare
// compacts its whole history under the strategy while the agents go on. That prepare is made
// from a process of its own (fairness-compactor.ts), so that its work, client summaries
// included, never delays the timed agents here. Measured for each: the agents' p99 prepare
// latency during the compaction against the idle p99 just before it (an agent's prepare that
// compacts its own session is its own cost and left out), the daemon's longest event-loop gap,
// and its peak resident set above where the fresh daemon stood. The search indexer is off
// (ALBEDO_SEARCH_INDEXER): filling the index is the grep section's measurement, and here it
// would only add its own slices to both stretches.
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { startReplayDaemon, type ReplayDaemon } from '../replay/daemon.ts';
import type { Corpus } from './corpus.ts';
import type { AgentSample, AgentsPlan } from './fairness-agents.ts';
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
/**
 * The agents run this long before the idle stretch starts. A fresh daemon's first turns run
 * code V8 has not optimized yet: counted as idle, they were the stretch's worst prepares and
 * set its p99 (13.0 ms instead of 9.1 without its first 5 s, in one run).
 */
const WARM_MS = 5_000;
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

function latencies(samples: readonly AgentSample[]): Latencies {
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

/** Turns each agent is given: more than the warm-up, the idle stretch and the longest compaction take. */
const AGENT_TURNS = 240;

/**
 * The AGENTS agents of one case, run by fairness-agents.ts in a process of their own. Their
 * rows are cut here, from the corpus, and handed over in a file.
 */
class Agents {
  private constructor(
    private readonly child: ChildProcess,
    private readonly out: Promise<string>,
  ) {}

  /** Opens the agents' sessions (`${name}-${k}`) and starts their loops; resolves once they run. */
  static async start(dir: string, socket: string, corpus: Corpus, name: string): Promise<Agents> {
    const { instructions, tools } = agentPrompt();
    const plan: AgentsPlan = {
      socket,
      period_ms: PERIOD_MS,
      prompt: { model: MODEL_ID, instructions, tools },
      agents: Array.from({ length: AGENTS }, (_, k) => {
        const tag = `${name}-${k}`;
        const stream = new RowStream(corpus, { keyPrefix: `a${tag}-`, start: 997 * (k + 1), idTag: `a${tag}` });
        return { session: `agent-${tag}`, workspace: `/work/agent-${tag}`, first: stream.take(AGENT_ROWS), turns: Array.from({ length: AGENT_TURNS }, () => stream.take(TURN_ROWS)) };
      }),
    };
    const file = path.join(dir, `agents-${name}.json`);
    fs.writeFileSync(file, JSON.stringify(plan));
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'fairness-agents.ts'), file], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const exited = new Promise<string>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`fairness-agents exited ${code}: ${err}`))));
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: string) => {
        out += d;
        if (out.startsWith('ready\n')) resolve();
      });
      exited.then(() => reject(new Error(`fairness-agents ended before its agents ran: ${err}`)), reject);
    });
    return new Agents(child, exited);
  }

  /** Stops the loops; every prepare they timed. */
  async stop(): Promise<AgentSample[]> {
    this.child.stdin?.end('stop\n');
    const out = await this.out;
    return JSON.parse(out.slice('ready\n'.length)) as AgentSample[];
  }

  /** Ends the process without its samples (the case failed). */
  kill(): void {
    this.child.kill('SIGKILL');
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
      let agents: Agents | undefined;
      try {
        const socket = path.join(d.home, 'albedod.sock');
        agents = await Agents.start(home, socket, corpus, String(i));
        await sleep(WARM_MS);
        const idleFrom = Date.now();
        await sleep(IDLE_MS);
        const idleTo = Date.now();

        const session = `big-${i}`;
        await d.client.call('extensions.select', { session, enable: [c.strategy] });
        const before = rssBytes(d.pid);
        let peak = before;
        const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(d.pid))), RSS_SAMPLE_MS);
        const from = Date.now();
        const r = await compactInChild(socket, session, c.client).finally(() => clearInterval(sampler));
        const to = Date.now();
        peak = Math.max(peak, rssBytes(d.pid));
        const samples = await agents.stop();
        agents = undefined;
        agentCompactions += samples.filter((x) => x.compacted).length;
        const inside = (a: number, b: number): AgentSample[] => samples.filter((x) => x.start < b && x.end > a && !x.compacted);
        const idle = { ...latencies(inside(idleFrom, idleTo)), max_stall_ms: longestStall(d.home, idleFrom, idleTo) };
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
        agents?.kill();
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
