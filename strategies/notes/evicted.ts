// What a compaction evicted, derived rather than reported: the history the notes have not
// covered yet, minus the longest tail the strategy's new request still ends with, that tail
// moved forward to a user message. Works for any strategy, since it reads only the request.
import type { PlainInput } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { forModel, type ProjectionTarget } from '../projection.ts';

function same(a: readonly PlainInput[], b: readonly PlainInput[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (JSON.stringify(a[i]) !== JSON.stringify(b[i])) return false;
  return true;
}

/**
 * Index into `rows` of the first row the request still carries verbatim, or `rows.length`
 * when it carries none of them. `rows` is history in order; `request` the strategy's inputs
 * after its compaction (layers not included); `target` the one they were projected for.
 *
 * The rows are split before every user row. A user row closes any open turn and its input is
 * never merged into the one before it, so projecting the pieces one by one gives exactly the
 * projection of the whole, in the same order. Walking the pieces from the newest back, each
 * piece whose projection matches the inputs just before those already matched joins the kept
 * tail; the first that does not ends it. Because only whole pieces are kept, the tail starts
 * at a user row: a tail that began inside a unit (a cut between exchanges) is moved forward to
 * the next user row, so the notes cover a little more than was evicted rather than less.
 */
export function keptFrom(rows: readonly StoredRow[], request: readonly PlainInput[], target: ProjectionTarget): number {
  const starts: number[] = [];
  rows.forEach((r, i) => {
    if (r.row_class === 'user') starts.push(i);
  });
  let end = request.length;
  let kept = rows.length;
  for (let k = starts.length - 1; k >= 0; k--) {
    const from = starts[k]!;
    const piece = forModel(rows.slice(from, kept), target);
    if (piece.length > end || !same(piece, request.slice(end - piece.length, end))) break;
    end -= piece.length;
    kept = from;
  }
  return kept;
}
