// lcm-memory's fold plugin: another strategy (rolling after a switch) reads lcm's frontier
// nodes as stored folds through `prior`, in place of the rows they cover. Only node rows are
// read; the covered transcript is never expanded to rebuild a summary.
import type { StoredRow } from '../../protocol/rows.ts';
import { frontierNodes, loadLcmState } from '../../storage/state/lcm-tree.ts';
import type { Fold, FoldPlugin, Prior, StrategyInput } from '../contract.ts';
import { opensUnit } from '../harness/units.ts';

/**
 * The frontier nodes that reach past the reader's cut (`fromSeq`), and the history after the
 * covered cursor. When rows after the cursor continue a unit (assistant or tool rows without a
 * new user row), that whole unit stays in `rest`, overlapping the last fold, because `rest`
 * must begin at a unit opener. A node that began before the cut (the reader's own summary
 * covers its start) still comes along whole.
 */
function lcmPrior(input: StrategyInput, history: readonly StoredRow[], fromSeq: number): Prior {
  const state = loadLcmState(input.db, input.session.sid);
  if (state === undefined || state.coveredSeq < fromSeq) return { folds: [], rest: history };
  const folds: Fold[] = frontierNodes(input.db, input.session.sid)
    .filter((n) => n.lastSeq >= fromSeq)
    .map((n) => ({ source: 'lcm-memory', text: n.summary, firstSeq: n.firstSeq, lastSeq: n.lastSeq }));
  if (folds.length === 0) return { folds: [], rest: history };
  let from = history.findIndex((r) => r.seq > state.coveredSeq);
  if (from === -1) return { folds, rest: [] };
  while (from > 0 && !opensUnit(history[from]!)) from -= 1;
  return { folds, rest: history.slice(from) };
}

export const lcmMemory: FoldPlugin = {
  name: 'lcm-memory',
  owner: 'lcm',
  prior: lcmPrior,
  coveredThrough: (input) => loadLcmState(input.db, input.session.sid)?.coveredSeq,
};
