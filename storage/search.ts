// Literal transcript search (`transcript_grep`): SQLite narrows candidate rows in bounded
// batches, the exact Unicode case-insensitive match runs here. Filling the trigram index is
// storage/search-index.ts's job; queueing a search beside its session's writes is the caller's.
import type { Params, Result } from '../protocol/methods.ts';
import { type Db, perDb, timeSlicer, yieldToEventLoop } from './db.ts';
import { indexedThrough } from './search-index.ts';
import { requireSession } from './sessions.ts';

export interface GrepOptions {
  /** Awaited between batches so a long search lets other work run; default setImmediate. */
  yieldEvery?: () => Promise<void>;
  /**
   * Runs the trigram candidate query (FTS_CANDIDATES_SQL with the query and the highest
   * indexed seq). The daemon passes a worker thread's (storage/search-worker.ts); by default
   * it runs inline on `db`.
   */
  candidates?: (query: string, maxSeq: number) => Promise<number[]>;
}

/** Indexed rows whose text may contain a trigram query, in seq order. */
export const FTS_CANDIDATES_SQL =
  'SELECT rowid FROM transcript_fts WHERE transcript_fts MATCH ? AND rowid <= ? ORDER BY rowid';

/** Most rows SQLite hands over per batch. */
export const GREP_BATCH_ROWS = 2048;
/** Candidates per session row above which a session-scoped search scans instead. */
const SCAN_INSTEAD_FACTOR = 4;
/** Preview length, in UTF-16 code units, before ellipses. */
const PREVIEW_CHARS = 160;
/** How much of the preview comes before the match. */
const PREVIEW_LEAD = 60;

/**
 * The one case fold of literal search: NFC, then Unicode lower case. A pattern matches a row
 * when fold(row text) contains fold(pattern). This is lower-casing, not full case folding:
 * 'ÉCOLE' finds 'école', but 'straße' does not find 'STRASSE'.
 */
export function fold(s: string): string {
  // NFC leaves ASCII as it is, and normalizing is the expensive half.
  return ASCII.test(s) ? s.toLowerCase() : s.normalize('NFC').toLowerCase();
}

const ASCII = /^[\x00-\x7f]*$/;

interface Candidate {
  seq: number;
  sid: number;
  text: string;
}

function prepare(db: Db) {
  return {
    globalPage: db.prepare<[number, number], Candidate>(
      'SELECT seq, sid, text FROM transcript WHERE seq > ? ORDER BY seq LIMIT ?',
    ),
    sessionPage: db.prepare<[number, number, number], Candidate>(
      'SELECT seq, sid, text FROM transcript WHERE sid = ? AND seq > ? ORDER BY seq LIMIT ?',
    ),
    ftsCandidates: db.prepare<[string, number], number>(FTS_CANDIDATES_SQL).pluck(),
    bySeqs: db.prepare<[string], Candidate>(
      'SELECT seq, sid, text FROM transcript WHERE seq IN (SELECT value FROM json_each(?)) ORDER BY seq',
    ),
    bySeqsInSession: db.prepare<[string, number], Candidate>(
      'SELECT seq, sid, text FROM transcript WHERE seq IN (SELECT value FROM json_each(?)) AND sid = ? ORDER BY seq',
    ),
    sessionRowsThrough: db
      .prepare<[number, number], number>('SELECT count(*) FROM transcript WHERE sid = ? AND seq <= ?')
      .pluck(),
    workspaceSids: db.prepare<[string], number>('SELECT sid FROM sessions WHERE workspace = ?').pluck(),
    nameOf: db.prepare<[number], string>('SELECT name FROM sessions WHERE sid = ?').pluck(),
  };
}

const stmts = perDb(prepare);


/**
 * The trigram query that narrows a pattern, or null when the index cannot narrow it.
 *
 * The index only narrows: it must return every row the exact match accepts. It folds ASCII
 * case (and the Kelvin sign to k) but not the few other non-ASCII characters that NFC or
 * lower-casing turn into ASCII: U+037E (NFC ';'), U+1FEF (NFC '`') and U+0130 (lower case
 * 'i' + U+0307). So the pattern is split at ';' and '`', a final 'i' is dropped (only a
 * pattern's last character can meet the 'i' of a lower-cased U+0130), and the pieces of at
 * least three characters are ANDed as phrases. Non-ASCII patterns and patterns with no such
 * piece are scanned instead.
 */
export function trigramQuery(pattern: string): string | null {
  if (!/^[\x01-\x7f]+$/.test(pattern)) return null;
  let p = pattern.toLowerCase();
  if (p.endsWith('i')) p = p.slice(0, -1);
  const pieces = p.split(/[;`]/).filter((piece) => piece.length >= 3);
  if (pieces.length === 0) return null;
  return pieces.map((piece) => `"${piece.replaceAll('"', '""')}"`).join(' AND ');
}

/**
 * A single-line excerpt of about PREVIEW_CHARS code units around the first match. The match
 * position is taken from the folded text, which lines up with the original only when folding
 * kept the length; otherwise the excerpt starts at the row's beginning.
 */
function preview(text: string, folded: string, needle: string): string {
  const at = folded.length === text.length ? Math.max(0, folded.indexOf(needle)) : 0;
  let start = Math.max(0, at - PREVIEW_LEAD);
  let end = Math.min(text.length, start + PREVIEW_CHARS);
  start = Math.max(0, end - PREVIEW_CHARS);
  // Never cut a surrogate pair in half.
  if (start > 0 && isLowSurrogate(text.charCodeAt(start))) start--;
  if (end < text.length && isLowSurrogate(text.charCodeAt(end))) end++;
  const body = text.slice(start, end).replace(/\r\n|[\r\n\u2028\u2029]/g, ' ');
  return `${start > 0 ? '…' : ''}${body}${end < text.length ? '…' : ''}`;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** Counts every match and keeps the requested page of them, in seq order. */
class Matches {
  total = 0;
  readonly page: Array<{ session: string; seq: number; preview: string }> = [];
  private readonly needle: string;

  constructor(
    pattern: string,
    private readonly offset: number,
    private readonly limit: number,
    private readonly sids: ReadonlySet<number> | null,
    private readonly nameOf: (sid: number) => string,
  ) {
    this.needle = fold(pattern);
  }

  /** Checks a batch, yielding through `slice` so a batch of long rows never holds the thread. */
  async consider(rows: readonly Candidate[], slice: () => Promise<void>): Promise<void> {
    for (const row of rows) {
      await slice();
      if (this.sids !== null && !this.sids.has(row.sid)) continue;
      const folded = fold(row.text);
      if (!folded.includes(this.needle)) continue;
      const index = this.total++;
      if (index >= this.offset && index < this.offset + this.limit) {
        this.page.push({ session: this.nameOf(row.sid), seq: row.seq, preview: preview(row.text, folded, this.needle) });
      }
    }
  }
}

/**
 * Literal, Unicode case-insensitive search over transcript rows, paged in matching rows.
 *
 * Rows are visited in seq order in two parts split at the index cursor C (read once):
 *  - seq <= C: when the pattern has a trigram query, one FTS query lists the candidate seqs
 *    (see below for why it is not paged), and their texts are fetched and checked in batches
 *    of GREP_BATCH_ROWS; without one, these rows are scanned like the rest. A session-scoped
 *    search also scans when the (global) candidates far outnumber the session's indexed rows.
 *  - seq > C: keyset scans of actual rows, GREP_BATCH_ROWS at a time: the session's rows
 *    through the (sid, seq) index for a session-scoped search, global rows otherwise.
 * A cross-session search filters by workspace here, on the sids of that workspace loaded
 * once, so every SQL batch stays bounded however few sessions match. Every match is counted;
 * only the page's previews are built.
 *
 * The FTS candidates are listed in one query rather than in rowid > ? batches: measured on
 * 200k rows, FTS5 does the work of a multi-trigram phrase (loading each trigram's doclist,
 * checking positions) on every query whatever its rowid bounds or LIMIT, so each batch cost
 * about as much as the whole query (20-60 ms when the trigrams are common) and paging
 * multiplied it. That one query is also the longest stretch a search holds the thread; for
 * rare patterns it takes well under a millisecond.
 */
export async function grep(
  db: Db,
  params: Params<'transcript_grep'>,
  opts: GrepOptions = {},
): Promise<Result<'transcript_grep'>> {
  const yieldNow = opts.yieldEvery ?? yieldToEventLoop;
  const slice = timeSlicer(yieldNow);
  const st = stmts(db);
  const scope = params.session === undefined ? null : requireSession(db, params.session);
  const sids = params.workspace === undefined ? null : new Set(st.workspaceSids.all(params.workspace));
  // Names are looked up as matches are kept, while their rows (and so their sessions) exist.
  const names = new Map<number, string>();
  const nameOf = (sid: number): string => {
    let name = names.get(sid);
    if (name === undefined) names.set(sid, (name = st.nameOf.get(sid) ?? ''));
    return name;
  };
  const matches = new Matches(params.pattern, params.offset, params.limit, sids, nameOf);

  const nothing = sids !== null && (sids.size === 0 || (scope !== null && !sids.has(scope.sid)));
  if (!nothing) {
    const cursor = indexedThrough(db);
    const query = trigramQuery(params.pattern);
    let after = 0;
    if (query !== null && cursor > 0) {
      const candidates = opts.candidates === undefined ? st.ftsCandidates.all(query, cursor) : await opts.candidates(query, cursor);
      // The candidates are global; when they far outnumber a session's indexed rows, reading
      // its rows directly is cheaper than probing every candidate. The factor is a rough
      // break-even from measurements on 200k rows, not a tuned constant.
      const scanInstead =
        scope !== null && candidates.length > SCAN_INSTEAD_FACTOR * (st.sessionRowsThrough.get(scope.sid, cursor) ?? 0);
      for (let i = 0; !scanInstead && i < candidates.length; i += GREP_BATCH_ROWS) {
        await yieldNow();
        const seqs = JSON.stringify(candidates.slice(i, i + GREP_BATCH_ROWS));
        await matches.consider(scope === null ? st.bySeqs.all(seqs) : st.bySeqsInSession.all(seqs, scope.sid), slice);
      }
      if (!scanInstead) after = cursor;
    }
    for (;;) {
      await yieldNow();
      const rows =
        scope === null ? st.globalPage.all(after, GREP_BATCH_ROWS) : st.sessionPage.all(scope.sid, after, GREP_BATCH_ROWS);
      await matches.consider(rows, slice);
      if (rows.length < GREP_BATCH_ROWS) break;
      after = rows[rows.length - 1]!.seq;
    }
  }

  const page = matches.page;
  const next = params.offset + page.length;
  return { total: matches.total, offset: params.offset, next_offset: next < matches.total ? next : null, matches: page };
}
