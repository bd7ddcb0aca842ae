// The contract every compaction strategy implements, and what the engine hands it. A strategy
// is two functions over data: `project` reads saved state and history and returns a request
// (never writing, never calling a model); `compact` writes new saved state after a summary.
import type { PlainInput, Section } from '../protocol/prepared.ts';
import type { Db } from '../storage/db.ts';
import type { Summarizer } from './summarizer/types.ts';
import type { WindowInfo } from './harness/window.ts';
import type { ProjectionTarget } from './projection.ts';
import type { KernelCache } from './harness/kernel-cache.ts';

/** What every strategy call knows about the request being prepared. */
export interface StrategyInput {
  db: Db;
  session: { sid: number; name: string };
  /** The append boundary this preparation reads up to (inclusive seq). */
  head: number;
  window: WindowInfo;
  /** Estimated tokens of the system prompt and tool schemas. */
  pinnedTokens: number;
  target: ProjectionTarget;
  /** Per-kernel memory for derived positions; never the source of truth. */
  cache: KernelCache;
}

export interface Projection {
  /** The history part of the request, after the system prompt. */
  inputs: PlainInput[];
  /** History sections in request order (the engine adds the system section in front). */
  sections: Section[];
  /** Estimated tokens of the whole request, pinned prompt included. */
  estimate: number;
  /** The estimate reached the trigger of a known window. */
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
  /** New state was written. */
  compacted: boolean;
  /** Why nothing was written, when nothing was. */
  reason: string | null;
  backend: string | null;
  /** Estimated tokens sent to and received from the summarizer. */
  summarizerTokensIn: number;
  summarizerTokensOut: number;
  evictedRows: number;
}

/** What a compaction would do now, computed without a model call or a write. */
export interface CompactPlan {
  /** Rows that would leave the verbatim tail, and their seq range. */
  evictRows: number;
  evictFromSeq: number | null;
  evictToSeq: number | null;
  tailRows: number;
  /** Estimated request size now, and after (the new summary taken at its output cap). */
  estimateBefore: number;
  estimateAfter: number;
  /** Why nothing would be evicted, when nothing would. */
  reason: string | null;
}

export interface Strategy {
  readonly name: string;
  project(input: StrategyInput): Projection;
  /** The dry run of `compact`: reads only. */
  plan(input: StrategyInput, projection: Projection, forced: boolean): CompactPlan;
  /** Runs only when the projection is due or the caller forces it. */
  compact(input: StrategyInput, projection: Projection, opts: CompactOptions): Promise<CompactOutcome>;
  /**
   * Optional one-time upkeep when a kernel adopts the session (e.g. rewriting an old state
   * format). May write; never called from project.
   */
  adopt?(input: StrategyInput): void;
}

export function nothingCompacted(reason: string): CompactOutcome {
  return { compacted: false, reason, backend: null, summarizerTokensIn: 0, summarizerTokensOut: 0, evictedRows: 0 };
}
