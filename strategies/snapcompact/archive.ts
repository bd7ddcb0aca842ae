// snapcompact's saved archive as the strategy reads it: located against the transcript with
// the shared cut module (the same user-message cut rolling saves), extended by evicted rows
// with each row's start marked, and those marks mapped back to rows for a frame's caption.
// Choosing the frames a request shows is snapcompact.ts's. Read by the strategy and by
// snapcompact-memory's fold plugin; no other strategy reads it.
import type { StoredRow } from '../../protocol/rows.ts';
import { runSteps, type Steps } from '../../protocol/time-slice.ts';
import { archiveStamp, loadArchive, type ArchiveMarks, type ArchiveState } from '../../storage/state/snapcompact.ts';
import type { StrategyInput } from '../contract.ts';
import { CutCache, locate, startCut, type LocatedCut } from '../harness/cut.ts';
import { cacheSlot } from '../harness/kernel-cache.ts';
import { loadStamped, savedSlot } from '../harness/saved-state.ts';
import { archiveText } from './archive-text.ts';

export interface ResolvedArchive {
  state: ArchiveState | undefined;
  located: LocatedCut;
  notes: string[];
}

const CUTS = cacheSlot<CutCache>('snapcompact.cuts');

const LOADED = savedSlot<ReturnType<typeof loadArchive>>('snapcompact.archive');

/**
 * The saved archive, read and parsed once per save: a request checks the row's save time and
 * reuses the parsed text and marks (megabytes on a long session) while it has not changed.
 */
function loadedArchive(input: StrategyInput): ReturnType<typeof loadArchive> {
  const stamp = archiveStamp(input.db, input.session.sid);
  return loadStamped(input, LOADED, stamp, () => (stamp === undefined ? undefined : loadArchive(input.db, input.session.sid)));
}

/** What a compaction just saved, as the next read would load it: the request after the commit reads no megabytes back. */
export function seedArchive(input: StrategyInput, saved: ArchiveState): void {
  input.cache.set(LOADED, { stamp: saved.updatedAt, value: saved });
}

/** The saved archive and where its cut falls now (the start of history without one). */
export function resolveArchive(input: StrategyInput): ResolvedArchive {
  const loaded = loadedArchive(input);
  if (loaded === undefined) return { state: undefined, located: startCut(), notes: [] };
  if ('unreadable' in loaded) {
    return { state: undefined, located: startCut(), notes: [`the saved snapcompact archive cannot be read (${loaded.unreadable}); it is ignored until the next compaction replaces it`] };
  }
  const located = locate(input, CUTS, { cut: loaded.cut, hints: loaded.hints, rewrites: loaded.rewrites, savedAt: loaded.updatedAt });
  if (located === undefined) {
    return { state: undefined, located: startCut(), notes: ['the saved snapcompact archive no longer matches the transcript; it is ignored until the next compaction replaces it'] };
  }
  return { state: loaded, located, notes: located.notes };
}

/**
 * The archive extended by newly evicted rows, each row's text NFC-normalized (what the frames
 * draw) and its start recorded. Rows already archived (an exchange-level cut keeps its opener
 * in the tail after archiving it) are not archived twice.
 */
export function extendArchive(text: string, marks: ArchiveMarks, rows: readonly StoredRow[]): { text: string; marks: ArchiveMarks } {
  const grown = runSteps(growArchiveSteps(text.length, marks, rows));
  return { text: text + grown.added.join(''), marks: grown.marks };
}

/**
 * Characters of archive text a stored part holds, about: a row's text is never split. Each part
 * is one INSERT on the event loop (docs/snapcompact.md): parts four times this size held it for
 * 20-35 ms each.
 */
export const PART_CHARS = 1 << 18;

/** Rows archived per step: a first compaction archives the whole history. */
const ROWS_PER_STEP = 256;

/** What evicted rows add to an archive of `length` characters. */
export interface Grown {
  /**
   * The text added, in parts of about PART_CHARS (each a string of its own, never a join of
   * the whole): joined, what follows the archive's text. Every part but an empty archive's
   * first starts with the newline that joins its first row to the text before.
   */
  added: string[];
  /** The marks of the rows each added part holds, part by part (what the part is stored with). */
  addedMarks: ArchiveMarks[];
  /** The archive's marks, the new rows' included. */
  marks: ArchiveMarks;
}

/** `extendArchive` in steps (see runSteps), as the parts a compaction stores. */
export function* growArchiveSteps(length: number, marks: ArchiveMarks, rows: readonly StoredRow[]): Steps<Grown> {
  const outMarks: ArchiveMarks = [...marks];
  const last = marks[marks.length - 1]?.[1] ?? 0;
  const added: string[] = [];
  const addedMarks: ArchiveMarks[] = [];
  let partMarks: ArchiveMarks = [];
  let pieces: string[] = [];
  let partChars = 0;
  let at = length;
  for (const [i, row] of rows.entries()) {
    if (i % ROWS_PER_STEP === ROWS_PER_STEP - 1) yield;
    if (row.seq <= last) continue;
    const piece = archiveText([row]).normalize('NFC');
    if (piece === '') continue;
    const text = at === 0 ? piece : `\n${piece}`;
    const mark: [number, number] = [at === 0 ? 0 : at + 1, row.seq];
    outMarks.push(mark);
    partMarks.push(mark);
    pieces.push(text);
    partChars += text.length;
    at += text.length;
    if (partChars >= PART_CHARS) {
      added.push(pieces.join(''));
      addedMarks.push(partMarks);
      pieces = [];
      partMarks = [];
      partChars = 0;
    }
  }
  if (pieces.length > 0) {
    added.push(pieces.join(''));
    addedMarks.push(partMarks);
  }
  return { added, addedMarks, marks: outMarks };
}

/** The seqs of the first and last archived rows whose text starts in [from, to). */
export function rowsIn(marks: ArchiveMarks, from: number, to: number): { first: number; last: number } | undefined {
  // The last mark at or before `from` owns the text at `from`.
  let lo = 0;
  let hi = marks.length - 1;
  let start = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (marks[mid]![0] <= from) {
      start = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  if (start < 0) start = 0;
  let end = start;
  while (end + 1 < marks.length && marks[end + 1]![0] < to) end += 1;
  const a = marks[start];
  const b = marks[end];
  return a === undefined || b === undefined ? undefined : { first: a[1], last: b[1] };
}
