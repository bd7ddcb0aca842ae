// snapcompact-memory's fold plugin: another strategy (rolling or lcm's readers after a switch)
// receives the snapcompact archive through `prior` as numbered text pages standing in for
// exactly the rows the archive's cut covers, plus the folds the archive had kept as text.
import type { StoredRow } from '../../protocol/rows.ts';
import { wholeText, type ArchiveMarks } from '../../storage/state/snapcompact.ts';
import type { Fold, FoldPlugin, Prior, StrategyInput } from '../contract.ts';
import { resolveArchive, rowsIn } from './archive.ts';

/** Characters of archive text per page (pages break where an archived row starts). */
export const PAGE_CHARS = 6000;

/** The archive text in pages of about PAGE_CHARS, each starting at a row's start. */
export function archivePages(text: string, marks: ArchiveMarks): Array<{ text: string; first: number; last: number }> {
  const pages: Array<{ text: string; first: number; last: number }> = [];
  let start = 0;
  let i = 0;
  while (start < text.length) {
    // The next page starts at the first row start at least PAGE_CHARS further on.
    while (i < marks.length && marks[i]![0] <= start) i += 1;
    let j = i;
    while (j < marks.length && marks[j]![0] - start < PAGE_CHARS) j += 1;
    const end = j < marks.length ? marks[j]![0] : text.length;
    const rows = rowsIn(marks, start, end);
    pages.push({ text: text.slice(start, end).replace(/\n$/, ''), first: rows?.first ?? 0, last: rows?.last ?? 0 });
    start = end;
    i = j;
  }
  return pages;
}

function archiveEnd(input: StrategyInput): { coveredThrough: number; openerSeq: number } | undefined {
  const r = resolveArchive(input);
  if (r.state === undefined || r.state.length === 0) return undefined;
  return { coveredThrough: (r.located.withinUnit ? r.located.resumeSeq : r.located.openerSeq) - 1, openerSeq: r.located.openerSeq };
}

function snapPrior(input: StrategyInput, history: readonly StoredRow[], fromSeq: number): Prior {
  const r = resolveArchive(input);
  const end = archiveEnd(input);
  if (r.state === undefined || end === undefined || end.coveredThrough < fromSeq) return { folds: [], rest: history };
  const pages = archivePages(wholeText(r.state), r.state.marks).filter((p) => p.last >= fromSeq);
  const folds: Fold[] = [
    ...r.state.folds.filter((f) => f.lastSeq >= fromSeq),
    ...pages.map((p, k) => ({
      source: 'snapcompact-memory',
      text: `[snapcompact archive page ${k + 1} of ${pages.length}; transcript_grep and transcript_read search and read the full history]\n${p.text}`,
      firstSeq: p.first,
      lastSeq: p.last,
    })),
  ];
  return { folds, rest: history.filter((row) => row.seq >= end.openerSeq) };
}

export const snapcompactMemory: FoldPlugin = {
  name: 'snapcompact-memory',
  owner: 'snapcompact',
  prior: snapPrior,
  coveredThrough: (input) => archiveEnd(input)?.coveredThrough,
};
