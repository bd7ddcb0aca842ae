// compaction.prepare: project with the active strategy, compact when due or forced, project
// again. A preparation compacts at most once, so the second projection is what goes out even
// if it is still due. Also the dry run and the failure latch bookkeeping. No daemon imports:
// the caller hands in the resolved strategy, settings, model and summarizer.
import type { CompactionRecord, Observation, PlainInput, Section, ToolSpec } from '../protocol/prepared.ts';
import type { Db } from '../storage/db.ts';
import { autoFailures, lastCompaction, logCompaction, setAutoFailures } from '../storage/engine-log.ts';
import type { ModelEntry } from './catalog/models.ts';
import type { CompactOutcome, CompactPlan, Projection, Strategy, StrategyInput } from './contract.ts';
import { inputsTokens, pinnedTokens, reachesPercent, textTokens } from './estimate.ts';
import { historyRows } from './harness/history-rows.ts';
import { resolveWindow, validateWindow, type WindowSettings } from './harness/window.ts';
import { forModel, plainTarget } from './projection.ts';
import type { Summarizer } from './summarizer/types.ts';

/** Consecutive failed automatic compactions after which automatic tries stop. */
export const LATCH_LIMIT = 3;

export interface EngineSetup {
  /** The session's enabled strategy; null on a host without one (requests go out whole). */
  strategy: Strategy | null;
  /** That strategy's section of extensions.json. */
  settings: WindowSettings;
  modelId: string | null;
  model: ModelEntry | undefined;
  /** Text the enabled extensions add to the system prompt. */
  extensionContext: string;
  /** Tools the enabled extensions give the model, after the agent's own. */
  extensionTools: ToolSpec[];
  summarizer: Summarizer;
  configErrors: Array<{ file: string; message: string }>;
}

export interface PrepareArgs {
  db: Db;
  session: { sid: number; name: string };
  head: number;
  instructions: string;
  tools: ToolSpec[];
  /** Compact now whether or not the projection is due (`/compact`, `prepare {force}`). */
  force: boolean;
  focus: string | undefined;
  cache: Map<string, unknown>;
  signal: AbortSignal | undefined;
  now?: () => number;
}

export interface Prepared {
  system: string;
  tools: ToolSpec[];
  inputs: PlainInput[];
  compacted: boolean;
  /** Why an attempted compaction wrote nothing, when it did not. */
  reason: string | null;
  observation: Observation;
}

export function composeSystem(instructions: string, extensionContext: string): string {
  if (extensionContext === '') return instructions;
  return instructions === '' ? extensionContext : `${instructions}\n\n${extensionContext}`;
}

interface Frame {
  input: StrategyInput;
  system: string;
  tools: ToolSpec[];
  systemSection: Section;
  problems: string[];
}

function frame(setup: EngineSetup, args: PrepareArgs): Frame {
  const system = composeSystem(args.instructions, setup.extensionContext);
  const tools = [...args.tools, ...setup.extensionTools.filter((t) => !args.tools.some((a) => a.name === t.name))];
  const pinned = pinnedTokens(system, tools);
  const window = resolveWindow(setup.settings, setup.model);
  const input: StrategyInput = {
    db: args.db,
    session: args.session,
    head: args.head,
    window,
    pinnedTokens: pinned,
    target: { ...plainTarget(args.session.name), provider: setup.model?.provider, model: setup.modelId ?? undefined },
    cache: args.cache,
  };
  const systemSection: Section = {
    name: 'system',
    source: `instructions (~${textTokens(args.instructions)} tokens)${setup.extensionContext === '' ? '' : ' + extension context'} + ${tools.length} tool schema(s)`,
    estimated_tokens: pinned,
  };
  return { input, system, tools, systemSection, problems: validateWindow(window, pinned) };
}

/** Without a strategy every row goes out as it is. */
function uncompacted(input: StrategyInput): Projection {
  const rows = historyRows(input, 1);
  const inputs = forModel(rows, input.target);
  const estimate = input.pinnedTokens + inputsTokens(inputs);
  const sections: Section[] = rows.length === 0 ? [] : [{ name: 'history', source: `rows #${rows[0]!.seq}-#${rows[rows.length - 1]!.seq} (no compaction strategy installed)`, estimated_tokens: inputsTokens(inputs) }];
  const { window, triggerPercent } = input.window;
  return { inputs, sections, estimate, due: window !== null && reachesPercent(estimate, window, triggerPercent), notes: [] };
}

function project(setup: EngineSetup, input: StrategyInput): Projection {
  return setup.strategy === null ? uncompacted(input) : setup.strategy.project(input);
}

function observe(
  setup: EngineSetup,
  f: Frame,
  p: Projection,
  extra: { compacted: boolean; failure: string | null; db: Db },
): Observation {
  const failures = autoFailures(extra.db, f.input.session.sid);
  return {
    session: f.input.session.name,
    strategy: setup.strategy?.name ?? null,
    model: setup.modelId,
    window: f.input.window.window,
    window_source: f.input.window.source,
    trigger_percent: f.input.window.triggerPercent,
    tail_percent: f.input.window.tailPercent,
    due: p.due,
    compacted: extra.compacted,
    estimated_input_tokens: p.estimate,
    provider_input_tokens: null,
    provider_cached_tokens: null,
    token_ratio: 1,
    calibrated_input_tokens: p.estimate,
    prepared_id: null,
    head: f.input.head,
    sections: [f.systemSection, ...p.sections],
    last_compaction: lastCompaction(extra.db, f.input.session.sid),
    failure: extra.failure,
    auto_failures: failures,
    latched: failures >= LATCH_LIMIT,
    notes: [...f.problems, ...p.notes],
    config_errors: setup.configErrors,
  };
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Project, compact when due (and not latched) or forced, and project again. Every attempt
 * lands in the compaction log; automatic failures count toward the latch, a success or a
 * forced attempt clears it.
 */
export async function prepareRequest(setup: EngineSetup, args: PrepareArgs): Promise<Prepared> {
  const now = args.now ?? Date.now;
  const f = frame(setup, args);
  const first = project(setup, f.input);
  const sid = args.session.sid;
  const latched = autoFailures(args.db, sid) >= LATCH_LIMIT;
  const strategy = setup.strategy;
  const attempt = strategy !== null && (args.force || (first.due && !latched));
  if (!attempt) {
    const failure = first.due && latched ? `automatic compaction is paused after ${LATCH_LIMIT} consecutive failures; run /compact to retry` : null;
    return { system: f.system, tools: f.tools, inputs: first.inputs, compacted: false, reason: null, observation: observe(setup, f, first, { compacted: false, failure, db: args.db }) };
  }

  if (args.force) setAutoFailures(args.db, sid, 0);
  const started = now();
  let outcome: CompactOutcome;
  let error: string | null = null;
  try {
    outcome = await strategy.compact(f.input, first, { forced: args.force, focus: args.focus, summarizer: setup.summarizer, signal: args.signal });
  } catch (err) {
    if (args.signal?.aborted === true) throw err;
    error = describe(err);
    outcome = { compacted: false, reason: error, backend: setup.summarizer.backend, summarizerTokensIn: 0, summarizerTokensOut: 0, evictedRows: 0 };
  }
  const second = outcome.compacted ? project(setup, f.input) : first;
  // "Nothing to evict" is a state, not a failure: it costs no model call and must not latch.
  const failed = error !== null || (!outcome.compacted && outcome.summarizerTokensIn > 0);
  const record: CompactionRecord = {
    at: started,
    strategy: strategy.name,
    forced: args.force,
    ok: outcome.compacted,
    duration_ms: Math.max(0, Math.round(now() - started)),
    backend: outcome.backend,
    summarizer_tokens_in: outcome.summarizerTokensIn,
    summarizer_tokens_out: outcome.summarizerTokensOut,
    tokens_before: first.estimate,
    tokens_after: second.estimate,
    evicted_rows: outcome.evictedRows,
    error: outcome.compacted ? null : (error ?? outcome.reason),
  };
  args.db.transaction(() => {
    logCompaction(args.db, sid, record);
    if (outcome.compacted) setAutoFailures(args.db, sid, 0);
    else if (failed && !args.force) setAutoFailures(args.db, sid, autoFailures(args.db, sid) + 1);
  })();
  return {
    system: f.system,
    tools: f.tools,
    inputs: second.inputs,
    compacted: outcome.compacted,
    reason: outcome.compacted ? null : record.error,
    observation: observe(setup, f, second, { compacted: outcome.compacted, failure: record.error, db: args.db }),
  };
}

/** What `/compact` would do now, without a model call or a write. */
export function planCompaction(setup: EngineSetup, args: PrepareArgs): { plan: CompactPlan | null; observation: Observation } {
  const f = frame(setup, args);
  const p = project(setup, f.input);
  const plan = setup.strategy === null ? null : setup.strategy.plan(f.input, p, true);
  return { plan, observation: observe(setup, f, p, { compacted: false, failure: null, db: args.db }) };
}

/** The read-only projection, for /context before any request was prepared. */
export function inspectRequest(setup: EngineSetup, args: PrepareArgs): Observation {
  const f = frame(setup, args);
  return observe(setup, f, project(setup, f.input), { compacted: false, failure: null, db: args.db });
}

/** One-time upkeep of the strategy's saved state when a kernel adopts the session. */
export function adoptSession(setup: EngineSetup, args: PrepareArgs): void {
  if (setup.strategy?.adopt === undefined) return;
  setup.strategy.adopt(frame(setup, args).input);
}
