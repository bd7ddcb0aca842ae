// Stored folds across strategies: a strategy reads what other extensions folded (LCM's summary
// nodes, the snapcompact archive) through `prior`, never by importing them. Which plugins a
// request reads is decided once here; each plugin lives with the extension that stores its folds.
import type { StoredRow } from '../../protocol/rows.ts';
import { firstSeqAfter, openerAtOrBefore } from '../../storage/transcript/user-rows.ts';
import type { Fold, FoldPlugin, Prior, StrategyInput } from '../contract.ts';
import type { LocatedCut } from './cut.ts';
import { tailRows, warmTailRows } from './history-rows.ts';

/**
 * The history with every stored fold in front, oldest first: each plugin in turn takes the
 * rows the earlier ones left and returns its folds and what it does not cover. Without plugins
 * (or folds) the history comes back as it is.
 */
export function prior(input: StrategyInput, history: readonly StoredRow[], fromSeq: number = history[0]?.seq ?? input.head + 1): Prior {
  const folds: Fold[] = [];
  let rest = history;
  for (const plugin of input.folds) {
    const p = plugin.prior(input, rest, fromSeq);
    folds.push(...p.folds);
    rest = p.rest;
  }
  return { folds, rest };
}

/**
 * Where a reader's verbatim rows start once the plugins' folds are taken into account: its own
 * located cut, or — when the folds reach past it — the unit that holds the first row no fold
 * covers (a unit the fold cursor splits stays whole, overlapping the fold). Rows before that
 * are never decoded: the folds stand in for them.
 */
function readFrom(input: StrategyInput, located: LocatedCut): LocatedCut {
  const covered = Math.max(0, ...input.folds.map((p) => p.coveredThrough?.(input) ?? 0));
  if (covered < located.openerSeq) return located;
  const next = firstSeqAfter(input.db, input.session.sid, covered) ?? input.head + 1;
  const start = Math.max(located.openerSeq, openerAtOrBefore(input.db, input.session.sid, next)?.seq ?? located.openerSeq);
  return start === located.openerSeq ? located : { ...located, openerSeq: start, resumeSeq: start, withinUnit: false, notes: [] };
}

/**
 * `prior` over the verbatim rows after a reader's located cut, decoding only what no fold covers.
 * The reader's own state ends at its opener for a cut between units, but past the exchanges it
 * evicted for a cut inside a unit: a fold that ends among those exchanges is already in the
 * reader's summary and must not come back beside it.
 */
export function priorTail(input: StrategyInput, located: LocatedCut): Prior {
  const fromSeq = located.withinUnit ? located.resumeSeq : located.openerSeq;
  return prior(input, tailRows(input, readFrom(input, located)), fromSeq);
}

/** Fills, in slices, the row cache `priorTail` reads (see history-rows.ts `warmTailRows`); undefined when it is filled. */
export function warmPriorTail(input: StrategyInput, located: LocatedCut): Promise<void> | undefined {
  return warmTailRows(input, readFrom(input, located));
}

/**
 * The plugins a session's request reads: those of enabled extensions, in registry order,
 * without the one owned by the active strategy (which reads its own state directly).
 */
export function foldPluginsFor(enabledInRegistryOrder: readonly string[], plugins: Readonly<Record<string, FoldPlugin>>, strategy: string | null): FoldPlugin[] {
  const out: FoldPlugin[] = [];
  for (const name of enabledInRegistryOrder) {
    const p = plugins[name];
    if (p !== undefined && p.owner !== strategy) out.push(p);
  }
  return out;
}

/** A fold as the request (and a summarizer) reads it: a header naming its source and rows. */
export function foldText(f: Fold): string {
  return `[stored summary from ${f.source} of rows #${f.firstSeq}-#${f.lastSeq}]\n${f.text}`;
}
