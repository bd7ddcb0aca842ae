// Compaction units and exchanges. A unit is a user input (or an image-fit notice) and
// everything after it up to the next one; an exchange is one assistant turn with the tool
// results that follow it. Cuts fall between units, or between exchanges of the newest unit
// (strategies/harness/cut.ts), so a tool call never loses its result. Grouping, tail selection
// and chunking below never split the group they work on.
import type { StoredRow } from '../../protocol/rows.ts';
import { runSteps, type Steps } from '../../protocol/time-slice.ts';

/** Items handled between two steps of a long loop over history (see runSteps). */
export const ITEMS_PER_STEP = 1024;

/** The boundary rule, written once: user inputs (any origin) and image-fit notices open units. */
export function opensUnit(row: StoredRow): boolean {
  return row.row_class !== 'other';
}

/** Inside a unit, every assistant row opens an exchange; its tool results and notices follow it. */
export function opensExchange(row: StoredRow): boolean {
  return row.body.kind === 'assistant';
}

export interface Unit<T> {
  items: T[];
  /** Estimated tokens of the unit's items. */
  tokens: number;
}

/**
 * Groups items in order into units. `startsUnit` says which items open a new unit; items
 * before the first opener form a leading unit of their own.
 */
export function groupUnits<T>(items: readonly T[], startsUnit: (item: T) => boolean, tokens: (item: T) => number): Unit<T>[] {
  return runSteps(groupUnitsSteps(items, startsUnit, tokens));
}

/** `groupUnits` in steps of ITEMS_PER_STEP items. */
export function* groupUnitsSteps<T>(items: readonly T[], startsUnit: (item: T) => boolean, tokens: (item: T) => number): Steps<Unit<T>[]> {
  const units: Unit<T>[] = [];
  let current: Unit<T> | undefined;
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    if (current === undefined || (startsUnit(item) && current.items.length > 0)) {
      current = { items: [], tokens: 0 };
      units.push(current);
    }
    current.items.push(item);
    current.tokens += tokens(item);
    if (i % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
  }
  return units;
}

/** The items of `units` in order, in steps of about ITEMS_PER_STEP items. */
export function* itemsSteps<T>(units: readonly Unit<T>[]): Steps<T[]> {
  const out: T[] = [];
  let since = 0;
  for (const unit of units) {
    for (const item of unit.items) out.push(item);
    since += unit.items.length;
    if (since >= ITEMS_PER_STEP) {
      since = 0;
      yield;
    }
  }
  return out;
}

/**
 * Index of the first tail unit. The newest unit always stays (even when it alone exceeds the
 * budget); older units join the tail, newest first, while the running total fits `budget`.
 * Returns units.length only for an empty list.
 */
export function selectTail<T>(units: readonly Unit<T>[], budget: number): number {
  if (units.length === 0) return 0;
  let start = units.length - 1;
  let used = units[start]!.tokens;
  while (start > 0 && used + units[start - 1]!.tokens <= budget) {
    start -= 1;
    used += units[start]!.tokens;
  }
  return start;
}

/**
 * Splits units into consecutive chunks of at most `maxTokens` each, in order. A unit larger
 * than `maxTokens` becomes a chunk of its own rather than being split.
 */
export function chunkUnits<T>(units: readonly Unit<T>[], maxTokens: number): Unit<T>[][] {
  const chunks: Unit<T>[][] = [];
  let current: Unit<T>[] = [];
  let used = 0;
  for (const unit of units) {
    if (current.length > 0 && used + unit.tokens > maxTokens) {
      chunks.push(current);
      current = [];
      used = 0;
    }
    current.push(unit);
    used += unit.tokens;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/**
 * The largest piece of evicted history one summarizer call reads, in estimated tokens: half the
 * window (the basis a caller judges by), never under 1000. Shared by every caller that folds an
 * eviction chunk by chunk (rolling's summary, the notes).
 */
export function evictionChunkTokens(window: number): number {
  return Math.max(1000, Math.floor(window / 2));
}
