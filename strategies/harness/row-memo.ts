// Per-kernel memory of what each history row costs and projects to for the current target:
// row sizes, each row's own inputs, and the projection of the last tail projected
// (strategies/projection.ts), kept while the target stays the same (`targetKey`) and the row
// objects live (history-rows.ts shares them across calls). Strategies size and project their
// verbatim tails through it, and warm it in slices so that a long tail is never sized or
// projected in one stretch of the event loop.
import type { PlainInput } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { timeSlicer } from '../../protocol/time-slice.ts';
import type { StrategyInput } from '../contract.ts';
import { Projector, targetKey, tokenCounterYielding, type InputsMemo, type RowMap } from '../projection.ts';
import { cacheSlot } from './kernel-cache.ts';

export interface RowMemo {
  sizes: RowMap<number>;
  inputs: InputsMemo;
  /** The last tail projected; the next request's tail usually continues it. */
  projector?: Projector;
}

/** Rows from which `warmRowMemo` works ahead (below it, sizing when needed is short work). */
export const WARM_SIZING_ROWS = 4000;

const MEMO = cacheSlot<RowMemo & { key: string }>('row-memo');

/** The memo for the request's target. */
export function rowMemo(input: StrategyInput): RowMemo {
  const key = targetKey(input.target);
  const cached = input.cache.get(MEMO);
  if (cached?.key === key) return cached;
  const owner = {};
  const fresh: RowMemo & { key: string } = { key, sizes: onRows(owner, 'size'), inputs: onRows(owner, 'inputs') };
  input.cache.set(MEMO, fresh);
  return fresh;
}

/**
 * What the memo keeps of one row, on the row object itself under a private, non-enumerable key
 * (invisible to JSON and to deep comparison). A WeakMap of 100k+ rows grew by rehashing in one
 * go (a single `set` held the event loop past the daemon's stall budget) and gave every full
 * collection an ephemeron pass over it. A row holds one slot, for the memo of the target it was
 * last sized for; another memo's slot is replaced, as a new WeakMap would have started empty.
 */
interface Slot {
  owner: object;
  size: number | undefined;
  inputs: PlainInput[] | undefined;
}
const SLOT = Symbol('row-memo');
type Slotted = StoredRow & { [SLOT]?: Slot };

function onRows<F extends 'size' | 'inputs'>(owner: object, field: F): RowMap<NonNullable<Slot[F]>> {
  const own = (row: StoredRow): Slot | undefined => {
    const slot = (row as Slotted)[SLOT];
    return slot?.owner === owner ? slot : undefined;
  };
  return {
    get: (row) => own(row)?.[field] ?? undefined,
    has: (row) => own(row)?.[field] !== undefined,
    set: (row, value) => {
      let slot = own(row);
      if (slot === undefined) {
        slot = { owner, size: undefined, inputs: undefined };
        if (SLOT in row) (row as Slotted)[SLOT] = slot;
        else Object.defineProperty(row, SLOT, { value: slot, writable: true, enumerable: false });
      }
      slot[field] = value;
    },
  };
}

/**
 * A verbatim tail as the request carries it (`forModel`) with its estimated tokens. A tail
 * that continues the last one projected (rows appended since) is only extended.
 */
export function projectTail(input: StrategyInput, rows: readonly StoredRow[]): { inputs: PlainInput[]; tokens: number } {
  const projector = projectorFor(input, rows);
  for (let i = projector.count; i < rows.length; i++) projector.add(rows[i]!);
  return projector.snapshot();
}

function projectorFor(input: StrategyInput, rows: readonly StoredRow[]): Projector {
  const memo = rowMemo(input);
  if (memo.projector === undefined || !memo.projector.continues(rows)) memo.projector = new Projector(input.target, memo.inputs);
  return memo.projector;
}

/**
 * Sizes and projects a long tail ahead of a request, with yields; a short one is left for when
 * it is needed. Nothing is returned (and nothing yielded) when there is nothing to do.
 */
export function warmRowMemo(input: StrategyInput, rows: readonly StoredRow[]): Promise<void> | undefined {
  if (rows.length < WARM_SIZING_ROWS) return undefined;
  const memo = rowMemo(input);
  // New rows come at the end, so an unsized row is usually found at once; a sized tail costs
  // one pass of lookups, less than projecting it.
  let unsized = false;
  for (let i = rows.length - 1; i >= 0 && !unsized; i--) unsized = !memo.sizes.has(rows[i]!);
  const unprojected = memo.projector === undefined || !memo.projector.continues(rows) || rows.length - memo.projector.count >= WARM_SIZING_ROWS;
  if (!unsized && !unprojected) return undefined;
  return (async () => {
    if (unsized) await tokenCounterYielding(rows, input.target, memo.sizes, memo.inputs);
    const projector = projectorFor(input, rows);
    const slice = timeSlicer();
    for (let i = projector.count; i < rows.length; i++) {
      projector.add(rows[i]!);
      await slice();
    }
  })();
}

/**
 * A strategy's warm-up: the tail rows read ahead (`reading`, undefined when they are cached),
 * then sized ahead when long. Undefined when neither had anything to do.
 */
export function warmTail(input: StrategyInput, reading: Promise<void> | undefined, tail: () => readonly StoredRow[]): Promise<void> | undefined {
  const sizing = (): Promise<void> | undefined => warmRowMemo(input, tail());
  return reading === undefined ? sizing() : reading.then(sizing);
}
