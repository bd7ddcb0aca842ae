// How far the engine lets a strategy's verbatim history run before it compacts it in stages. A
// session that compacts as it goes never has more than a window or two past its saved state; a
// long import, or a session the agent ran without the daemon, can have a hundred thousand rows.
// Compacting those in one go holds every row decoded and projected at once, a heap that grows
// with the history, and every collection of it is a pause for every other session on the host
// (docs/performance.md, stop 45). Instead the engine (prepare.ts) first compacts the history as
// it stood at earlier heads, one stage at a time, as a request there would have; each stage
// decodes only its own rows. The request's own compaction then finds at most about two stages'.
//
// Sizes are read from the (sid, seq, graphemes) index, never from decoded rows. On the usual
// request the check is arithmetic (seqs are global, so a short seq span rules a stage out) or,
// on a busy host where other sessions' rows widen the span, one count of the tail's own rows.
import { countRowsBetween, nextUnitStart, seqAtVolume } from '../storage/transcript/history.ts';
import type { StrategyInput } from './contract.ts';

/** Rows in one stage, at least: fewer would only repeat each compaction's fixed work more often. */
export const STAGE_ROWS = 4096;
/**
 * Rendered graphemes in one stage, at least, per token of the window: a token estimate is at
 * least a quarter of a row's UTF-8 bytes, so a stage of 8 graphemes a window token is at least
 * twice the window, and its compaction is due whatever the trigger.
 */
export const STAGE_GRAPHEMES_PER_WINDOW_TOKEN = 8;
/** The history past the saved state is compacted in stages from this many rows on. */
export const CATCH_UP_ROWS = 2 * STAGE_ROWS;

/**
 * The head of the next stage when the history from `tailFrom` through the request's head is long
 * enough to compact in stages, else undefined. A stage ends where a unit ends (the row before the
 * next unit's opener), as a request between two turns would, and leaves at least STAGE_ROWS rows
 * after it for the stages and the request that follow.
 */
export function stageHead(input: StrategyInput, tailFrom: number): number | undefined {
  const window = input.window.window;
  if (window === null) return undefined;
  const { db, head } = input;
  const sid = input.session.sid;
  const after = tailFrom - 1;
  // Seqs are global: a span this short cannot hold CATCH_UP_ROWS of this session's rows.
  if (head - after < CATCH_UP_ROWS || countRowsBetween(db, sid, after, head, CATCH_UP_ROWS) < CATCH_UP_ROWS) return undefined;
  const end = seqAtVolume(db, sid, after, head, { rows: STAGE_ROWS, graphemes: STAGE_GRAPHEMES_PER_WINDOW_TOKEN * window });
  if (end === undefined) return undefined;
  const opener = nextUnitStart(db, sid, end, head);
  if (opener === undefined) return undefined;
  const stage = opener - 1;
  return countRowsBetween(db, sid, stage, head, STAGE_ROWS) < STAGE_ROWS ? undefined : stage;
}
