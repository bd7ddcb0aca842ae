// Which history rows a request still carries verbatim, read off the request itself: the rows'
// own projections are matched against the end of the request, exchange by exchange, from the
// newest back. Nothing a strategy reports goes into it, so it holds for every strategy. The
// engine elides tool-output images below the first carried row; the notes layer derives what a
// compaction evicted from the same match.
import type { PlainInput } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import type { StrategyInput } from '../contract.ts';
import { forModel, type InputsMemo, type ProjectionTarget } from '../projection.ts';
import { cachedThroughHead, readRows } from './history-rows.ts';
import { rowMemo } from './row-memo.ts';

function same(a: readonly PlainInput[], b: readonly PlainInput[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (JSON.stringify(a[i]) !== JSON.stringify(b[i])) return false;
  return true;
}

/**
 * Where a piece of history starts: at a user or an assistant row. Both close the turn before
 * them, and the first input each emits is never merged into the one before it (only adjacent
 * tool inputs merge, and an assistant row that opens calls emits its own input first), so the
 * projections of the pieces, one after the other, are the projection of the whole.
 */
function opensPiece(row: StoredRow): boolean {
  return row.body.kind === 'user' || row.body.kind === 'assistant';
}

export interface CarriedOptions {
  /** The row memo the request's tail was projected with, to reuse each row's own inputs. */
  memo?: InputsMemo;
  /**
   * Rows just before those seen so far, in order (one call per need); empty once the session's
   * first row was reached. Without it, rows ahead of the first piece start are never judged.
   */
  earlier?: () => readonly StoredRow[];
}

/**
 * The first of `rows` the request still carries verbatim: `from` indexes `rows` as returned
 * (which `earlier` may have extended at the front), `rows.length` when it carries none.
 * `request` is a strategy's inputs (layers not included), projected for `target`.
 *
 * Walking the pieces from the newest back, each piece whose projection equals the inputs just
 * before those already matched is carried; the first that does not ends the walk, as does a
 * request matched to its first input. A match finer than a unit finds a tail that a cut between
 * exchanges started inside a unit, and it goes by position, so neither a result that answers no
 * call nor a call id used twice can move it. A coincidental match only moves the start back.
 */
export function carriedFrom(rows: readonly StoredRow[], request: readonly PlainInput[], target: ProjectionTarget, opts: CarriedOptions = {}): { rows: readonly StoredRow[]; from: number } {
  let all = rows;
  let kept = all.length;
  let end = request.length;
  let atStart = false;
  while (end > 0) {
    let start = kept - 1;
    while (start >= 0 && !opensPiece(all[start]!)) start--;
    if (start < 0 && !atStart) {
      // The piece before `kept` may begin before these rows: look further back first.
      if (opts.earlier === undefined) break;
      const more = opts.earlier();
      if (more.length === 0) atStart = true;
      else {
        all = [...more, ...all];
        kept += more.length;
      }
      continue;
    }
    // At the session's first row, whatever precedes the first piece start is a piece too.
    if (start < 0) {
      if (kept === 0) break;
      start = 0;
    }
    const piece = forModel(all.slice(start, kept), target, opts.memo);
    if (piece.length > end || !same(piece, request.slice(end - piece.length, end))) break;
    end -= piece.length;
    kept = start;
  }
  return { rows: all, from: kept };
}

/** Seqs read per step back when the cached rows do not reach the first carried row; doubled each step. */
const EARLIER_SEQS = 256;

/**
 * The seq of the oldest row of the session that `request` (the strategy's inputs for `input`)
 * carries verbatim; `input.head + 1` when it carries none. Starts from the rows the preparation
 * has cached and reads further back only as far as the match goes.
 */
export function firstCarriedSeq(input: StrategyInput, request: readonly PlainInput[]): number {
  const cached = cachedThroughHead(input) ?? [];
  let below = cached[0]?.seq ?? input.head + 1;
  let span = EARLIER_SEQS;
  const earlier = (): readonly StoredRow[] => {
    while (below > 1) {
      const from = Math.max(1, below - span);
      const rows = readRows(input, from, below - 1);
      below = from;
      span *= 2;
      if (rows.length > 0) return rows;
    }
    return [];
  };
  const { rows, from } = carriedFrom(cached, request, input.target, { memo: rowMemo(input).inputs, earlier });
  return rows[from]?.seq ?? input.head + 1;
}
