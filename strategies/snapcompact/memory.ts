// snapcompact-memory's fold plugin: another strategy (rolling or lcm's readers after a switch)
// receives the snapcompact archive through `prior` as numbered text pages standing in for
// exactly the rows the archive's cut covers, plus the folds the archive had kept as text.
import type { StoredRow } from '../../protocol/rows.ts';
import { archiveText, type ArchiveMarks, type ArchiveState } from '../../storage/state/snapcompact.ts';
import type { Fold, FoldPlugin, Prior, StrategyInput } from '../contract.ts';
import { cacheSlot } from '../harness/kernel-cache.ts';
import { resolveArchive, rowsIn } from './archive.ts';

/** Characters of archive text per page (pages break where an archived row starts). */
export const PAGE_CHARS = 6000;

interface PageRange {
  start: number;
  end: number;
  /** The rows it holds. */
  first: number;
  last: number;
}

/**
 * Where the archive's pages lie: about PAGE_CHARS each, each starting at a row's start. They
 * follow from the marks and the length alone, so that a reader fetches only the text of the
 * pages it keeps.
 */
function archivePageRanges(length: number, marks: ArchiveMarks): PageRange[] {
  const pages: PageRange[] = [];
  let start = 0;
  let i = 0;
  while (start < length) {
    // The next page starts at the first row start at least PAGE_CHARS further on.
    while (i < marks.length && marks[i]![0] <= start) i += 1;
    let j = i;
    while (j < marks.length && marks[j]![0] - start < PAGE_CHARS) j += 1;
    const end = j < marks.length ? marks[j]![0] : length;
    const rows = rowsIn(marks, start, end);
    pages.push({ start, end, first: rows?.first ?? 0, last: rows?.last ?? 0 });
    start = end;
    i = j;
  }
  return pages;
}

/** A page's text as a fold shows it (without the newline that ends its last row). */
function pageText(text: string): string {
  return text.replace(/\n$/, '');
}

type Page = { text: string; first: number; last: number };

/** The pages the last request read, by the archive's save time and where they start: the next request usually reads the same. */
const PAGES = cacheSlot<{ key: string; pages: Page[] }>('snapcompact-memory.pages');

/** The pages of a saved archive from the one holding `fromSeq` on, their text read from the database. */
function pagesFrom(input: StrategyInput, state: ArchiveState, fromSeq: number): Page[] {
  const key = `${state.updatedAt}:${state.length}:${fromSeq}`;
  const cached = input.cache.get(PAGES);
  if (cached?.key === key) return cached.pages;
  const pages = archivePageRanges(state.length, state.marks)
    .filter((p) => p.last >= fromSeq)
    .map((p) => ({ text: pageText(archiveText(input.db, input.session.sid, state, p.start, p.end)), first: p.first, last: p.last }));
  input.cache.set(PAGES, { key, pages });
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
  const pages = pagesFrom(input, r.state, fromSeq);
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
