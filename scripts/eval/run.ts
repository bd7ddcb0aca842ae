// One eval run: an imported transcript replayed into a fresh daemon (real socket, temp home)
// under one strategy, through the shared replayer (scripts/replay/replay.ts), with a simulated
// prompt cache in the usage reports and the measurements the eval reports per run.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { z } from 'zod';
import type { SummarizerConfig } from '../../strategies/summarizer/types.ts';
import { resolvePaths } from '../../protocol/home-paths.ts';
import { openReadOnly, type Db } from '../../storage/db.ts';
import { findSession } from '../../storage/transcript/sessions.ts';
import type { AlbedoClient } from '../../protocol/client.ts';
import { MAX_GREP_LIMIT } from '../../protocol/methods.ts';
import type { RowIn } from '../../protocol/rows.ts';
import { archiveText, loadArchive } from '../../storage/state/snapcompact.ts';
import type { ImportedTranscript } from '../../cli/import/index.ts';
import { startReplayDaemon } from '../replay/daemon.ts';
import { DEFAULT_MODEL, replayTranscript, type PreparedRequest } from '../replay/replay.ts';
import { extractIdentifiers, retainedShare } from './identifiers.ts';
import { priceFor, type PriceChoice } from './prices.ts';
import { cachedTokens, commonPrefixBytes, percentile, requestCost, serializeRequest, summarizerCost } from './request.ts';
import { addScore, emptyTally, kept, normalise, PROBE_KINDS, ProbeSet, type Probe, type ProbeKind, type ProbeTally } from './probes.ts';
import { EvictionTracker, inputsText, rowInText } from './retention.ts';
import { BASELINES } from './baselines.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';

const BASELINE_NAMES: readonly string[] = BASELINES.map((b) => b.name);
/** What the eval runs: the shipped strategies, then its own baselines (baselines.ts). */
export const EVAL_STRATEGIES: readonly string[] = [...BUILTIN_SET.defs.filter((d) => d.kind === 'strategy').map((d) => d.name), ...BASELINE_NAMES];

/** Provider tokens per estimated token the usage reports claim (code-heavy requests count ~30% over bytes/4). */
export const MEASURED_RATIO = 1.3;
/** Evicted identifiers checked through the memory tools per run, at most (spread evenly over them). */
export const RECOVERY_SAMPLE = 300;
/** Probes of each kind whose source row is looked for with transcript_grep, at most (spread evenly). */
export const PROBE_SAMPLE = 100;
const SESSION = 'eval';
const ENTRY = path.join(path.dirname(fileURLToPath(import.meta.url)), 'daemon-entry.ts');

/** The summarizer section an eval daemon gets, as written in extensions.json. */
export type EvalSummarizer = z.input<typeof SummarizerConfig>;

export interface RunOptions {
  window: number;
  summarizer: EvalSummarizer;
  tmp?: string;
  /** Evicted identifiers checked through the memory tools, at most; default RECOVERY_SAMPLE. */
  recoverySample?: number;
  /** Probes of each kind checked through transcript_grep, at most; default PROBE_SAMPLE. */
  probeSample?: number;
  /** Called per prepare with the turn number (progress). */
  progress?: (turn: number) => void;
}

/** One point of the per-turn picture. */
export interface TurnPoint {
  /** Provider-counted input tokens (the usage report). */
  tokens: number;
  compacted: boolean;
}

export interface RunMetrics {
  transcript: string;
  format: string;
  model: string;
  strategy: string;
  window: number;
  trigger_percent: number;
  rows: number;
  prepares: number;
  rejected_rows: number;
  within_window_pct: number;
  /** Largest request over the window, provider-counted, as a multiple of the window. */
  max_window_ratio: number;
  /** Tokens by which the largest request exceeded the window (0 when none did). */
  max_overshoot_tokens: number;
  compactions: number;
  summarizer_tokens_in: number;
  summarizer_tokens_out: number;
  /** Mean over requests of cached-prefix bytes / request bytes, and the same without compaction turns. */
  cached_share: number;
  cached_share_no_compaction: number;
  /** Requests whose cached prefix did not reach the previous request's end (a cache break). */
  cache_breaks: number;
  cost: { requests_usd: number; summarizer_usd: number; total_usd: number; vs_none: number | null; price: PriceChoice };
  pairing_violations: number;
  retention: {
    /** Prepares at which rows left the request. */
    evictions: number;
    evicted_rows: number;
    identifiers: number;
    kept: number;
    kept_share: number;
    /** Tokens of the request parts standing for history (all sections but system, tail, history), summed over eviction turns. */
    memory_tokens: number;
    kept_per_1k_memory_tokens: number | null;
    recovery_checked: number;
    recoverable: number;
    recoverable_share: number;
  };
  /** Probes kept by the requests from the first at which rows left, and found again by transcript_grep (probes.ts). */
  probes: Record<ProbeKind, ProbeScore>;
  latency_ms: { p50: number; p99: number };
  failures: string[];
  wall_ms: number;
  /** Of which the memory-tool checks took. */
  recovery_ms: number;
  turns: TurnPoint[];
}

export interface ProbeScore extends ProbeTally {
  kept_share: number;
  retrievable_share: number;
}

/** The extensions.json an eval daemon runs `strategy` with. */
export function evalExtensions(strategy: string, window: number, summarizer: EvalSummarizer): Record<string, unknown> {
  const baseline = BASELINE_NAMES.includes(strategy);
  return {
    [strategy]: { contextWindowTokens: window },
    extensions: { enable: [strategy], ...(baseline ? { disable: ['notes'] } : {}) },
    summarizer,
  };
}

const NON_MEMORY = new Set(['system', 'tail', 'history']);

function memoryTokens(p: PreparedRequest): number {
  return p.observation.sections.filter((s) => !NON_MEMORY.has(s.name)).reduce((n, s) => n + s.estimated_tokens, 0);
}

/** Evenly spread picks of at most `n` items, in order. */
function spread<T>(xs: readonly T[], n: number): T[] {
  if (xs.length <= n) return [...xs];
  return Array.from({ length: n }, (_, i) => xs[Math.floor((i * xs.length) / n)]!);
}

export async function runEval(name: string, imported: ImportedTranscript, strategy: string, opts: RunOptions): Promise<RunMetrics> {
  const t0 = performance.now();
  const model = imported.model ?? DEFAULT_MODEL;
  const price = priceFor(model);
  const d = await startReplayDaemon({ window: opts.window, tmp: opts.tmp, entry: ENTRY, extensions: evalExtensions(strategy, opts.window, opts.summarizer) });
  let db: Db | undefined;
  try {
    const tracker = new EvictionTracker(imported.rows);
    const probeSet = new ProbeSet(imported.rows);
    const gone = new Set<number>();
    const tallies = Object.fromEntries(PROBE_KINDS.map((k) => [k, emptyTally()])) as Record<ProbeKind, ProbeTally>;
    /** Every probe scored, by kind, once per source row and grep literal: the retrieval check's pool. */
    const pool = Object.fromEntries(PROBE_KINDS.map((k) => [k, new Map<string, Probe>()])) as Record<ProbeKind, Map<string, Probe>>;
    let frames: { at: number | null; text: string } | undefined;
    const bytes = new Map<string, Buffer>();
    const shares: Array<{ share: number; compacted: boolean; broke: boolean }> = [];
    const turns: TurnPoint[] = [];
    let requestsUsd = 0;
    let triggerPercent = 0;
    const evicted = new Set<string>();
    const ret = { evictions: 0, evicted_rows: 0, identifiers: 0, kept: 0, memory_tokens: 0 };
    let summarizerIn = 0;
    let summarizerOut = 0;
    let lastCompactionAt: number | null = null;
    const savedArchive = (): string => {
      db ??= openReadOnly(resolvePaths({ ALBEDO_HOME: d.home }).db);
      const s = findSession(db, SESSION);
      const a = s === undefined ? undefined : loadArchive(db, s.sid);
      return s === undefined || a === undefined || 'unreadable' in a ? '' : archiveText(db, s.sid, a);
    };

    const stats = await replayTranscript(d.client, SESSION, imported, {
      window: opts.window,
      measuredRatio: MEASURED_RATIO,
      usage: (p, previous) => {
        const input = Math.round(MEASURED_RATIO * p.observation.estimated_input_tokens);
        const now = serializeRequest(p);
        bytes.set(p.prepared_id, now);
        const before = previous === null ? undefined : bytes.get(previous.prepared_id);
        const prefix = before === undefined ? 0 : commonPrefixBytes(before, now);
        if (previous !== null) bytes.delete(previous.prepared_id);
        const cached = cachedTokens(input, prefix, now.length);
        shares.push({ share: now.length === 0 ? 0 : prefix / now.length, compacted: p.compacted, broke: before !== undefined && prefix < before.length });
        turns.push({ tokens: input, compacted: p.compacted });
        requestsUsd += requestCost(input, cached, price.price);
        return { input_tokens: input, cached_tokens: cached };
      },
      inspect: (p, _rec, appended) => {
        triggerPercent = p.observation.trigger_percent;
        opts.progress?.(turns.length);
        const last = p.observation.last_compaction;
        if (p.compacted && last !== null && last.at !== lastCompactionAt) {
          lastCompactionAt = last.at;
          summarizerIn += last.summarizer_tokens_in;
          summarizerOut += last.summarizer_tokens_out;
        }
        const left = tracker.evict(appended, p.inputs);
        for (const i of left) gone.add(i);
        if (gone.size === 0) return;
        // The archive changes only when snapcompact compacts: read once per compaction.
        if (!p.observation.sections.some((s) => s.name === 'frames')) frames = undefined;
        else if (frames === undefined || frames.at !== lastCompactionAt) frames = { at: lastCompactionAt, text: savedArchive() };
        const text = `${inputsText(p.inputs)}\n${frames?.text ?? ''}`;
        scoreProbes(probeSet.at(appended, gone), text, probeSet.modifiedRoot(appended), left.length > 0, tallies, pool);
        if (left.length === 0) return;
        const ids = extractIdentifiers(left.map((i) => rowInText(imported.rows[i]!)).join('\n'));
        const kept = retainedShare(ids.keys(), text);
        ret.evictions++;
        ret.evicted_rows += left.length;
        ret.identifiers += kept.total;
        ret.kept += kept.kept;
        ret.memory_tokens += memoryTokens(p);
        for (const id of ids.keys()) evicted.add(id);
      },
    });

    // Recoverable: what the memory tools find of the evicted identifiers, over the socket.
    const tReplay = performance.now();
    const checked = spread([...evicted], opts.recoverySample ?? RECOVERY_SAMPLE);
    let recoverable = 0;
    for (const pattern of checked) {
      const t = await d.client.call('transcript_grep', { session: SESSION, pattern, limit: 1 });
      let found = t.total > 0;
      if (!found && strategy === 'lcm') {
        const l = await d.client.call('lcm_grep', { session: SESSION, pattern, limit: 1 });
        found = l.source.total + l.summaries.total > 0;
      }
      if (found) recoverable++;
    }

    const probes = await retrievalCheck(d.client, imported.rows, tallies, pool, opts.probeSample ?? PROBE_SAMPLE);

    const within = turns.filter((t) => t.tokens <= opts.window).length;
    const maxTokens = turns.reduce((m, t) => Math.max(m, t.tokens), 0);
    const mean = (xs: number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
    const summarizerUsd = summarizerCost(summarizerIn, summarizerOut, price.price);
    return {
      transcript: name,
      format: imported.format,
      model,
      strategy,
      window: opts.window,
      trigger_percent: triggerPercent,
      rows: stats.rows.total,
      prepares: stats.prepares,
      rejected_rows: stats.rows.rejected,
      within_window_pct: turns.length === 0 ? 100 : (100 * within) / turns.length,
      max_window_ratio: maxTokens / opts.window,
      max_overshoot_tokens: Math.max(0, maxTokens - opts.window),
      compactions: stats.compactions,
      summarizer_tokens_in: summarizerIn,
      summarizer_tokens_out: summarizerOut,
      cached_share: mean(shares.map((s) => s.share)),
      cached_share_no_compaction: mean(shares.filter((s) => !s.compacted).map((s) => s.share)),
      cache_breaks: shares.filter((s) => s.broke).length,
      cost: { requests_usd: requestsUsd, summarizer_usd: summarizerUsd, total_usd: requestsUsd + summarizerUsd, vs_none: null, price },
      pairing_violations: stats.calls_without_results + stats.results_without_calls,
      retention: {
        ...ret,
        kept_share: ret.identifiers === 0 ? 1 : ret.kept / ret.identifiers,
        kept_per_1k_memory_tokens: ret.memory_tokens === 0 ? null : (1000 * ret.kept) / ret.memory_tokens,
        recovery_checked: checked.length,
        recoverable,
        recoverable_share: checked.length === 0 ? 1 : recoverable / checked.length,
      },
      probes,
      latency_ms: { p50: percentile(stats.records.map((r) => r.ms), 50), p99: percentile(stats.records.map((r) => r.ms), 99) },
      failures: stats.failure_reasons,
      wall_ms: performance.now() - t0,
      recovery_ms: performance.now() - tReplay,
      turns,
    };
  } finally {
    db?.close();
    await d.stop();
  }
}

/**
 * Scores one request: each kind's probes in force and how many its text keeps. Recall is scored
 * only where rows left (its probes change only then, and it is the costly kind); the others on
 * every request from the first such one.
 */
function scoreProbes(probes: readonly Probe[], text: string, root: string, evicted: boolean, tallies: Record<ProbeKind, ProbeTally>, pool: Record<ProbeKind, Map<string, Probe>>): void {
  const flat = normalise(text);
  const counts = Object.fromEntries(PROBE_KINDS.map((k) => [k, { total: 0, kept: 0 }])) as Record<ProbeKind, { total: number; kept: number }>;
  for (const probe of probes) {
    if (probe.kind === 'recall' && !evicted) continue;
    const c = counts[probe.kind];
    c.total++;
    if (kept(probe, text, flat, root)) c.kept++;
    pool[probe.kind].set(`${probe.row}\u0000${probe.grep}`, probe);
  }
  for (const k of PROBE_KINDS) if (k !== 'recall' || evicted) addScore(tallies[k], counts[k].total, counts[k].kept);
}

/**
 * Whether transcript_grep finds each probe's source row with one call (a spread sample per
 * kind): the row's seq among the matches of its grep literal. Rows are matched to seqs by
 * their key, or in order when the transcript's rows carry none.
 */
async function retrievalCheck(client: AlbedoClient, rows: readonly RowIn[], tallies: Record<ProbeKind, ProbeTally>, pool: Record<ProbeKind, Map<string, Probe>>, sample: number): Promise<Record<ProbeKind, ProbeScore>> {
  const stored: Array<{ seq: number; key: string | null }> = [];
  for (let after = 0;;) {
    const page = await client.call('transcript.rows', { session: SESSION, after, limit: 500 });
    for (const r of page.rows) if (r.body.kind !== 'notice' && !(r.body.kind === 'user' && r.body.origin !== 'user')) stored.push({ seq: r.seq, key: r.key });
    if (page.next_after === null) break;
    after = page.next_after;
  }
  const byKey = new Map(stored.flatMap((r) => (r.key === null ? [] : [[r.key, r.seq] as const])));
  const seqOf = (i: number): number | undefined => {
    const key = rows[i]!.key;
    if (key !== undefined) return byKey.get(key);
    return stored.length === rows.length ? stored[i]!.seq : undefined;
  };
  const out = {} as Record<ProbeKind, ProbeScore>;
  for (const k of PROBE_KINDS) {
    const t = { ...tallies[k] };
    for (const probe of spread([...pool[k].values()], sample)) {
      const seq = seqOf(probe.row);
      t.retrieval_checked++;
      if (seq === undefined || probe.grep === '') continue;
      const found = await client.call('transcript_grep', { session: SESSION, pattern: probe.grep, limit: MAX_GREP_LIMIT });
      if (found.matches.some((m) => m.seq === seq)) t.retrievable++;
    }
    out[k] = { ...t, kept_share: t.probes === 0 ? 1 : t.kept / t.probes, retrievable_share: t.retrieval_checked === 0 ? 1 : t.retrievable / t.retrieval_checked };
  }
  return out;
}

/** Fills each run's cost relative to the `none` run of the same transcript. */
export function relateToNone(runs: RunMetrics[]): void {
  for (const r of runs) {
    const base = runs.find((x) => x.transcript === r.transcript && x.strategy === 'none');
    r.cost.vs_none = base === undefined || base.cost.total_usd === 0 ? null : r.cost.total_usd / base.cost.total_usd;
  }
}
