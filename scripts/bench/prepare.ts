// compaction.prepare with nothing due: the main session is first compacted for real (forced,
// every 100k rows of history as a daemon would have; the last 100k rows folded by the extractive
// summarizer, the earlier ones by an instant one), then repeated
// prepares are timed against JSON.stringify of the same response; plus one compaction's own work.
import { randomUUID } from 'node:crypto';
import { ExtensionsFile, type ConfigSnapshot } from '../../daemon/config.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';
import { engineSetup } from '../../daemon/engine-setup.ts';
import type { ToolSpec } from '../../protocol/prepared.ts';
import { sessionHead } from '../../storage/transcript/history.ts';
import { savePrepared } from '../../storage/log/prepared-requests.ts';
import { loadRollingState } from '../../storage/state/rolling.ts';
import { loadCatalog } from '../../strategies/catalog/models.ts';
import { adoptSession, prepareRequest, type EngineSetup, type PrepareArgs, type Prepared } from '../../strategies/prepare.ts';
import { createSummarizer, SummarizerConfig, type Summarizer, type SummaryRequest, type SummaryResult } from '../../strategies/summarizer/index.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import type { Corpus } from './corpus.ts';
import type { Dataset } from './dataset.ts';
import { corpusUnits, RowStream } from './rows.ts';
import { alternateTimed, fmtBytes, nowMs, repeat, stats, type Stats, withLoopMonitor } from './timing.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';

export const WINDOW_TOKENS = 200_000;
/** A small verbatim tail (2% of the window) so the timing shows what scales with history. */
export const TAIL_PERCENT = 2;
export const MODEL_ID = 'claude-sonnet-4-5';
/** History rows folded per forced compaction while setting a session up. */
export const COMPACT_EVERY = 100_000;

export function benchConfig(): ConfigSnapshot {
  return {
    modules: BUILTIN_SET,
    extensions: ExtensionsFile.parse({ rolling: { contextWindowTokens: WINDOW_TOKENS, tailPercent: TAIL_PERCENT } }),
    models: loadCatalog(),
    version: 1,
  };
}

/** A coding agent's prompt of realistic size: about 9 KB of instructions and eight tools. */
export function agentPrompt(): { instructions: string; tools: ToolSpec[] } {
  const rules = [
    'Read files before editing them and keep edits minimal.',
    'Prefer the project scripts (npm test, npm run build) over ad-hoc commands.',
    'Never print secrets; redact tokens found in logs.',
    'When a command fails, read the error, form a hypothesis, and verify it before changing code.',
    'Explain what you changed and why in one short paragraph at the end of a task.',
  ];
  const instructions = Array.from({ length: 36 }, (_, i) => `${i + 1}. ${rules[i % rules.length]} (section ${Math.floor(i / 5) + 1})`).join('\n').repeat(4);
  const tool = (name: string, description: string, props: Record<string, string>): ToolSpec => ({
    name,
    description,
    input_schema: {
      type: 'object',
      properties: Object.fromEntries(Object.entries(props).map(([k, d]) => [k, { type: 'string', description: d }])),
      required: Object.keys(props).slice(0, 1),
    },
  });
  const tools = [
    tool('read', 'Read a file from the workspace, optionally a line range.', { path: 'absolute path', offset: 'first line', limit: 'lines' }),
    tool('write', 'Create or overwrite a file.', { path: 'absolute path', content: 'full file content' }),
    tool('edit', 'Replace one exact occurrence of a string in a file.', { path: 'absolute path', old: 'text to replace', new: 'replacement' }),
    tool('bash', 'Run a shell command in the workspace and return stdout, stderr and the exit code.', { command: 'the command', timeout: 'seconds' }),
    tool('grep', 'Search file contents with a regular expression.', { pattern: 'regex', path: 'folder', glob: 'file filter' }),
    tool('glob', 'List files matching a glob pattern.', { pattern: 'glob', path: 'folder' }),
    tool('web_fetch', 'Fetch a URL and return its text.', { url: 'http(s) URL', prompt: 'what to extract' }),
    tool('todo', 'Maintain the task list for the current job.', { items: 'JSON list of items' }),
  ];
  return { instructions, tools };
}

/** The summarizer wrapped to measure its own time. */
class TimedSummarizer implements Summarizer {
  ms = 0;
  calls = 0;
  promptChars = 0;
  constructor(private readonly inner: Summarizer) {}
  get backend() {
    return this.inner.backend;
  }
  get model() {
    return this.inner.model;
  }
  async summarize(req: SummaryRequest): Promise<SummaryResult> {
    const t0 = nowMs();
    try {
      return await this.inner.summarize(req);
    } finally {
      this.ms += nowMs() - t0;
      this.calls++;
      this.promptChars += req.prompt.length;
    }
  }
}

/** Answers a fixed short text at once: a compaction's cost without any summarizing. */
const instantSummarizer: Summarizer = {
  backend: 'client',
  model: null,
  async summarize(): Promise<SummaryResult> {
    return { text: 'The user and the agent worked on the codebase; details were dropped.', backend: 'client', model: null, outputTokens: 17 };
  },
};

function setupFor(ds: Dataset, summarizer?: Summarizer): EngineSetup {
  const setup = engineSetup({ db: ds.db, config: benchConfig(), configErrors: [], sid: ds.main.sid, modelId: MODEL_ID, conn: undefined, env: {} });
  if (setup.strategy?.name !== 'rolling') throw new Error(`expected the rolling strategy, got ${setup.strategy?.name ?? 'none'}`);
  return summarizer === undefined ? setup : { ...setup, summarizer };
}

function argsFor(ds: Dataset, head: number, cache: KernelCache, force: boolean): PrepareArgs {
  const { instructions, tools } = agentPrompt();
  return { db: ds.db, session: { sid: ds.main.sid, name: ds.main.name }, head, instructions, tools, force, focus: undefined, cache, signal: undefined };
}

/**
 * Two consecutive corpus units appended to the main session before the prepare measurement:
 * a large one (over the 2% tail budget, so it never joins the tail) and a typical one, which
 * is then the whole verbatim tail at every size. Without this the tail would be whatever unit
 * the session happens to end in, and sizes would not be comparable.
 */
async function appendClosingTurn(ds: Dataset, corpus: Corpus): Promise<number> {
  const units = corpusUnits(corpus);
  let i = units.findIndex((u, k) => u.chars > 24_000 && (units[k + 1]?.rows ?? 0) >= 6 && (units[k + 1]?.rows ?? 99) <= 40 && (units[k + 1]?.chars ?? 0) >= 8_000 && (units[k + 1]?.chars ?? 1e9) <= 40_000);
  if (i < 0) {
    // A corpus without such a pair: the largest unit, then whatever follows it.
    i = units.reduce((best, u, k) => (k + 1 < units.length && u.chars > units[best]!.chars ? k : best), 0);
  }
  const a = units[i]!;
  const b = units[i + 1]!;
  const stream = new RowStream(corpus, { start: a.start, keyPrefix: 'close', idTag: 'close' });
  const res = await appendRows(ds.db, ds.main.name, stream.take(a.rows + b.rows));
  ds.main.head = res.head;
  ds.main.rows += a.rows + b.rows;
  ds.mainHeads.push({ rows: ds.main.rows, head: res.head });
  return b.rows;
}

function clearState(ds: Dataset): void {
  ds.db.prepare('DELETE FROM rolling_state WHERE sid = ?').run(ds.main.sid);
}

/** The response the daemon would send for a prepared request. */
function response(p: Prepared, head: number): unknown {
  return { prepared_id: randomUUID(), head, system: p.system, inputs: p.inputs, tools: p.tools, compacted: p.compacted, observation: p.observation };
}

export interface CompactionWork {
  history_rows: number;
  extractive: { total_ms: number; summarizer_ms: number; own_ms: number; summarizer_calls: number; prompt_chars: number; evicted_rows: number; compacted: boolean; max_stall_ms: number; peak_rss_bytes: number };
  instant: { total_ms: number; evicted_rows: number; compacted: boolean; max_stall_ms: number; peak_rss_bytes: number };
  /** Compactions the forced one ran as (the engine compacts a long history in stages first). */
  compactions: number;
}

/** Samples this process's resident set every 20 ms while `fn` runs: the peak above where it stood. */
async function withPeakRss<T>(fn: () => Promise<T>): Promise<{ value: T; peakRssBytes: number }> {
  const before = process.memoryUsage.rss();
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
  try {
    const value = await fn();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { value, peakRssBytes: peak - before };
  } finally {
    clearInterval(sampler);
  }
}

async function forcedCompaction(ds: Dataset, summarizer: Summarizer): Promise<{ ms: number; maxStallMs: number; peakRssBytes: number; prepared: Prepared }> {
  clearState(ds);
  const cache = new KernelCache();
  const setup = setupFor(ds, summarizer);
  const args = argsFor(ds, ds.main.head, cache, true);
  adoptSession(setup, args);
  const { value: run, peakRssBytes } = await withPeakRss(() => withLoopMonitor(() => prepareRequest(setup, args)));
  return { ms: run.ms, maxStallMs: run.maxStallMs, peakRssBytes, prepared: run.value };
}

/** Compactions logged for the main session since `afterId`. */
function compactionsSince(ds: Dataset, afterId: number): number {
  return ds.db.prepare<[number, number], number>('SELECT count(*) FROM compactions WHERE sid = ? AND id > ?').pluck().get(ds.main.sid, afterId) ?? 0;
}

function lastCompactionId(ds: Dataset): number {
  return ds.db.prepare<[], number | null>('SELECT max(id) FROM compactions').pluck().get() ?? 0;
}

function evicted(ds: Dataset): number {
  const r = ds.db.prepare<[number], { evicted_rows: number }>('SELECT evicted_rows FROM compactions WHERE sid = ? ORDER BY id DESC LIMIT 1').get(ds.main.sid);
  return r?.evicted_rows ?? 0;
}

/** One forced compaction of the whole main session, extractive (timed) and instant. */
export async function benchCompactionWork(ds: Dataset, log: (s: string) => void): Promise<CompactionWork> {
  const instant = await forcedCompaction(ds, instantSummarizer);
  const instantEvicted = evicted(ds);
  const timed = new TimedSummarizer(createSummarizer(SummarizerConfig.parse({}), { env: {} }));
  const sinceId = lastCompactionId(ds);
  const ext = await forcedCompaction(ds, timed);
  const compactions = compactionsSince(ds, sinceId);
  clearState(ds);
  const out: CompactionWork = {
    history_rows: ds.main.rows,
    extractive: {
      total_ms: ext.ms,
      summarizer_ms: timed.ms,
      own_ms: ext.ms - timed.ms,
      summarizer_calls: timed.calls,
      prompt_chars: timed.promptChars,
      evicted_rows: evicted(ds),
      compacted: ext.prepared.compacted,
      max_stall_ms: ext.maxStallMs,
      peak_rss_bytes: ext.peakRssBytes,
    },
    instant: { total_ms: instant.ms, evicted_rows: instantEvicted, compacted: instant.prepared.compacted, max_stall_ms: instant.maxStallMs, peak_rss_bytes: instant.peakRssBytes },
    compactions,
  };
  log(
    `  compaction of ${ds.main.rows} rows (${compactions} compaction(s)): extractive ${out.extractive.total_ms.toFixed(0)} ms (summarizer ${out.extractive.summarizer_ms.toFixed(0)} ms), instant ${
      out.instant.total_ms.toFixed(0)
    } ms; longest stall ${out.extractive.max_stall_ms.toFixed(1)} / ${out.instant.max_stall_ms.toFixed(1)} ms; peak RSS +${fmtBytes(out.extractive.peak_rss_bytes)} / +${fmtBytes(out.instant.peak_rss_bytes)}`,
  );
  return out;
}

export interface PrepareResult {
  history_rows: number;
  /**
   * Forced compactions run to set the session up, their times, and which summarizer folded
   * each (only the last COMPACT_EVERY rows of history are summarized by the extractive one).
   */
  setup_compactions: Array<{ head: number; ms: number; compacted: boolean; summarizer: 'extractive' | 'instant' }>;
  /** Characters of the saved summary the timed prepares send. */
  summary_chars: number;
  tail_rows: number;
  estimated_tokens: number;
  request_bytes: number;
  /** First prepare with a new kernel cache (the saved cut is verified against the history). */
  cold_ms: number;
  prepare: Stats;
  stringify: Stats;
  /** sessionHead + engineSetup + prepareRequest + savePrepared + stringify, as the prepare handler does. */
  handler: Stats;
  parts: { session_head: Stats; engine_setup: Stats; save_prepared: Stats };
  /** This size and the baseline session timed in alternating blocks, for a same-moment ratio. */
  versus_baseline?: { baseline_rows: number; this: Stats; baseline: Stats; ratio: number };
}

/** A main session compacted and ready for nothing-due prepares, with its kernel cache. */
export interface PrepareSession {
  ds: Dataset;
  setup: EngineSetup;
  args: PrepareArgs;
  setupCompactions: PrepareResult['setup_compactions'];
  coldMs: number;
}

/**
 * Appends the closing turn, then compacts the main session (forced) every COMPACT_EVERY rows of
 * history as a daemon would have while it grew, then makes the first prepare of a new kernel
 * (timed: it verifies the saved cut).
 *
 * The compactions that fold the last COMPACT_EVERY rows of history use the extractive
 * summarizer, the earlier ones the instant one. The timed prepares read the saved summary as
 * a text of at most the summary cap, and the last extractive fold over COMPACT_EVERY rows
 * fills it as a whole chain of them would, so the state they see is of the same kind and size
 * (summary_chars says which size); at 1M rows this skips nine of ten extractive folds, most of
 * the setup's time. The cuts, and so the tail and the cold check, are the same either way.
 */
export async function preparedSession(ds: Dataset, corpus: Corpus, log: (s: string) => void, opts: { extractiveAll?: boolean } = {}): Promise<PrepareSession> {
  await appendClosingTurn(ds, corpus);
  clearState(ds);
  const setup = setupFor(ds);
  const early = { ...setup, summarizer: instantSummarizer };
  const cache = new KernelCache();
  adoptSession(setup, argsFor(ds, ds.main.head, cache, false));
  const setupCompactions: PrepareResult['setup_compactions'] = [];
  for (let target = Math.min(COMPACT_EVERY, ds.main.rows);; target = Math.min(target + COMPACT_EVERY, ds.main.rows)) {
    const entry = [...ds.mainHeads].reverse().find((h) => h.rows <= target);
    const head = target === ds.main.rows ? ds.main.head : (entry?.head ?? ds.main.head);
    const summarizer = opts.extractiveAll === true || target > ds.main.rows - COMPACT_EVERY ? 'extractive' : 'instant';
    const t0 = nowMs();
    const p = await prepareRequest(summarizer === 'extractive' ? setup : early, argsFor(ds, head, cache, true));
    setupCompactions.push({ head, ms: nowMs() - t0, compacted: p.compacted, summarizer });
    if (!p.compacted) throw new Error(`setup compaction at head ${head} did not compact: ${p.reason}`);
    if (target >= ds.main.rows) break;
  }
  log(`  ${setupCompactions.length} setup compaction(s): ${setupCompactions.map((c) => `${c.ms.toFixed(0)} ms (${c.summarizer})`).join(', ')}`);

  // A new kernel: its first prepare verifies the saved cut.
  const args = argsFor(ds, ds.main.head, new KernelCache(), false);
  const c0 = nowMs();
  const cold = await prepareRequest(setup, args);
  const coldMs = nowMs() - c0;
  if (cold.compacted || cold.observation.due) throw new Error('prepare was due; the benchmark wants nothing due');
  return { ds, setup, args, setupCompactions, coldMs };
}

function savedSummaryChars(ps: PrepareSession): number {
  const state = loadRollingState(ps.ds.db, ps.ds.main.sid);
  return state !== undefined && 'summary' in state ? state.summary.length : 0;
}

function timedPrepare(ps: PrepareSession): () => Promise<Prepared> {
  return async () => {
    const p = await prepareRequest(ps.setup, ps.args);
    if (p.compacted) throw new Error('prepare compacted');
    return p;
  };
}

/** Median of repeated nothing-due prepares (kernel cache reused), stringify, and the handler path. */
export async function measurePrepare(ps: PrepareSession, opts: { runs: number }, log: (s: string) => void): Promise<PrepareResult> {
  const { ds, args } = ps;
  const prep = await repeat(timedPrepare(ps), { warmup: 5, minRuns: opts.runs, maxRuns: opts.runs });
  const prepared = prep.value;
  const res = response(prepared, ds.main.head);
  const json = await repeat(() => JSON.stringify(res), { warmup: 5, minRuns: opts.runs, maxRuns: opts.runs });
  const tail = prepared.observation.sections.find((s) => s.name === 'tail');
  const tailRows = Number(/\((\d+) rows/.exec(tail?.source ?? '')?.[1] ?? 0);

  // The handler's path around prepareRequest.
  const snap: number[] = [];
  const eng: number[] = [];
  const save: number[] = [];
  const { instructions, tools } = agentPrompt();
  const handler = await repeat(
    async () => {
      const t0 = nowMs();
      const head = sessionHead(ds.db, ds.main.name).head;
      const t1 = nowMs();
      const s = engineSetup({ db: ds.db, config: benchConfig(), configErrors: [], sid: ds.main.sid, modelId: MODEL_ID, conn: undefined, env: {} });
      const t2 = nowMs();
      const p = await prepareRequest(s, { ...args, head });
      const t3 = nowMs();
      const id = randomUUID();
      savePrepared(ds.db, { id, sid: ds.main.sid, head, model: MODEL_ID, estimate: p.observation.estimated_input_tokens, observation: { ...p.observation, prepared_id: id }, prompt: { instructions, tools } });
      const t4 = nowMs();
      JSON.stringify(response(p, head));
      snap.push(t1 - t0);
      eng.push(t2 - t1);
      save.push(t4 - t3);
    },
    { warmup: 3, minRuns: Math.max(5, Math.floor(opts.runs / 2)), maxRuns: Math.max(5, Math.floor(opts.runs / 2)) },
  );
  const { value: _p, ...prepStats } = prep;
  const { value: _j, ...jsonStats } = json;
  const { value: _h, ...handlerStats } = handler;
  const out: PrepareResult = {
    history_rows: ds.main.rows,
    setup_compactions: ps.setupCompactions,
    summary_chars: savedSummaryChars(ps),
    tail_rows: tailRows,
    estimated_tokens: prepared.observation.estimated_input_tokens,
    request_bytes: Buffer.byteLength(JSON.stringify(res)),
    cold_ms: ps.coldMs,
    prepare: prepStats,
    stringify: jsonStats,
    handler: handlerStats,
    parts: { session_head: stats(snap), engine_setup: stats(eng), save_prepared: stats(save) },
  };
  log(
    `  prepare @${ds.main.rows}: median ${prepStats.median_ms.toFixed(2)} ms, stringify ${jsonStats.median_ms.toFixed(2)} ms, cold ${ps.coldMs.toFixed(0)} ms, handler ${
      handlerStats.median_ms.toFixed(2)
    } ms (tail ${tailRows} rows, summary ${out.summary_chars} chars)`,
  );
  return out;
}

/** Times two prepared sessions in alternating blocks (timing.ts alternateTimed); ratio a/b. */
export function alternate(a: PrepareSession, b: PrepareSession, opts: { blocks: number; perBlock: number }): Promise<{ a: Stats; b: Stats; ratio: number }> {
  return alternateTimed(timedPrepare(a), timedPrepare(b), opts);
}
