// Stored folds across strategies: a strategy reads what other extensions folded (LCM's summary
// nodes, the snapcompact archive) through `prior`, never by importing them. Which plugins a
// request reads is decided once here; each plugin lives with the extension that stores its folds.
import type { StoredRow } from '../../protocol/rows.ts';
import type { Fold, FoldPlugin, Prior, StrategyInput } from '../contract.ts';

/**
 * The history with every stored fold in front, oldest first: each plugin in turn takes the
 * rows the earlier ones left and returns its folds and what it does not cover. Without plugins
 * (or folds) the history comes back as it is.
 */
export function prior(input: StrategyInput, history: readonly StoredRow[]): Prior {
  const folds: Fold[] = [];
  let rest = history;
  for (const plugin of input.folds) {
    const p = plugin.prior(input, rest);
    folds.push(...p.folds);
    rest = p.rest;
  }
  return { folds, rest };
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
