// The contract of the compaction engine: what a strategy, a layer and a fold plugin implement,
// and what the engine hands them. A strategy is two functions over data — `project` reads
// saved state and history and returns a request (never writing, never calling a model);
// `compact` writes new saved state after a summary — plus optional hooks. docs/compaction.md
// walks through a strategy and a layer built on it.
import type { z } from 'zod';
import type { CompactPlan, PlainInput, Section } from '../protocol/prepared.ts';
import type { StoredRow } from '../protocol/rows.ts';
import type { Db } from '../storage/db.ts';
import type { KernelCache } from './harness/kernel-cache.ts';
import type { WindowInfo, WindowSettings } from './harness/window.ts';
import type { ProjectionTarget } from './projection.ts';
import type { Summarizer } from './summarizer/types.ts';

/** What every strategy, layer and fold plugin call knows about the request being prepared. */
export interface StrategyInput {
  db: Db;
  session: { sid: number; name: string };
  /** The append boundary this preparation reads up to (inclusive seq). */
  head: number;
  /** The window, trigger, tail and token ratio this request is judged by. */
  window: WindowInfo;
  /** The active strategy's section of extensions.json, as validated (its own fields included). */
  settings: WindowSettings;
  /** Estimated tokens of the system prompt and tool schemas. */
  pinnedTokens: number;
  /** Where the request goes: provider, model, image limits, output cap. */
  target: ProjectionTarget;
  /** The enabled fold plugins the active strategy reads through `prior` (harness/prior.ts). */
  folds: readonly FoldPlugin[];
  /** Per-kernel memory for derived values; never the source of truth. */
  cache: KernelCache;
}

export interface Projection {
  /** The history part of the request, after the system prompt. */
  inputs: PlainInput[];
  /** History sections in request order (the engine adds the system section in front). */
  sections: Section[];
  /** Estimated tokens of the whole request, pinned prompt included. */
  estimate: number;
  /** The request reached the trigger of a known window (as the provider counts it). */
  due: boolean;
  /** Things /context should say (e.g. saved state ignored because history changed). */
  notes: string[];
}

export interface CompactOptions {
  forced: boolean;
  /** Extra instruction for the summarizer (text after `/compact`). */
  focus: string | undefined;
  summarizer: Summarizer;
  signal: AbortSignal | undefined;
}

export interface CompactOutcome {
  /** New state is ready: `commit` writes it. */
  compacted: boolean;
  /**
   * Writes the new state (synchronously). The engine calls it inside the transaction that logs
   * the compaction, and only if nothing the compaction read has moved since it started; a
   * strategy never writes its state from `compact` itself.
   */
  commit?: () => void;
  /** Why nothing was written, when nothing was. */
  reason: string | null;
  backend: string | null;
  evictedRows: number;
  /** What /context should say about this compaction (e.g. a limit it stopped at). */
  notes?: string[];
}

/** A dry run: what a compaction would do now, and why it would do nothing when it would not. */
export interface DryRun {
  plan: CompactPlan;
  reason: string | null;
}

export interface Strategy {
  readonly name: string;
  /** Its section of extensions.json; every strategy's settings carry the window fields. */
  readonly settings: z.ZodType<WindowSettings>;
  project(input: StrategyInput): Projection;
  /** Runs only when the projection is due or the caller forces it; writes nothing itself (see `commit`). */
  compact(input: StrategyInput, projection: Projection, opts: CompactOptions): Promise<CompactOutcome>;
  /** The dry run of `compact`, derived from the same choice; reads only. Absent: no dry run. */
  plan?(input: StrategyInput, projection: Projection, forced: boolean): DryRun;
  /**
   * Work too long for one event-loop slice (decoding a long history, verifying a cut), done
   * with yields before `project` so that `project` finds it cached. Reads only. Returns
   * undefined, without yielding, when everything is cached already (the usual request): the
   * engine then keeps the frame, this check and the projection in one read transaction.
   */
  warm?(input: StrategyInput): Promise<void> | undefined;
  /**
   * Where the verbatim history the saved state leaves begins (the seq of the tail's first row),
   * found from the state without decoding a row. With it the engine compacts a history many
   * stages long in stages (strategies/catch-up.ts); without it such a history is compacted at once.
   */
  tailFrom?(input: StrategyInput): number;
  /**
   * One-time upkeep when a kernel adopts the session (e.g. rewriting an old state format).
   * May write; never called from project or from read-only calls such as /context.
   */
  adopt?(input: StrategyInput): void;
  /**
   * Called inside the fork transaction for every strategy of the build: copy what of this
   * strategy's saved state the branch may keep, with `seqs` mapping parent seq -> branch seq.
   */
  fork?(db: Db, from: { sid: number }, to: { sid: number }, seqs: ReadonlyMap<number, number>): void;
  /**
   * Another strategy of the build (by name) that handles a request in this one's place when
   * `when` gives a reason: snapcompact hands a model that reads no images to rolling. The
   * engine resolves it (strategies/harness/fallback.ts), so a strategy never imports another;
   * the reason goes into the projection's notes.
   */
  readonly fallback?: { readonly strategy: string; when(input: StrategyInput): string | null };
}

/** What a layer adds in front of the strategy's history, and what /context should say. */
export interface LayerView {
  inputs: PlainInput[];
  sections: Section[];
  notes: string[];
}

/**
 * A layer runs over whichever strategy is active (notes is the first). Its `compact` runs on
 * the request a compaction just produced — `before` is what that compaction started from — and
 * its `project` on every other request. A layer that throws never fails the turn: the engine
 * reports it in the observation and sends the strategy's request without the layer's part.
 */
export interface Layer {
  readonly name: string;
  /**
   * Estimated tokens the layer may add to any request, at most (the notes at their output cap).
   * Strategies keep that much free under the window when they fit a request; triggers ignore it.
   */
  reserve?(input: StrategyInput): number;
  project(input: StrategyInput, request: Projection): LayerView;
  compact(input: StrategyInput, before: Projection, after: Projection, opts: CompactOptions): Promise<LayerView>;
}

/**
 * How this build registers a layer: built for a request from its section of extensions.json,
 * which the factory parses with the layer's own schema (the config store already checked it).
 */
export type LayerFactory = (section: unknown) => Layer;

/** A stored fold another extension kept: text standing for a range of source rows. */
export interface Fold {
  /** The extension that stored it. */
  source: string;
  text: string;
  /** The source rows it covers (inclusive seqs). */
  firstSeq: number;
  lastSeq: number;
}

/** History with the folds other extensions stored in front: `rest` is what they do not cover. */
export interface Prior {
  folds: Fold[];
  rest: readonly StoredRow[];
}

/**
 * Registered by a memory extension that stores folds (lcm-memory, snapcompact-memory), so that
 * another strategy reads them without importing their owner. `owner` is the strategy whose
 * saved state the plugin reads; that strategy reads its own state and skips the plugin.
 */
export interface FoldPlugin {
  readonly name: string;
  readonly owner: string;
  /**
   * The folds over the reader's history and the rows they leave. `fromSeq` is where the reader's
   * own state ends (the first row it does not summarize itself); `history` starts there, or
   * later when the harness skipped decoding rows this plugin said it covers.
   */
  prior(input: StrategyInput, history: readonly StoredRow[], fromSeq: number): Prior;
  /**
   * The last seq the plugin's folds cover, read from its own state without decoding rows, so
   * that a reader never decodes history a fold stands in for. Absent: the harness decodes all.
   */
  coveredThrough?(input: StrategyInput): number | undefined;
}

export function nothingCompacted(reason: string): CompactOutcome {
  return { compacted: false, reason, backend: null, evictedRows: 0 };
}
