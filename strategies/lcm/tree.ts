// The shape rules of lcm's tree, apart from any storage: how a node reads in a request, how
// evicted rows are chunked into leaves, which nodes a condensation joins, and the rule that a
// summary must come out smaller than what it replaces (else a retry, then a pointer).
import type { PlainInput } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { runSteps, type Steps } from '../../protocol/time-slice.ts';
import { inputsTokens, textTokens } from '../estimate.ts';
import { chunkUnits, groupUnitsSteps, ITEMS_PER_STEP, itemsSteps, opensExchange, opensUnit, type Unit } from '../harness/units.ts';
import type { WindowInfo } from '../harness/window.ts';
import { isOverCap, type SummaryResult } from '../summarizer/types.ts';

/** Estimated tokens of evicted rows one leaf summarizes (a larger unit is a leaf of its own). */
export const LEAF_CHUNK_TOKENS = 6000;
/** How many of the oldest frontier nodes one condensation joins under a new parent. */
export const CONDENSE_FANOUT = 4;
/**
 * Condensation rounds one compaction runs to bring the request under its trigger; past them it
 * goes on only while the request is over the whole window, and says that it stopped.
 */
export const MAX_CONDENSE_ROUNDS = 16;
/**
 * What a compaction's condensation leaves free under the trigger, as a share of the window (at
 * least one node's cap): room for the next turns before the next compaction. With only a node's
 * cap spare, lcm landed just under the trigger and compacted again a few turns later, far more
 * often than rolling at a 32k window. A fifth cost recall at 12k for no saving; docs/lcm.md has
 * the numbers.
 */
export const CONDENSE_SPARE_PERCENT = 10;

/** Estimated tokens a condensation leaves free under the trigger: CONDENSE_SPARE_PERCENT of the window, at least `cap`. */
export function condenseSpare(info: WindowInfo, cap: number): number {
  return Math.max(cap, info.window === null ? 0 : Math.floor(((info.window / info.ratio) * CONDENSE_SPARE_PERCENT) / 100));
}
/** The smallest output limit a summary is ever asked for. */
export const MIN_NODE_TOKENS = 32;

/** A node summary's output limit: a quarter of what the window leaves after the pinned prompt, within [32, 768]. */
export function nodeCap(basis: number, pinnedTokens: number): number {
  return Math.min(768, Math.max(MIN_NODE_TOKENS, Math.floor((basis - pinnedTokens) / 4)));
}

/** The limit a second attempt gets when the first summary was not smaller than its source. */
export function retryCap(limit: number): number {
  return Math.max(MIN_NODE_TOKENS, Math.floor(limit / 3));
}

export interface NodeLabel {
  node: number;
  firstSeq: number;
  lastSeq: number;
  depth: number;
}

/** The line that names a node in a request: id, rows, depth, and how to read what it stands for. */
export function nodeHeader(n: NodeLabel): string {
  return `[lcm node ${n.node} · rows #${n.firstSeq}-#${n.lastSeq} · depth ${n.depth} · lcm_expand {"node":${n.node}} reads the original rows]`;
}

export function nodeInput(n: NodeLabel & { summary: string }): PlainInput {
  return { role: 'user', content: [{ type: 'text', text: `${nodeHeader(n)}\n${n.summary}` }] };
}

/** A node id no session reaches soon, for sizing a node before it has its id. */
const SIZING_ID = 9_999_999;

/** Estimated tokens of a node as a request input (for a draft, sized with a wide id). */
export function nodeTokens(n: Omit<NodeLabel, 'node'> & { node?: number; summary: string }): number {
  return inputsTokens([nodeInput({ ...n, node: n.node ?? SIZING_ID })]);
}

/** What a summary stands in for when the summarizer could not write one smaller than its source. */
export function pointerSummary(firstSeq: number, lastSeq: number, what: string): string {
  return `(not summarized: no summary came out smaller than ${what}; rows #${firstSeq}-#${lastSeq} are read back with lcm_expand)`;
}

/**
 * Evicted rows in leaf-sized chunks, in order. Units stay together in one leaf whenever they
 * fit one; a unit larger than a leaf (a long autonomous turn), the unit still in progress whose
 * older exchanges an exchange-level cut evicted (its opener is `partialOpener`), and rows
 * without an opener of their own are grouped by exchange instead, so that no summarizer call
 * gets an unbounded transcript while every call stays with its results. An exchange larger
 * than a leaf is a leaf of its own.
 */
export function leafChunks(rows: readonly StoredRow[], tokens: (row: StoredRow) => number, partialOpener?: number, maxTokens: number = LEAF_CHUNK_TOKENS): StoredRow[][] {
  return runSteps(leafChunksSteps(rows, tokens, partialOpener, maxTokens));
}

/** `leafChunks` in steps (see runSteps): a compaction of a long history chunks it in slices. */
export function* leafChunksSteps(rows: readonly StoredRow[], tokens: (row: StoredRow) => number, partialOpener?: number, maxTokens: number = LEAF_CHUNK_TOKENS): Steps<StoredRow[][]> {
  const groups: Unit<StoredRow>[] = [];
  let since = 0;
  for (const unit of yield* groupUnitsSteps(rows, opensUnit, tokens)) {
    const head = unit.items[0]!;
    if (opensUnit(head) && head.seq !== partialOpener && unit.tokens <= maxTokens) groups.push(unit);
    else groups.push(...(yield* exchanges(unit.items, tokens)));
    // Many small units are as long a loop as one large one.
    since += unit.items.length;
    if (since >= ITEMS_PER_STEP) {
      since = 0;
      yield;
    }
  }
  const chunks: StoredRow[][] = [];
  for (const chunk of chunkUnits(groups, maxTokens)) chunks.push(yield* itemsSteps(chunk));
  return chunks;
}

/** A unit's rows by exchange, the rows before its first exchange (its opener) joined to that one. */
function* exchanges(items: readonly StoredRow[], tokens: (row: StoredRow) => number): Steps<Unit<StoredRow>[]> {
  let first = true;
  return yield* groupUnitsSteps(items, (r) => {
    if (!opensExchange(r)) return false;
    if (first) {
      first = false;
      return false;
    }
    return true;
  }, tokens);
}

/** Which consecutive frontier nodes one condensation joins: `count` of them from `start`. */
export interface CondenseRun {
  start: number;
  count: number;
}

/**
 * The run of frontier nodes the next condensation joins, or undefined when fewer than two are
 * left. Joining always the oldest nodes would fold the same parent again and again into a
 * chain as deep as the rounds; instead the tree grows level by level. Find the smallest depth
 * `d` for which at least two consecutive nodes are no deeper than `d`, and join the oldest
 * such run, up to the fan-out. A frontier of leaves thus becomes parents of four leaves before
 * any parent is joined again, and a parent is joined only with nodes of its own level or
 * shallower ones. Leaves arrive at the end, so the frontier's depths do not increase from the
 * oldest node to the newest, and the run found is where the shallowest nodes begin.
 */
export function condenseRun(depths: readonly number[]): CondenseRun | undefined {
  if (depths.length < 2) return undefined;
  for (const d of [...new Set(depths)].sort((a, b) => a - b)) {
    let start = 0;
    for (let i = 0; i <= depths.length; i++) {
      if (i < depths.length && depths[i]! <= d) continue;
      if (i - start >= 2) return { start, count: Math.min(CONDENSE_FANOUT, i - start) };
      start = i + 1;
    }
  }
  return undefined;
}

export interface Shrunk {
  summary: string;
  pointer: boolean;
  backend: string | null;
}

/**
 * One node's summary under the smaller-than-source rule: ask at `limit`; an answer not smaller
 * than `sourceTokens` is asked again at `retryCap(limit)`; a second failure of the rule stores
 * `pointer` instead. An answer the output cap could not cut to its limit (`over_cap`; lcm asks
 * with `overCap: 'cut'`, so that cap runs no retry of its own) fails the rule the same way.
 * Any other summarizer error propagates (the compaction then writes nothing).
 */
export async function shrink(sourceTokens: number, limit: number, ask: (limit: number) => Promise<SummaryResult>, pointer: () => string): Promise<Shrunk> {
  let backend: string | null = null;
  for (const cap of [limit, retryCap(limit)]) {
    let result: SummaryResult;
    try {
      result = await ask(cap);
    } catch (err) {
      if (!isOverCap(err)) throw err;
      backend = typeof err.details?.backend === 'string' ? err.details.backend : backend;
      continue;
    }
    backend = result.backend;
    if (textTokens(result.text) < sourceTokens) return { summary: result.text, pointer: false, backend };
  }
  return { summary: pointer(), pointer: true, backend };
}
