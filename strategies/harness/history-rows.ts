// The rows of a session from some seq through the preparation's head, decoded once per kernel
// and extended as rows are appended. Appends never change earlier rows; settling (which moves
// rows and bumps the session's rewrite counter) and new image-fit notices (which change earlier
// rows' images) make the cache start over. Every strategy's verbatim tail reads through here.
import type { StoredRow } from '../../protocol/rows.ts';
import { foldSources } from '../../storage/conversation.ts';
import { SLICE_MS, yieldToEventLoop } from '../../storage/db.ts';
import { sessionRewrites } from '../../storage/user-rows.ts';
import type { StrategyInput } from '../contract.ts';
import type { LocatedCut } from './cut.ts';
import { cacheSlot } from './kernel-cache.ts';

interface Cached {
  from: number;
  head: number;
  rewrites: number;
  rows: StoredRow[];
}

const ROWS = cacheSlot<Cached>('history-rows');
const OPENER = cacheSlot<{ seq: number; head: number; rewrites: number; row: StoredRow | undefined }>('history-rows.opener');

function read(input: StrategyInput, from: number, to: number): StoredRow[] {
  const rows: StoredRow[] = [];
  if (from > to) return rows;
  for (const page of foldSources(input.db, input.session.name, from, to, { boundary: to })) rows.push(...page);
  return rows;
}

/**
 * Rows with seq `from`..`to` (inclusive, image fits applied) read in pages, giving the event
 * loop a turn whenever a slice's time is used up. Not cached: for one-off reads at a compaction.
 */
export async function readYielding(input: StrategyInput, from: number, to: number): Promise<StoredRow[]> {
  const rows: StoredRow[] = [];
  if (from > to) return rows;
  let started = performance.now();
  for (const page of foldSources(input.db, input.session.name, from, to, { boundary: to })) {
    rows.push(...page);
    if (performance.now() - started >= SLICE_MS) {
      await yieldToEventLoop();
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
  if (cached !== undefined && cached.from === start && cached.rewrites === rewrites && cached.head <= input.head) {
    if (cached.head === input.head) return cached.rows;
    const added = read(input, cached.head + 1, input.head);
    if (!added.some((r) => r.row_class === 'image_fit')) {
      const rows = [...cached.rows, ...added];
      input.cache.set(ROWS, { from: start, head: input.head, rewrites, rows });
      return rows;
    }
  }
  const rows = read(input, start, input.head);
  input.cache.set(ROWS, { from: start, head: input.head, rewrites, rows });
  return rows;
}

/**
 * Fills the cache `tailRows` reads, in slices: a first preparation after a restart may decode
 * a long history, which must not stall the event loop. Rows already cached are not re-read:
 * then nothing is returned, and nothing yielded.
 */
export function warmTailRows(input: StrategyInput, located: LocatedCut): Promise<void> | undefined {
  const start = Math.max(1, located.resumeSeq);
  const rewrites = sessionRewrites(input.db, input.session.sid);
  const cached = input.cache.get(ROWS);
  if (cached !== undefined && cached.from === start && cached.rewrites === rewrites && cached.head <= input.head) return undefined;
  return (async () => {
    const rows = await readYielding(input, start, input.head);
    // Only trust what was read if nothing moved while reading.
    if (sessionRewrites(input.db, input.session.sid) === rewrites) input.cache.set(ROWS, { from: start, head: input.head, rewrites, rows });
  })();
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
    cached = { seq: located.openerSeq, head: input.head, rewrites, row: read(input, located.openerSeq, located.openerSeq)[0] };
    input.cache.set(OPENER, cached);
  }
  return cached.row === undefined ? rows : [cached.row, ...rows];
}
