// The rows of a session from some seq through the preparation's head, decoded once per kernel
// and extended as rows are appended. Appends never change earlier rows; settling (which moves
// rows and bumps the session's rewrite counter) and new image-fit notices (which change earlier
// rows' images) make the cache start over. Every strategy's verbatim tail reads through here,
// and a layer that reads the same rows at a compaction (notes) takes them from here too.
import type { StoredRow } from '../../protocol/rows.ts';
import { countRowsBetween, foldSources } from '../../storage/transcript/history.ts';
import { SLICE_MS, giveWay } from '../../protocol/time-slice.ts';
import { sessionRewrites } from '../../storage/transcript/user-rows.ts';
import type { StrategyInput } from '../contract.ts';
import type { LocatedCut } from './cut.ts';
import { cacheSlot, type KernelCache } from './kernel-cache.ts';

interface Cached {
  from: number;
  head: number;
  rewrites: number;
  rows: StoredRow[];
}

const ROWS = cacheSlot<Cached>('history-rows');
/** The cached rows from before the start last moved forward, at the same head (see historyRows), until forgotten. */
const PASSED = cacheSlot<Cached | undefined>('history-rows.passed');
const OPENER = cacheSlot<{ seq: number; head: number; rewrites: number; row: StoredRow | undefined }>('history-rows.opener');

/** Rows with seq `from`..`to` (inclusive, image fits applied through the head), read in one stretch. Not cached. */
export function readRows(input: StrategyInput, from: number, to: number): StoredRow[] {
  const rows: StoredRow[] = [];
  if (from > to) return rows;
  for (const page of foldSources(input.db, input.session.name, from, to, { boundary: input.head })) rows.push(...page);
  return rows;
}

/**
 * Rows with seq `from`..`to` (inclusive, image fits applied) read in pages, giving the event
 * loop a turn whenever a slice's time is used up. Not cached.
 */
async function readYielding(input: StrategyInput, from: number, to: number): Promise<StoredRow[]> {
  const rows: StoredRow[] = [];
  if (from > to) return rows;
  let started = performance.now();
  for (const page of foldSources(input.db, input.session.name, from, to, { boundary: to, pageMs: SLICE_MS / 4 })) {
    rows.push(...page);
    if (performance.now() - started >= SLICE_MS) {
      await giveWay();
      started = performance.now();
    }
  }
  return rows;
}

/**
 * Rows with seq >= `from` through `input.head`, in order, image fits applied. The array is
 * shared with later calls: callers must not modify it.
 */
export function historyRows(input: StrategyInput, from: number): readonly StoredRow[] {
  const start = Math.max(1, from);
  const rewrites = sessionRewrites(input.db, input.session.sid);
  const cached = input.cache.get(ROWS);
  if (cached !== undefined && cached.from <= start && cached.rewrites === rewrites && cached.head <= input.head) {
    if (cached.from === start && cached.head === input.head) return cached.rows;
    const added = readRows(input, cached.head + 1, input.head);
    if (!added.some((r) => r.row_class === 'image_fit')) {
      // A start that moved forward (a compaction's new cut) takes a slice of what is cached.
      const kept = cached.from === start ? cached.rows : cached.rows.slice(firstAtOrAfter(cached.rows, start));
      const rows = added.length === 0 ? kept : [...kept, ...added];
      // The rows a compaction just passed stay for the layers that read them once more after it
      // (rowsThroughHead), until the engine lets them go (forgetPassedRows) or the head moves.
      input.cache.set(PASSED, cached.from < start && cached.head === input.head ? cached : undefined);
      input.cache.set(ROWS, { from: start, head: input.head, rewrites, rows });
      return rows;
    }
  }
  const rows = readRows(input, start, input.head);
  input.cache.set(PASSED, undefined);
  input.cache.set(ROWS, { from: start, head: input.head, rewrites, rows });
  return rows;
}

/**
 * New rows past the cached head that `historyRows` reads in the stretch that asks for them; from
 * this many on (a bulk import, a long run of appends without a prepare) `warmTailRows` reads
 * them ahead in slices. A long run of new rows read in one stretch held the event loop far past
 * its budget.
 */
export const EXTEND_IN_STRETCH_ROWS = 512;

/**
 * Fills the cache `tailRows` reads, in slices: a first preparation after a restart may decode
 * a long history, and a cached one may lag its head by many rows; neither must stall the event
 * loop. When the cache holds the rows, or lacks only a few new ones, nothing is returned and
 * nothing yielded.
 */
export function warmTailRows(input: StrategyInput, located: LocatedCut): Promise<void> | undefined {
  const start = Math.max(1, located.resumeSeq);
  const rewrites = sessionRewrites(input.db, input.session.sid);
  const cached = input.cache.get(ROWS);
  if (cached !== undefined && cached.from <= start && cached.rewrites === rewrites && cached.head <= input.head) {
    // The seq gap bounds the new rows without a query; only a wide gap is counted.
    const few = input.head - cached.head < EXTEND_IN_STRETCH_ROWS
      || countRowsBetween(input.db, input.session.sid, cached.head, input.head, EXTEND_IN_STRETCH_ROWS) < EXTEND_IN_STRETCH_ROWS;
    return few ? undefined : extendYielding(input, cached);
  }
  return fillYielding(input, start, rewrites);
}

async function fillYielding(input: StrategyInput, start: number, rewrites: number): Promise<void> {
  const rows = await readYielding(input, start, input.head);
  // Only trust what was read if nothing moved while reading.
  if (sessionRewrites(input.db, input.session.sid) !== rewrites) return;
  input.cache.set(PASSED, undefined);
  input.cache.set(ROWS, { from: start, head: input.head, rewrites, rows });
}

async function extendYielding(input: StrategyInput, cached: Cached): Promise<void> {
  const added = await readYielding(input, cached.head + 1, input.head);
  if (sessionRewrites(input.db, input.session.sid) !== cached.rewrites || input.cache.get(ROWS) !== cached) return;
  // A new image fit changes earlier rows: everything is read again, as `historyRows` would.
  if (added.some((r) => r.row_class === 'image_fit')) return fillYielding(input, cached.from, cached.rewrites);
  input.cache.set(PASSED, undefined);
  input.cache.set(ROWS, { ...cached, head: input.head, rows: [...cached.rows, ...added] });
}

/**
 * Rows with seq >= `from` through the head, for a reader that needs them once at a compaction,
 * after the strategy read its tail (the notes' rewrite): the cached rows themselves when they
 * cover the range, those the compaction just passed included (no second decode, and the row
 * memo already holds their sizes), else read in slices. Callers must not modify the array.
 */
export async function rowsThroughHead(input: StrategyInput, from: number): Promise<readonly StoredRow[]> {
  const rewrites = sessionRewrites(input.db, input.session.sid);
  for (const cached of [input.cache.get(ROWS), input.cache.get(PASSED)]) {
    if (cached !== undefined && cached.from <= from && cached.head === input.head && cached.rewrites === rewrites) {
      return cached.rows.slice(firstAtOrAfter(cached.rows, from));
    }
  }
  return readYielding(input, from, input.head);
}

/**
 * The cached rows that end at this preparation's head, the longest run of them (those a
 * compaction just passed included), or undefined when nothing cached ends there. Shared:
 * callers must not modify the array.
 */
export function cachedThroughHead(input: StrategyInput): readonly StoredRow[] | undefined {
  const rewrites = sessionRewrites(input.db, input.session.sid);
  let best: Cached | undefined;
  for (const cached of [input.cache.get(ROWS), input.cache.get(PASSED)]) {
    if (cached === undefined || cached.head !== input.head || cached.rewrites !== rewrites) continue;
    if (best === undefined || cached.from < best.from) best = cached;
  }
  return best?.rows;
}

/**
 * Lets go of the rows a compaction passed: the engine calls it once the layers have compacted,
 * so a large eviction is not held until the next request moves the head.
 */
export function forgetPassedRows(cache: KernelCache): void {
  cache.set(PASSED, undefined);
}

/** Index of the first row with seq >= `seq` in rows ordered by seq (rows.length when none). */
function firstAtOrAfter(rows: readonly StoredRow[], seq: number): number {
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (rows[mid]!.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The verbatim rows after a located cut: for a cut inside a unit, the unit's opener followed by
 * the rows from where the cut resumes; otherwise the rows from the opener on. Shared like
 * `historyRows`: callers must not modify the array.
 */
export function tailRows(input: StrategyInput, located: LocatedCut): readonly StoredRow[] {
  const rows = historyRows(input, located.resumeSeq);
  if (!located.withinUnit) return rows;
  const rewrites = sessionRewrites(input.db, input.session.sid);
  let cached = input.cache.get(OPENER);
  if (cached === undefined || cached.seq !== located.openerSeq || cached.rewrites !== rewrites || cached.head !== input.head) {
    cached = { seq: located.openerSeq, head: input.head, rewrites, row: readRows(input, located.openerSeq, located.openerSeq)[0] };
    input.cache.set(OPENER, cached);
  }
  return cached.row === undefined ? rows : [cached.row, ...rows];
}
