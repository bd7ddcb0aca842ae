// What a compaction evicted, derived rather than reported: the history the notes have not
// covered yet, minus the longest tail the strategy's new request still ends with, that tail
// moved forward to a user message. Works for any strategy, since it reads only the request.
import type { PlainInput } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { carriedFrom } from '../harness/carried.ts';
import type { ProjectionTarget } from '../projection.ts';

/**
 * Index into `rows` of the first row the request still carries verbatim, or `rows.length`
 * when it carries none of them. `rows` is history in order; `request` the strategy's inputs
 * after its compaction (layers not included); `target` the one they were projected for.
 *
 * The carried rows are matched exchange by exchange (harness/carried.ts); the start is then
 * moved forward to the next user row, so a tail that began inside a unit (a cut between
 * exchanges) leaves that unit to the notes, which then cover a little more than was evicted
 * rather than less.
 */
export function keptFrom(rows: readonly StoredRow[], request: readonly PlainInput[], target: ProjectionTarget): number {
  let kept = carriedFrom(rows, request, target).from;
  while (kept < rows.length && rows[kept]!.row_class !== 'user') kept++;
  return kept;
}
