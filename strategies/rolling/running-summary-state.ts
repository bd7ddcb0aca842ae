// The running summary's view of its saved state against the current transcript: where the saved cut falls
// (through the shared cut module, cached per kernel), or that it no longer matches, or that
// this build cannot read it. Read-only.
import { foldSources } from '../../storage/transcript/history.ts';
import { loadRollingState, type ItemCut, type RollingState } from '../../storage/state/rolling.ts';
import { sessionRewrites, userRowsAfter } from '../../storage/transcript/user-rows.ts';
import type { StrategyInput } from '../contract.ts';
import { CutCache, EMPTY_FINGERPRINT, extendFingerprint, locate, startCut, type LocatedCut } from '../harness/cut.ts';
import { cacheSlot } from '../harness/kernel-cache.ts';
import { loadSaved, savedSlot } from '../harness/saved-state.ts';
import { rowInputs } from '../projection.ts';

export interface ResolvedState {
  /** The saved state when it still matches the transcript. */
  state: RollingState | undefined;
  /** Where the tail starts: the saved cut located, or the start of history without state. */
  located: LocatedCut;
  notes: string[];
}

const CUTS = cacheSlot<CutCache>('rolling.cuts');
const SAVED = savedSlot<ReturnType<typeof loadRollingState>>('rolling.saved');
const LEGACY = cacheSlot<{ key: string; located: LocatedCut | undefined }>('rolling.legacy-cut');

/**
 * The cut of an item-count state (the format before user counts), checked the old way: walk
 * the projected items in order and accept the cut only where it falls exactly before a user
 * input. Returns the equivalent user cut, or undefined when the items no longer line up.
 */
export function locateItemCut(input: StrategyInput, cut: ItemCut): LocatedCut | undefined {
  if (input.head === 0) return cut.items === 0 ? startCut() : undefined;
  let items = 0;
  let users = 0;
  let lastRole: string | undefined;
  for (const page of foldSources(input.db, input.session.name, 1, input.head, { boundary: input.head })) {
    for (const row of page) {
      if (row.row_class === 'user' && items === cut.items) {
        const texts = userRowsAfter(input.db, input.session.sid, 0, users).map((r) => r.text);
        const saved = { format: 2 as const, users, fingerprint: extendFingerprint(EMPTY_FINGERPRINT, texts) };
        return { cut: saved, openerSeq: row.seq, resumeSeq: row.seq, withinUnit: false, notes: [] };
      }
      if (items > cut.items) return undefined;
      if (row.row_class === 'user') users += 1;
      for (const inp of rowInputs(row, input.target)) {
        // Consecutive tool inputs merge into one item, as forModel does.
        if (!(inp.role === 'tool' && lastRole === 'tool')) items += 1;
        lastRole = inp.role;
      }
    }
  }
  return undefined;
}

export function resolveState(input: StrategyInput): ResolvedState {
  const loaded = loadSaved(input, SAVED, () => loadRollingState(input.db, input.session.sid));
  if (loaded === undefined) return { state: undefined, located: startCut(), notes: [] };
  if ('unreadable' in loaded) {
    return { state: undefined, located: startCut(), notes: [`the saved rolling summary cannot be read (${loaded.unreadable}); it is ignored until the next compaction replaces it`] };
  }
  const state = loaded;
  let located: LocatedCut | undefined;
  if ('format' in state.cut) {
    located = locate(input, CUTS, { cut: state.cut, hints: state.hints, rewrites: state.rewrites, savedAt: state.updatedAt });
  } else {
    const key = `${state.updatedAt}:${state.cut.items}:${sessionRewrites(input.db, input.session.sid)}`;
    const cached = input.cache.get(LEGACY);
    located = cached?.key === key ? cached.located : locateItemCut(input, state.cut);
    input.cache.set(LEGACY, { key, located });
  }
  if (located === undefined) {
    return {
      state: undefined,
      located: startCut(),
      notes: ['the saved rolling summary no longer matches the transcript; it is ignored until the next compaction replaces it'],
    };
  }
  return { state, located, notes: located.notes };
}
