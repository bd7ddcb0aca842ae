// rolling's view of its saved state against the current transcript: where the saved cut falls
// (verified once per kernel and cached), or that it no longer matches. Read-only.
import type { StoredRow } from '../../protocol/rows.ts';
import { foldSources } from '../../storage/conversation.ts';
import { loadRollingState, type ItemCut, type RollingState } from '../../storage/rolling-state.ts';
import { sessionRewrites, userRowsAfter, userRowsBeforeCount } from '../../storage/user-rows.ts';
import type { StrategyInput } from '../contract.ts';
import { CutCache, EMPTY_FINGERPRINT, extendFingerprint, locateCut } from '../harness/cut.ts';
import { rowInputs } from '../projection.ts';

export interface ResolvedState {
  /** The saved state when it still matches the transcript. */
  state: RollingState | undefined;
  /** Seq of the first row after the cut; 0 without usable state. */
  cutSeq: number;
  /** User inputs before the cut and their fingerprint (0 and empty without state). */
  users: number;
  fingerprint: string;
  /** The session's rewrite counter when this was resolved (keys derived caches). */
  rewrites: number;
  notes: string[];
}

const NO_STATE = { state: undefined, cutSeq: 0, users: 0, fingerprint: EMPTY_FINGERPRINT };

interface Located {
  cutSeq: number;
  users: number;
  fingerprint: string;
}

function cutCache(input: StrategyInput): CutCache<Located> {
  let c = input.cache.get('rolling.cuts') as CutCache<Located> | undefined;
  if (c === undefined) {
    c = new CutCache<Located>();
    input.cache.set('rolling.cuts', c);
  }
  return c;
}

/**
 * The cut of an item-count state (the format before user counts), checked the old way: walk
 * the projected items in order and accept the cut only where it falls exactly before a user
 * input. Returns the equivalent user cut, or undefined when the items no longer line up.
 */
export function locateItemCut(input: StrategyInput, cut: ItemCut): Located | undefined {
  if (input.head === 0) return cut.items === 0 ? { cutSeq: 1, users: 0, fingerprint: EMPTY_FINGERPRINT } : undefined;
  let items = 0;
  let users = 0;
  let lastRole: string | undefined;
  for (const page of foldSources(input.db, input.session.name, 1, input.head, { boundary: input.head })) {
    for (const row of page as StoredRow[]) {
      if (row.row_class === 'user' && items === cut.items) {
        const texts = userRowsAfter(input.db, input.session.sid, 0, users).map((r) => r.text);
        return { cutSeq: row.seq, users, fingerprint: extendFingerprint(EMPTY_FINGERPRINT, texts) };
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
  const { db, session, head } = input;
  const state = loadRollingState(db, session.sid);
  const rewrites = sessionRewrites(db, session.sid);
  if (state === undefined) return { ...NO_STATE, rewrites, notes: [] };
  const key = `${state.updatedAt}:${JSON.stringify(state.cut)}:${rewrites}`;
  const located = cutCache(input).lookup(key, () => {
    if (!('format' in state.cut)) return locateItemCut(input, state.cut);
    const cut = state.cut;
    // Nothing before the cut moved or changed since the save (same rewrite counter, and new
    // rows only ever get higher seqs): the saved position holds, and the fingerprint with it.
    // The index-only count guards against rows deleted behind the daemon's back.
    if (state.rewrites === rewrites && userRowsBeforeCount(db, session.sid, state.cutSeq) === cut.users) {
      return { cutSeq: state.cutSeq, users: cut.users, fingerprint: cut.fingerprint };
    }
    const seq = locateCut(db, session.sid, cut, head);
    return seq === undefined ? undefined : { cutSeq: seq, users: cut.users, fingerprint: cut.fingerprint };
  });
  if (located === undefined) {
    return {
      ...NO_STATE,
      rewrites,
      notes: ['the saved rolling summary no longer matches the transcript; it is ignored until the next compaction replaces it'],
    };
  }
  return { state, ...located, rewrites, notes: [] };
}
