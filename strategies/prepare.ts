// compaction.prepare: project with the active strategy, compact when due or forced, project
// again. A preparation compacts at most once, so the second projection is what goes out even
// if it is still due. Also the dry run and the failure latch bookkeeping. No daemon imports:
// the caller hands in the resolved strategy, settings, model and summarizer.
import { sameJson } from '../protocol/json-equal.ts';
import type { Upstream } from '../protocol/methods.ts';
import type { ImageCounts, Observation, OutPart, PlainInput, Section, ToolSpec } from '../protocol/prepared.ts';
import { commitOwed, type Db, durable, readTogether } from '../storage/db.ts';
import { giveWay } from '../protocol/time-slice.ts';
import { readSessionBook, type SessionBook } from '../storage/log/bookkeeping.ts';
import { autoFailures, logCompaction, setAutoFailures } from '../storage/log/compaction-log.ts';
import { type PromptParts } from '../storage/log/known-prompt.ts';
import { scheduleElision, type ElisionStats } from '../storage/images/elision.ts';
import { sessionRewrites } from '../storage/transcript/user-rows.ts';
import { readsImages, type ModelEntry } from './catalog/models.ts';
import type { CompactOptions, CompactOutcome, DryRun, FoldPlugin, Layer, LayerView, Projection, Strategy, StrategyInput } from './contract.ts';
import { imageTokens, inputsTokens, pinnedTokens, textTokens } from './estimate.ts';
import { stageHead } from './catch-up.ts';
import { firstCarriedSeq } from './harness/carried.ts';
import { forgetPassedRows, historyRows } from './harness/history-rows.ts';
import { projectTail } from './harness/row-memo.ts';
import { cacheSlot, type KernelCache } from './harness/kernel-cache.ts';
import { calibrated, isDue, overWindow, resolveWindow, toolOutputCap, validateWindow, type WindowSettings } from './harness/window.ts';
import type { ProjectionTarget } from './projection.ts';
import { metered } from './summarizer/metered.ts';
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
  /**
   * The system prompt's parts to keep sending in place of the client's instructions and
   * `extensionContext` until this session's next compaction: what the model last saw before a
   * reload or a restart changed them (the model learns of the change from a notice in its
   * history), so the cached prefix survives.
   */
  pinnedPrompt?: PromptParts | undefined;
  /** Tools the enabled extensions give the model, after the agent's own. */
  extensionTools: ToolSpec[];
  summarizer: Summarizer;
  configErrors: Array<{ file: string; message: string }>;
  /** Enabled layers, in the order they run (notes first). */
  layers: readonly Layer[];
  /** Enabled fold plugins the strategy reads through `prior` (its own excluded). */
  folds: readonly FoldPlugin[];
  /** Told once of every layer that threw (the daemon logs it); the turn goes on without it. */
  onLayerError?: (layer: string, err: unknown) => void;
}

export interface PrepareArgs {
  db: Db;
  session: { sid: number; name: string };
  head: number;
  instructions: string;
  /**
   * A system prompt the client sends on its own and the daemon never composes (a proxied
   * agent's `system` and system-role messages): counted in the pinned cost, never pinned.
   */
  clientPrompt?: string | undefined;
  tools: ToolSpec[];
  /** Compact now whether or not the projection is due (`/compact`, `prepare {force}`). */
  force: boolean;
  focus: string | undefined;
  cache: KernelCache;
  signal: AbortSignal | undefined;
  /** Provider the request goes to, when the client says (wins over the catalog's). */
  provider?: string | undefined;
  /** What the client's upstream declared it accepts. */
  upstream?: Upstream | undefined;
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
  /** The extension context `system` carries: the pinned one, until a compaction rebuilt it. */
  extensionContext: string;
  /** The client's instructions `system` carries: the pinned ones, until a compaction rebuilt it. */
  instructions: string;
  /** Calls made to the summarizer (the daemon says where a client summary went only after one). */
  summarizerCalls: number;
}

export function composeSystem(instructions: string, extensionContext: string): string {
  if (extensionContext === '') return instructions;
  return instructions === '' ? extensionContext : `${instructions}\n\n${extensionContext}`;
}

/**
 * What the history of one request goes out in: the strategy's input, the system prompt (the
 * client's instructions and the extensions' context) and the tools.
 */
interface Envelope {
  input: StrategyInput;
  system: string;
  /** The instructions inside `system`. */
  instructions: string;
  /** The extension context inside `system`. */
  context: string;
  tools: ToolSpec[];
  systemSection: Section;
  problems: string[];
  /** The session's bookkeeping as this request read it. */
  book: SessionBook;
}

/** Where this request goes: the client's word first, then its upstream's, then the catalog's. */
export function targetOf(setup: Pick<EngineSetup, 'model' | 'modelId'>, args: Pick<PrepareArgs, 'session' | 'provider' | 'upstream'>, maxOutputTokens: number | null): ProjectionTarget {
  const up = args.upstream;
  return {
    session: args.session.name,
    provider: args.provider ?? up?.provider ?? setup.model?.provider,
    model: setup.modelId ?? undefined,
    readsImages: readsImages(setup.model),
    maxImageEdgePx: up?.max_image_edge_px ?? setup.model?.max_image_edge_px,
    maxImages: up?.max_images ?? setup.model?.max_images_per_request,
    maxImageBytes: up?.max_image_bytes,
    uploadsImages: up?.uploads_images ?? false,
    maxOutputTokens,
  };
}

/** Every tool a request carries: the client's, then the extensions' it does not name itself. */
export function requestTools(clientTools: readonly ToolSpec[], extensionTools: readonly ToolSpec[]): ToolSpec[] {
  return [...clientTools, ...extensionTools.filter((t) => !clientTools.some((a) => a.name === t.name))];
}

/** The tools the session's last request carried (see `sessionTools`). */
const LAST_TOOLS = cacheSlot<ToolSpec[]>('prepare.tools');

/**
 * The request's tools, as the very array the session's last request had when they are the same:
 * an agent sends the same schemas on every turn as new objects, and what is derived from them
 * (their tokens, their digest, their bytes in the reply) is kept by that array's identity.
 */
function sessionTools(cache: KernelCache, tools: ToolSpec[]): ToolSpec[] {
  const last = cache.get(LAST_TOOLS);
  if (last !== undefined && sameJson(last, tools)) return last;
  cache.set(LAST_TOOLS, tools);
  return tools;
}

/** A session's system prompt and what it and the tools pin, while the texts and the tool list stay the same. */
interface KeptSystem {
  instructions: string;
  context: string;
  tools: readonly ToolSpec[];
  system: string;
  pinned: number;
  instructionsTokens: number;
}

const SYSTEM = cacheSlot<KeptSystem>('prepare.system');

/**
 * The system prompt composed and measured once while the instructions and the extension context
 * are the same text (compared, the client sends them anew on every call) and the tool list the
 * same (sessionTools): composing made a new 10-20 KB string on every request, which measuring
 * it then flattened.
 */
function keptSystem(cache: KernelCache, instructions: string, context: string, tools: readonly ToolSpec[]): KeptSystem {
  const kept = cache.get(SYSTEM);
  if (kept !== undefined && kept.tools === tools && kept.instructions === instructions && kept.context === context) return kept;
  const system = composeSystem(instructions, context);
  const made = { instructions, context, tools, system, pinned: pinnedTokens(system, tools), instructionsTokens: textTokens(instructions) };
  cache.set(SYSTEM, made);
  return made;
}

/** The system prompt's parts as this request would build them now, without a pin. */
function currentPrompt(setup: EngineSetup, args: PrepareArgs): PromptParts {
  return { instructions: args.instructions, context: setup.extensionContext };
}

function envelope(setup: EngineSetup, args: PrepareArgs, prompt = setup.pinnedPrompt ?? currentPrompt(setup, args)): Envelope {
  const { instructions, context } = prompt;
  const tools = sessionTools(args.cache, requestTools(args.tools, setup.extensionTools));
  const kept = keptSystem(args.cache, instructions, context, tools);
  const system = kept.system;
  const own = args.clientPrompt === undefined || args.clientPrompt === '' ? 0 : textTokens(args.clientPrompt);
  const pinned = kept.pinned + own;
  const book = readSessionBook(args.db, args.session.sid, setup.modelId);
  const window = resolveWindow(setup.settings, setup.model, book.tokenRatio);
  const input: StrategyInput = {
    db: args.db,
    session: args.session,
    head: args.head,
    window,
    settings: setup.settings,
    pinnedTokens: pinned,
    target: targetOf(setup, args, toolOutputCap(setup.settings, window)),
    folds: setup.folds,
    cache: args.cache,
  };
  // What the layers may add is kept free under the window (never counted by the trigger).
  window.reserved = setup.layers.reduce((n, layer) => n + (layer.reserve?.(input) ?? 0), 0);
  const systemSection: Section = {
    name: 'system',
    // A proxied agent's own prompt stands where the instructions would (the daemon composes none).
    source: `${own > 0 && instructions === '' ? `the agent's own system prompt (~${own} tokens)` : `instructions${instructions === args.instructions ? '' : ' from before the last restart'} (~${kept.instructionsTokens + own} tokens)`}${
      context === '' ? '' : context === setup.extensionContext ? ' + extension context' : ' + the extension context from before the last reload'
    } + ${tools.length} tool schema(s)`,
    estimated_tokens: pinned,
  };
  return { input, system, tools, systemSection, problems: validateWindow(window, pinned), instructions, context, book };
}

/** Without a strategy every row goes out as it is. */
function uncompacted(input: StrategyInput): Projection {
  const rows = historyRows(input, 1);
  // The whole history is a verbatim tail: projected once and extended by later requests, as a
  // strategy's tail is, instead of projected and sized whole on every request.
  const { inputs, tokens } = projectTail(input, rows);
  const estimate = input.pinnedTokens + tokens;
  const sections: Section[] = rows.length === 0 ? [] : [{ name: 'history', source: `rows #${rows[0]!.seq}-#${rows[rows.length - 1]!.seq} (no compaction strategy installed)`, estimated_tokens: tokens }];
  return { inputs, sections, estimate, due: isDue(estimate, input.window), notes: [] };
}

function project(setup: EngineSetup, input: StrategyInput): Projection {
  return setup.strategy === null ? uncompacted(input) : setup.strategy.project(input);
}

/**
 * The strategy's request with each layer's part in front, in layer order. `views` holds what a
 * layer's `compact` just produced; every other layer projects. A layer that throws is left out
 * and said in the notes. The trigger is the strategy's: layers never make a request due.
 */
function layered(setup: EngineSetup, input: StrategyInput, p: Projection, views: ReadonlyMap<string, LayerView> = new Map()): Projection {
  if (setup.layers.length === 0) return p;
  const inputs: PlainInput[] = [];
  const sections: Section[] = [];
  const notes: string[] = [];
  for (const layer of setup.layers) {
    let view = views.get(layer.name);
    if (view === undefined) {
      try {
        view = layer.project(input, p);
      } catch (err) {
        setup.onLayerError?.(layer.name, err);
        notes.push(`layer ${layer.name} failed and was left out of this request: ${describe(err)}`);
        continue;
      }
    }
    inputs.push(...view.inputs);
    sections.push(...view.sections);
    notes.push(...view.notes);
  }
  return {
    inputs: [...inputs, ...p.inputs],
    sections: [...sections, ...p.sections],
    estimate: p.estimate + inputsTokens(inputs, input.target.maxImageEdgePx),
    due: p.due,
    notes: [...p.notes, ...notes],
  };
}

/** Each layer's `compact` on the request a compaction produced; a failure keeps its old view. */
async function compactLayers(setup: EngineSetup, input: StrategyInput, before: Projection, after: Projection, opts: CompactOptions): Promise<{ views: Map<string, LayerView>; notes: string[] }> {
  const views = new Map<string, LayerView>();
  const notes: string[] = [];
  for (const layer of setup.layers) {
    try {
      views.set(layer.name, await layer.compact(input, before, after, opts));
    } catch (err) {
      if (opts.signal?.aborted === true) throw err;
      setup.onLayerError?.(layer.name, err);
      notes.push(`layer ${layer.name} could not update after this compaction and keeps its previous state: ${describe(err)}`);
    }
  }
  return { views, notes };
}

function observe(setup: EngineSetup, f: Envelope, p: Projection, extra: { compacted: boolean; failure: string | null; notes: string[] }): Observation {
  const failures = f.book.autoFailures;
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
    token_ratio: f.input.window.ratio,
    calibrated_input_tokens: calibrated(p.estimate, f.input.window),
    prepared_id: null,
    head: f.input.head,
    sections: [f.systemSection, ...p.sections],
    last_compaction: f.book.lastCompaction,
    failure: extra.failure,
    auto_failures: failures,
    latched: failures >= LATCH_LIMIT,
    notes: [...f.problems, ...p.notes, ...extra.notes, ...(overWindow(p.estimate, f.input.window) ? [overWindowNote(p, f.input)] : []), ...orphanNote(f.book.orphanResults)],
    config_errors: setup.configErrors,
    cache_breaks: [],
    images: imageCounts(f.book.elision, f.input, p.inputs),
  };
}

/** The request's images and their estimated cost, with what elision did in the session so far. */
function imageCounts(e: ElisionStats, input: StrategyInput, inputs: readonly PlainInput[]): ImageCounts {
  let count = 0;
  let tokens = 0;
  const add = (p: OutPart): void => {
    if (p.type !== 'image') return;
    count++;
    tokens += imageTokens(p.width, p.height, input.target.maxImageEdgePx);
  };
  for (const i of inputs) for (const p of i.content) (p.type === 'tool_result' ? p.content : [p]).forEach(add);
  return { count, estimated_tokens: tokens, elided: e.imagesElided, payloads_deleted: e.payloadsDeleted, bytes_freed: e.bytesFreed };
}

/** Results whose call id matched no open call are stored and sent as text; /context says how many. */
function orphanNote(n: number): string[] {
  return n === 0 ? [] : [`${n} tool result(s) in this session answer no open call; they are kept and sent as text`];
}

/**
 * Why a request is over the window. Only when the pinned prompt and the verbatim tail alone are
 * over it is the newest exchange to blame; otherwise the note names the largest of the other
 * sections (a summary, a frontier of nodes, folds, notes), which is what did not shrink enough.
 */
function overWindowNote(p: Projection, input: StrategyInput): string {
  const over = `the request (~${calibrated(p.estimate, input.window)} tokens as the provider counts them) is larger than the ${input.window.window ?? 0}-token window`;
  const tail = p.sections.find((s) => s.name === 'tail');
  const largest = p.sections.filter((s) => s !== tail).sort((a, b) => b.estimated_tokens - a.estimated_tokens)[0];
  if (largest === undefined || overWindow(input.pinnedTokens + (tail?.estimated_tokens ?? 0), input.window)) {
    return `${over}: what is left cannot be cut without splitting the newest exchange`;
  }
  return `${over}: the ${largest.name} section takes ~${largest.estimated_tokens} tokens, the verbatim tail only ~${tail?.estimated_tokens ?? 0}`;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * How much a request grows per model call, learned per kernel from consecutive preparations
 * that did not compact (the median of the last few), and the size automatic compaction last
 * left the request at (or found it could not improve on).
 */
interface Pace {
  lastEstimate: number | undefined;
  growths: number[];
  /** Estimate after the last compaction, or before the last attempt that gained nothing. */
  baseline: number | undefined;
  /** Why that last attempt gained nothing; null after a compaction. */
  reason: string | null;
  /**
   * The last preparation went out at or past the trigger, counted with what the layers added,
   * without an attempt to compact: the next one at the trigger compacts (see `decide`).
   */
  waited: boolean;
}
const PACE = cacheSlot<Pace>('prepare.pace');
const PACE_SAMPLES = 8;

function typicalTurn(p: Pace): number {
  if (p.growths.length === 0) return 0;
  const sorted = [...p.growths].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function observePace(p: Pace, estimate: number, compacted: boolean): void {
  if (!compacted && p.lastEstimate !== undefined && estimate > p.lastEstimate) {
    p.growths.push(estimate - p.lastEstimate);
    if (p.growths.length > PACE_SAMPLES) p.growths.shift();
  }
  p.lastEstimate = estimate;
}

/**
 * Why an automatic compaction that is due should wait, or null. It waits while the request
 * has grown by less than one typical turn since the last compaction left it (or since an
 * attempt found nothing worth evicting) — compacting again would only rewrite the summary and
 * miss the prompt cache — unless the request no longer fits the window at all.
 */
function deferral(pace: Pace, p: Projection, input: StrategyInput): string | null {
  // No waiting once the request, with what the layers may add, would not fit the window.
  if (pace.baseline === undefined || overWindow(p.estimate + (input.window.reserved ?? 0), input.window)) return null;
  const turn = typicalTurn(pace);
  const grown = p.estimate - pace.baseline;
  if (grown > 0 && grown >= turn) return null;
  return `automatic compaction waits one turn: the request grew ~${Math.max(0, grown)} tokens since the last compaction, less than a typical turn (~${turn}); the next request at the trigger compacts`;
}

/**
 * Why a request that reaches the trigger only with the layers' part (the notes) is not
 * compacted on this turn: the strategy's trigger counts its own request alone.
 */
function layersHold(setup: EngineSetup, p: Projection, sent: Projection, input: StrategyInput): string {
  const names = setup.layers.map((l) => l.name).join(', ');
  return `automatic compaction waits one turn: the request reaches the trigger only with ${names} (~${sent.estimate - p.estimate} tokens), which the ${setup.strategy?.name ?? 'strategy'} trigger does not count (its own request is ~${
    calibrated(p.estimate, input.window)
  } tokens); the next request at the trigger compacts`;
}

const OVERDUE = 'compaction ran because the previous request had also gone out at the trigger (counted with what the layers add)';

/** What the stages before a request did (strategies/catch-up.ts). */
interface Staged {
  stages: number;
  /** Rows the stages evicted. */
  rows: number;
  /** The last stage's head. */
  head: number;
  calls: number;
  /** Why a stage failed (the summarizer threw), or null. */
  failure: string | null;
}

/**
 * The head of the next stage to compact before this request, or undefined: a history past the
 * saved state many stages long is compacted a stage at a time first (strategies/catch-up.ts).
 * Never while automatic compaction is latched and not forced. On the usual request this is an
 * arithmetic check on the strategy's (cached) tail start.
 */
function nextStage(setup: EngineSetup, args: PrepareArgs, f: Envelope): number | undefined {
  const strategy = setup.strategy;
  if (strategy?.tailFrom === undefined) return undefined;
  if (!args.force && f.book.autoFailures >= LATCH_LIMIT) return undefined;
  return stageHead(f.input, strategy.tailFrom(f.input));
}

/**
 * One stage: an automatic compaction of the history as it stood at `stage`, logged as one, that
 * decodes only the rows since the last. False when the stages stop here: the stage was not due,
 * found nothing to evict, or failed (then `staged.failure` says why).
 */
async function compactStage(setup: EngineSetup, args: PrepareArgs, stage: number, staged: Staged): Promise<boolean> {
  const strategy = setup.strategy;
  if (strategy === null) return false;
  const at: PrepareArgs = { ...args, head: stage, force: false };
  // A turn of the event loop first: the request's own set-up and the stage's first reads would
  // otherwise run as one task, and on a daemon that just started, with its code still cold,
  // that held other sessions' requests past the stall budget.
  await giveWay();
  const f = readTogether(args.db, () => envelope(setup, at));
  await readTogether(args.db, () => strategy.warm?.(f.input));
  const first = readTogether(args.db, () => project(setup, f.input));
  if (!first.due) return false;
  await giveWay();
  const c = await compactAndCommit(setup, at, f, first);
  staged.calls += c.calls;
  if (!c.outcome.compacted) {
    if (c.error !== null) staged.failure = c.error;
    return false;
  }
  staged.stages += 1;
  staged.rows += c.outcome.evictedRows;
  staged.head = stage;
  await giveWay();
  // A request its client gave up on compacts no further stage.
  args.signal?.throwIfAborted();
  return true;
}

/** The request with what the stages before it did: compacted if any stage was, and said in its notes. */
function withStages(prepared: Prepared, staged: Staged): Prepared {
  if (staged.stages === 0 && staged.failure === null) return prepared;
  const what =
    `${staged.stages} compaction(s) in stages (${staged.rows} rows evicted, the last at #${staged.head}) before this request, as requests at those heads would have: the history past the saved state was too long to compact at once`;
  const notes = [...(staged.stages > 0 ? [what] : []), ...(staged.failure === null ? [] : [`a compaction in stages failed and automatic compaction waits for the next request: ${staged.failure}`])];
  const compacted = prepared.compacted || staged.stages > 0;
  return {
    ...prepared,
    compacted,
    observation: { ...prepared.observation, compacted, failure: prepared.observation.failure ?? staged.failure, notes: [...notes, ...prepared.observation.notes] },
    summarizerCalls: prepared.summarizerCalls + staged.calls,
  };
}

/**
 * Project, compact when due (and not latched or deferred) or forced, and project again. Real
 * failures (the summarizer threw: error, timeout, invalid answer) land in the compaction log and
 * count toward the latch; a compaction that had nothing worth evicting is reported in the
 * observation only, costs no latch, and is retried once the request has grown by a turn. A
 * history past the saved state many stages long is first compacted in stages (nextStage).
 * What a compaction committed is on disk before this resolves: its commits leave their fsync
 * owed, and it is paid here, off the event loop (storage/db.ts commitOwed).
 *
 * `opened`: the request's opening, when the caller already made it in a stretch of its own
 * (openRequest); it must be of these setup and arguments, and not used before.
 */
export async function prepareRequest(setup: EngineSetup, args: PrepareArgs, opened?: RequestOpening): Promise<Prepared> {
  const prepared = await prepareCommitted(setup, args, opened);
  await durable(args.db);
  return prepared;
}

/**
 * A request's first synchronous stretch: its envelope, the check for a stage to compact first,
 * the strategy's warm-up check and, when nothing needs warming, the decision. Run it inside the
 * caller's readTogether to share one transaction with the caller's own reads; then either
 * `sentAtOnce` has the request, or prepareRequest goes on from here.
 */
export function openRequest(setup: EngineSetup, args: PrepareArgs): RequestOpening {
  const staged: Staged = { stages: 0, rows: 0, head: 0, calls: 0, failure: null };
  return { staged, ...opening(setup, args, staged, true) };
}

/**
 * The request an opening decided with nothing to wait for (nothing due, nothing to warm, no
 * stage): what prepareRequest would answer, without a turn of the event loop. Undefined
 * otherwise.
 */
export function sentAtOnce(o: RequestOpening): Prepared | undefined {
  return o.decided?.sent;
}

/** What a request's decision found: the request to send, or a compaction to attempt. */
interface Decided {
  first: Projection;
  pace: Pace;
  /** The request as it goes out when no compaction is attempted. */
  sent: Prepared | undefined;
  overdue: boolean;
}

/** A request's opening stretch (openRequest): the envelope, then a stage to compact first, a warm-up under way, or the decision. */
interface Opening {
  f: Envelope;
  stage: number | undefined;
  warming: Promise<void> | undefined;
  decided: Decided | undefined;
}

/** An opening with the record of the stages compacted before it. */
export interface RequestOpening extends Opening {
  staged: Staged;
}

/**
 * From the projection to the request that goes out when nothing is due (one synchronous stretch
 * of reads, see readTogether). Waiting is bounded: a deferral (too little growth since the last
 * compaction, or a request at the trigger only with the layers' part) holds one turn. The next
 * request that still reaches the trigger, counted as it goes out, compacts.
 */
function decide(setup: EngineSetup, args: PrepareArgs, f: Envelope, staged: Staged): Decided {
  const strategy = setup.strategy;
  const first = project(setup, f.input);
  const latched = f.book.autoFailures >= LATCH_LIMIT;
  const pace = args.cache.getOrSet(PACE, (): Pace => ({ lastEstimate: undefined, growths: [], baseline: f.book.lastCompaction?.tokens_after, reason: null, waited: false }));
  const sent = layered(setup, f.input, first);
  const atTrigger = isDue(sent.estimate, f.input.window);
  const overdue = atTrigger && pace.waited && !latched;
  const deferred = args.force || latched || overdue ? null : first.due ? deferral(pace, first, f.input) : null;
  const held = args.force || latched || overdue || first.due || !atTrigger ? null : layersHold(setup, first, sent, f.input);
  const waits = deferred ?? held;
  // After a stage failed only a forced compaction is tried: the same summarizer would be asked
  // again, over more rows.
  const attempt = strategy !== null && (args.force || (staged.failure === null && (overdue || (first.due && !latched && waits === null))));
  pace.waited = !attempt && atTrigger;
  if (attempt) return { first, pace, sent: undefined, overdue: overdue && !args.force };
  observePace(pace, first.estimate, false);
  const failure = first.due && latched ? `automatic compaction is paused after ${LATCH_LIMIT} consecutive failures; run /compact to retry` : deferred === null ? null : pace.reason;
  const notes = waits === null ? [] : [waits];
  const prepared: Prepared = {
    system: f.system,
    tools: f.tools,
    inputs: sent.inputs,
    compacted: false,
    reason: null,
    observation: observe(setup, f, sent, { compacted: false, failure, notes }),
    extensionContext: f.context,
    instructions: f.instructions,
    summarizerCalls: 0,
  };
  return { first, pace, sent: withStages(prepared, staged), overdue: false };
}

/**
 * The usual request has nothing to warm: the envelope, the stage check, the warm check and the
 * decision then share one stretch. Otherwise the warm-up yields, and the decision is a stretch
 * of its own after it. A stage found instead is compacted, and the request opens again.
 */
function opening(setup: EngineSetup, args: PrepareArgs, staged: Staged, staging: boolean): Opening {
  const f = envelope(setup, args);
  const stage = staging ? nextStage(setup, args, f) : undefined;
  if (stage !== undefined) return { f, stage, warming: undefined, decided: undefined };
  const warming = setup.strategy?.warm?.(f.input);
  return { f, stage, warming, decided: warming === undefined ? decide(setup, args, f, staged) : undefined };
}

async function prepareCommitted(setup: EngineSetup, args: PrepareArgs, opened: RequestOpening | undefined): Promise<Prepared> {
  const sid = args.session.sid;
  const strategy = setup.strategy;
  let staged: Staged;
  let o: Opening;
  if (opened === undefined) ({ staged, ...o } = readTogether(args.db, () => openRequest(setup, args)));
  else ({ staged, ...o } = opened);
  while (o.stage !== undefined) {
    const stage = o.stage;
    const staging = await compactStage(setup, args, stage, staged);
    o = readTogether(args.db, () => opening(setup, args, staged, staging));
  }
  const f = o.f;
  let decided = o.decided;
  if (decided === undefined) {
    await o.warming;
    decided = readTogether(args.db, () => decide(setup, args, f, staged));
  }
  if (decided.sent !== undefined) return decided.sent;
  // An attempt is only decided with a strategy.
  if (strategy === null) throw new Error('a compaction was attempted without a strategy');
  const { first, pace, overdue } = decided;

  if (args.force) commitOwed(args.db, () => setAutoFailures(args.db, sid, 0));
  // The projection above and the compaction's planning are each one synchronous stretch: the
  // event loop gets a turn between them.
  await giveWay();
  const { outcome, error, second, out, layers, calls } = await compactAndCommit(setup, args, f, first);
  observePace(pace, second.estimate, outcome.compacted);
  const reason = outcome.compacted ? null : (error ?? outcome.reason);
  if (error === null) {
    pace.baseline = outcome.compacted ? second.estimate : first.estimate;
    pace.reason = reason;
  }
  const sent = layered(setup, out.input, second, layers.views);
  return withStages({
    system: out.system,
    tools: out.tools,
    inputs: sent.inputs,
    compacted: outcome.compacted,
    reason,
    observation: observe(setup, out, sent, { compacted: outcome.compacted, failure: reason, notes: [...(overdue ? [OVERDUE] : []), ...(outcome.notes ?? []), ...layers.notes] }),
    extensionContext: out.context,
    instructions: out.instructions,
    summarizerCalls: calls,
  }, staged);
}

/** A compaction as it ended: committed, or why not, and what the request goes out with after it. */
interface Compaction {
  outcome: CompactOutcome;
  /** The strategy threw (a summarizer error, a timeout, an invalid answer): a real failure. */
  error: string | null;
  /** The projection after the commit; the one before it when nothing was committed. */
  second: Projection;
  /** The envelope the request goes out in: rebuilt after a commit when a pinned prompt was released. */
  out: Envelope;
  /** The layers' views after a committed compaction (their `compact`), and what failed in them. */
  layers: { views: Map<string, LayerView>; notes: string[] };
  /** Summarizer calls made. */
  calls: number;
}

/**
 * One compaction of the request `f` and `first` describe: the strategy's `compact`, then one
 * transaction that commits its state and logs the attempt (a success, or a real failure, which
 * counts toward the latch), then the layers' `compact` after a commit.
 */
async function compactAndCommit(setup: EngineSetup, args: PrepareArgs, f: Envelope, first: Projection): Promise<Compaction> {
  const strategy = setup.strategy;
  if (strategy === null) throw new Error('a compaction was attempted without a strategy');
  const now = args.now ?? Date.now;
  const sid = args.session.sid;
  const started = now();
  const rewritesAtStart = sessionRewrites(args.db, sid);
  let outcome: CompactOutcome;
  let error: string | null = null;
  const meter = metered(setup.summarizer);
  const opts: CompactOptions = { forced: args.force, focus: args.focus, summarizer: meter, signal: args.signal };
  try {
    outcome = await strategy.compact(f.input, first, opts);
  } catch (err) {
    if (args.signal?.aborted === true) throw err;
    error = describe(err);
    // What was sent before the failure still cost tokens: the log says how many.
    outcome = { compacted: false, reason: error, backend: setup.summarizer.backend, evictedRows: 0 };
  }
  // One transaction commits the new state and logs the attempt, and only if nothing the
  // compaction read has moved meanwhile (a settle rewrites rows and bumps the counter; appends
  // only add rows after the head it read): otherwise the summary is discarded, as if it had
  // found nothing worth evicting, and the next preparation tries again.
  let second = first;
  // The envelope the request goes out in: after a compaction a pinned system prompt is rebuilt,
  // since the prefix changes anyway.
  let out = f;
  // Its fsync is owed, not waited for on the event loop; prepareRequest awaits it before the
  // request goes out (storage/db.ts commitOwed).
  commitOwed(args.db, () => {
    if (outcome.compacted && sessionRewrites(args.db, sid) !== rewritesAtStart) {
      outcome = { ...outcome, compacted: false, reason: 'the history moved while the summary was written (a late tool result settled); the summary was discarded' };
    }
    if (outcome.compacted) {
      outcome.commit?.();
      if (f.context !== setup.extensionContext || f.instructions !== args.instructions) out = envelope(setup, args, currentPrompt(setup, args));
      second = project(setup, out.input);
      // Tool-output images below the oldest row the new request carries verbatim are elided
      // before it goes out; the job is recorded here so that it is durable exactly when the
      // compaction is.
      scheduleElision(args.db, sid, firstCarriedSeq(out.input, second.inputs));
    }
    // Only what happened goes into the log: a success, or a real failure. "Nothing worth
    // evicting" is an observation, so /context keeps showing the last compaction that did.
    if (!outcome.compacted && error === null) return;
    logCompaction(args.db, sid, {
      at: started,
      strategy: strategy.name,
      forced: args.force,
      ok: outcome.compacted,
      duration_ms: Math.max(0, Math.round(now() - started)),
      backend: outcome.backend,
      summarizer_tokens_in: meter.tokensIn,
      summarizer_tokens_out: meter.tokensOut,
      tokens_before: first.estimate,
      tokens_after: second.estimate,
      evicted_rows: outcome.evictedRows,
      error,
    });
    if (outcome.compacted) setAutoFailures(args.db, sid, 0);
    else if (!args.force) setAutoFailures(args.db, sid, autoFailures(args.db, sid) + 1);
  });
  // The latch and the log may have moved: the observation reads them as they are now.
  out = { ...out, book: readSessionBook(args.db, sid, setup.modelId) };
  // Layers follow the strategy: after a committed compaction they compact too, otherwise they
  // project as on any other request. The commit and the projection after it are one stretch;
  // the layers' first steps (the notes match the new request against the history) another.
  let layers: { views: Map<string, LayerView>; notes: string[] };
  try {
    if (outcome.compacted) await giveWay();
    layers = outcome.compacted ? await compactLayers(setup, out.input, first, second, opts) : { views: new Map<string, LayerView>(), notes: [] };
  } finally {
    // The rows this compaction evicted were kept for the layers (history-rows.ts); nothing reads them now.
    forgetPassedRows(out.input.cache);
  }
  return { outcome, error, second, out, layers, calls: meter.calls };
}

/** What `/compact` would do now, without a model call or a write; null when the strategy has no dry run. */
export function planCompaction(setup: EngineSetup, args: PrepareArgs): { dryRun: DryRun | null; observation: Observation } {
  const f = envelope(setup, args);
  const p = project(setup, f.input);
  const dryRun = setup.strategy?.plan?.(f.input, p, true) ?? null;
  return { dryRun, observation: observe(setup, f, layered(setup, f.input, p), { compacted: false, failure: null, notes: [] }) };
}

/** The read-only projection, for /context before any request was prepared. */
export function inspectRequest(setup: EngineSetup, args: PrepareArgs): Observation {
  return previewRequest(setup, args).observation;
}

/** The request as it would go out now, without compacting: its history inputs and observation. */
export function previewRequest(setup: EngineSetup, args: PrepareArgs): { inputs: PlainInput[]; observation: Observation } {
  const f = envelope(setup, args);
  const sent = layered(setup, f.input, project(setup, f.input));
  return { inputs: sent.inputs, observation: observe(setup, f, sent, { compacted: false, failure: null, notes: [] }) };
}

/** Long reads the strategy can do with yields before a preparation, so `project` stays within a slice. */
export async function warmRequest(setup: EngineSetup, args: PrepareArgs): Promise<void> {
  if (setup.strategy?.warm === undefined) return;
  const strategy = setup.strategy;
  await readTogether(args.db, () => strategy.warm?.(envelope(setup, args).input));
}

/** One-time upkeep of the strategy's saved state when a kernel adopts the session. */
export function adoptSession(setup: EngineSetup, args: PrepareArgs): void {
  if (setup.strategy?.adopt === undefined) return;
  setup.strategy.adopt(envelope(setup, args).input);
}
