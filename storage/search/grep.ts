// Literal transcript search (`transcript_grep`). Rows the index covers are matched, counted and
// paged by it (it holds folded text, storage/search/fold.ts, so its answers are exact for any pattern
// length: see indexMatches); newer rows are scanned in batches bounded by time (scanMatches). Filling the index is
// storage/search/indexer.ts's job; queueing a search beside its session's writes is the caller's.
import type { Params, Result } from '../../protocol/methods.ts';
import { type Db, perDb } from '../db.ts';
import { SLICE_MS, timeSlicer, giveWay } from '../../protocol/time-slice.ts';
import { fold } from './fold.ts';
import { indexedThrough } from './indexer.ts';
import { bodySql } from '../transcript/row-body.ts';
import { ROW_TEXT_SQL, storedRowText } from '../transcript/row-text.ts';
import { bodyMayMatch } from './scan-filter.ts';
import { requireSession } from '../transcript/sessions.ts';

export { fold };

export interface GrepOptions {
  /** Awaited between batches so a long search lets other work run; default setImmediate. */
  yieldEvery?: () => Promise<void>;
  /**
   * Answers the index part of the search (indexMatches' packing). The daemon passes its worker
   * thread's (storage/search/worker.ts); by default it runs inline on `db`.
   */
  hits?: (ask: IndexAsk) => Promise<Float64Array>;
  /**
   * Answers one batch of the scan of rows the index has not reached (scanMatches' packing). The
   * daemon passes its worker thread's, so deriving and folding those rows never holds the event
   * loop; by default each batch runs inline on `db`, one slice long.
   */
  scan?: (ask: ScanAsk) => Promise<Float64Array>;
  /**
   * Only rows with from <= seq <= to (inclusive): lcm_grep's scope to a node's source range.
   * The scan starts at `to` and stops at `from` (or the index cursor); the index query is bounded by it in SQL.
   */
  range?: SeqRange;
}

export interface SeqRange {
  from: number;
  to: number;
}

/**
 * lcm_grep's index query over node summaries (migration 8's lcm_summary_fts, folded the same
 * way): one session's matching nodes as (node, sid) pairs, in lcm_list's order. Here beside
 * indexMatches because the search worker runs both.
 */
export const SUMMARY_HITS_SQL = `SELECT n.node, n.sid FROM lcm_summary_fts f JOIN lcm_nodes n ON n.node = f.rowid
  WHERE lcm_summary_fts MATCH ? AND n.sid = ? ORDER BY n.first_seq, n.node`;

/**
 * A scan's matches in scope, fed newest first, of which only the oldest `kept` are held: a page
 * can hold no newer one, since the index's matches and these oldest ones all come before them.
 * The rest are only counted, so a common pattern over a long backlog holds a page's worth of
 * pairs, not one pair per matching row.
 */
class OldestMatches {
  /** (seq, sid) pairs, newest first. */
  private held: number[] = [];
  /** Matches in scope dropped from the front of `held`. */
  dropped = 0;

  constructor(
    private readonly kept: number,
    private readonly accept: (seq: number, sid: number) => boolean,
  ) {}

  add(pairs: Float64Array): void {
    for (let i = 0; i + 1 < pairs.length; i += 2) {
      if (this.accept(pairs[i]!, pairs[i + 1]!)) this.held.push(pairs[i]!, pairs[i + 1]!);
    }
    // Trimmed in bulk once twice as many are held, so each pair is moved at most once more.
    if (this.held.length > 4 * this.kept) this.trim();
  }

  private trim(): void {
    const extra = this.held.length / 2 - this.kept;
    if (extra <= 0) return;
    this.held.splice(0, 2 * extra);
    this.dropped += extra;
  }

  /** The held pairs, oldest first. */
  oldestFirst(): Float64Array {
    this.trim();
    const out = new Float64Array(this.held.length);
    for (let i = 0, j = this.held.length - 2; j >= 0; i += 2, j -= 2) {
      out[i] = this.held[j]!;
      out[i + 1] = this.held[j + 1]!;
    }
    return out;
  }
}

/** Packs an index query's rows as (id, sid) pairs. */
export function packHits(rows: ReadonlyArray<readonly unknown[]>): Float64Array {
  const out = new Float64Array(rows.length * 2);
  rows.forEach((r, i) => {
    out[2 * i] = r[0] as number;
    out[2 * i + 1] = r[1] as number;
  });
  return out;
}

/** Most rows SQLite hands over per batch (lcm_grep's scan of node summaries). */
export const GREP_BATCH_ROWS = 2048;
/**
 * How long one batch of the scan of unindexed rows runs on the search worker. Batches of several
 * searches take turns there, so this is about the most one search's scan delays another's.
 */
export const WORKER_SCAN_MS = 20;
/** Preview length, in UTF-16 code units, before ellipses. */
const PREVIEW_CHARS = 160;
/** How much of the preview comes before the match. */
const PREVIEW_LEAD = 60;

/** A row to match: `id` is its seq; its text is derived from `body` unless it keeps `legacy` (row-text.ts). */
interface Candidate {
  id: number;
  sid: number;
  body: string;
  legacy: string | null;
}

function prepare(db: Db) {
  return {
    // The raw columns: the text is derived only for rows the body's first look keeps (scanMatches).
    globalScan: db.prepare<[number, number], Candidate>(
      `SELECT seq AS id, sid, ${bodySql()} AS body, legacy_text AS legacy FROM transcript WHERE seq > ? AND seq <= ? ORDER BY seq DESC`,
    ),
    sessionScan: db.prepare<[number, number, number], Candidate>(
      `SELECT seq AS id, sid, ${bodySql()} AS body, legacy_text AS legacy FROM transcript WHERE sid = ? AND seq > ? AND seq <= ? ORDER BY seq DESC`,
    ),
    textOf: db.prepare<[number], string>(`SELECT ${ROW_TEXT_SQL} FROM transcript WHERE seq = ?`).pluck(),
    workspaceSids: db.prepare<[string], number>('SELECT sid FROM sessions WHERE workspace = ?').pluck(),
    nameOf: db.prepare<[number], string>('SELECT name FROM sessions WHERE sid = ?').pluck(),
  };
}

const stmts = perDb(prepare);

/**
 * An index query over transcript rows: rows with from <= seq <= to (all indexed) whose folded text
 * contains `needle` (already folded, not empty), in the sessions `sids` (every session when null),
 * counted, with the page [offset, offset + limit) of them in seq order.
 */
export interface IndexAsk {
  needle: string;
  from: number;
  to: number;
  sids: number[] | null;
  offset: number;
  limit: number;
}

/** Which sessions an index query keeps: all, one ($sid), or several ($sids, a JSON array). */
export type IndexScope = 'all' | 'one' | 'some';

/**
 * The matching seqs of each pattern length, as one SQL text per scope. Every one binds $from and
 * $to (and $sid or $sids) besides its own parameters, and returns the seqs in seq order. Kept
 * together so the shape of the index lives in one place (exported for the tests that check the
 * query plans). The session test comes last: after the match it runs on matching rows only,
 * and `sid = ?` for one session measured cheaper than an IN list of one.
 */
export function matchSql(length: 'phrase' | 'pair' | 'single', scope: IndexScope): string {
  const inScope = scope === 'all' ? '' : scope === 'one' ? ' AND r.sid = $sid' : ' AND r.sid IN (SELECT value FROM json_each($sids))';
  switch (length) {
    // Three characters or more: the trigram phrase. The session comes from search_rows by
    // rowid, which measured faster than the index's own UNINDEXED sid (a read of its content table).
    case 'phrase':
      return scope === 'all'
        ? 'SELECT rowid FROM transcript_fts WHERE transcript_fts MATCH $query AND rowid BETWEEN $from AND $to ORDER BY rowid'
        : `SELECT f.rowid FROM transcript_fts f JOIN search_rows r ON r.seq = f.rowid
            WHERE transcript_fts MATCH $query AND f.rowid BETWEEN $from AND $to${inScope} ORDER BY f.rowid`;
    // Two: rows with a trigram that starts with them (by term range), and rows that end with
    // them (by the tail index, migration 18: SQLite answers the OR from both sides, so neither
    // reads every row).
    case 'pair':
      return `SELECT r.seq FROM search_rows r WHERE r.seq BETWEEN $from AND $to AND (r.tail = $needle
        OR r.seq IN (SELECT doc FROM transcript_fts_terms WHERE term >= $needle AND term <= $top))${inScope} ORDER BY r.seq`;
    // One: rows among whose distinct characters it is. GLOB (case-sensitive, on folded text)
    // measured faster than instr() over the same column.
    case 'single':
      return `SELECT r.seq FROM search_rows r WHERE r.seq BETWEEN $from AND $to AND r.chars GLOB $glob${inScope} ORDER BY r.seq`;
  }
}

function prepareIndex(db: Db) {
  const byScope = (sql: (scope: IndexScope) => string) => {
    const seqs = (scope: IndexScope) => db.prepare<Record<string, string | number>, number>(sql(scope)).pluck();
    return { all: seqs('all'), one: seqs('one'), some: seqs('some') };
  };
  return {
    phrase: byScope((scope) => matchSql('phrase', scope)),
    pair: byScope((scope) => matchSql('pair', scope)),
    // A single character is in a large share of the rows, even a rare letter: counting them in
    // SQL and reading the page's seqs alone costs less than handing every matching seq to JS
    // (measured on the bench's corpus and on a larger synthetic table). Longer patterns match
    // fewer rows and cost more per match, so they are not run twice.
    singleCount: byScope((scope) => `SELECT count(*) FROM (${matchSql('single', scope)})`),
    singlePage: byScope((scope) => `${matchSql('single', scope)} LIMIT $limit OFFSET $offset`),
    sidsOf: db.prepare<[string], unknown[]>('SELECT seq, sid FROM search_rows WHERE seq IN (SELECT value FROM json_each(?)) ORDER BY seq').raw(),
  };
}

const indexStmts = perDb(prepareIndex);

/** GLOB's special characters stand for themselves inside brackets. */
function globContaining(ch: string): string {
  return `*${ch === '*' || ch === '?' || ch === '[' ? `[${ch}]` : ch}*`;
}

/**
 * Answers an IndexAsk from the index, exact for every pattern length (migration 15): the count
 * and the scope are applied in SQL, so only the page's (seq, sid) pairs leave it. Packed as
 * [total, seq, sid, seq, sid, ...]. The daemon runs it on the search worker's connection.
 */
export function indexMatches(db: Db, ask: IndexAsk): Float64Array {
  const st = indexStmts(db);
  const chars = [...ask.needle];
  const bounds: Record<string, string | number> = { from: ask.from, to: ask.to };
  const scope: IndexScope = ask.sids === null ? 'all' : ask.sids.length === 1 ? 'one' : 'some';
  if (scope === 'one') bounds.sid = ask.sids![0]!;
  if (scope === 'some') bounds.sids = JSON.stringify(ask.sids);
  const pick = (s: Record<IndexScope, Statement>): Statement => s[scope];
  let total: number;
  let page: number[];
  if (chars.length === 1) {
    const args = { ...bounds, glob: globContaining(ask.needle) };
    // One snapshot for the count and the page: the indexer may commit between two statements.
    [total, page] = db.transaction(() => {
      const n = pick(st.singleCount).get(args) ?? 0;
      return [n, n > ask.offset ? pick(st.singlePage).all({ ...args, limit: ask.limit, offset: ask.offset }) : []] as const;
    })();
  } else {
    // Every trigram starting with a pair sorts between the pair and the pair plus the last code point.
    const seqs = chars.length >= 3 ? pick(st.phrase).all({ ...bounds, query: phrase(ask.needle) }) : pick(st.pair).all({ ...bounds, needle: ask.needle, top: `${ask.needle}\u{10ffff}` });
    total = seqs.length;
    page = seqs.slice(ask.offset, ask.offset + ask.limit);
  }
  const out = new Float64Array(1 + 2 * page.length);
  out[0] = total;
  if (page.length > 0) {
    const pairs = packHits(st.sidsOf.all(JSON.stringify(page)));
    // search_rows and the trigram index are written together (indexer and triggers alike).
    if (pairs.length !== 2 * page.length) throw new Error('search index: a matching row has no search_rows entry');
    out.set(pairs, 1);
  }
  return out;
}

type Statement = ReturnType<typeof prepareIndex>['phrase']['all'];

/**
 * One batch of the scan of rows past the index cursor: rows with after < seq <= to, of session
 * `sid` (every session when null), newest first, whose folded text contains `needle` (already
 * folded). The batch ends after the row that used up `budgetMs`, so a backlog of long rows is
 * cut by time, not by a row count (deriving a row's text from its body is tens of µs, a packed
 * one's more).
 */
export interface ScanAsk {
  needle: string;
  after: number;
  to: number;
  sid: number | null;
  budgetMs: number;
}

/**
 * Answers a ScanAsk, packed as [last, more, seq, sid, seq, sid, ...] with the pairs in the order
 * visited (descending seq): `last` is the oldest seq the batch visited (the next batch ends below
 * it), `more` is 1 when it stopped on its budget with rows possibly left in the range. Every
 * matching row of the batch is listed; the caller applies the scope and pages. The daemon runs
 * it on the search worker's connection.
 */
export function scanMatches(db: Db, ask: ScanAsk): Float64Array {
  const st = stmts(db);
  const started = performance.now();
  const found: number[] = [];
  let last = ask.to + 1;
  let more = 0;
  // Most rows are ruled out from their raw JSON, without deriving and folding their text (scan-filter.ts).
  const mayMatch = bodyMayMatch(ask.needle);
  const rows = ask.sid === null ? st.globalScan.iterate(ask.after, ask.to) : st.sessionScan.iterate(ask.sid, ask.after, ask.to);
  for (const row of rows) {
    const looked = row.legacy !== null || mayMatch === null || mayMatch(row.body);
    if (looked && fold(storedRowText(row.id, row.body, row.legacy)).includes(ask.needle)) found.push(row.id, row.sid);
    last = row.id;
    if (performance.now() - started >= ask.budgetMs) {
      more = 1;
      break;
    }
  }
  const out = new Float64Array(2 + found.length);
  out[0] = last;
  out[1] = more;
  out.set(found, 2);
  return out;
}

function phrase(folded: string): string {
  return `"${folded.replaceAll('"', '""')}"`;
}

/**
 * The phrase query for a pattern, or null when the index cannot answer it: a trigram phrase
 * needs at least three characters. The index holds folded text and is case-sensitive, so the
 * phrase of fold(pattern) matches exactly the rows whose folded text contains it.
 */
export function trigramQuery(pattern: string): string | null {
  const folded = fold(pattern);
  if ([...folded].length < 3) return null;
  return phrase(folded);
}

/**
 * A single-line excerpt of about PREVIEW_CHARS code units around the first match. The match
 * position is taken from the folded text, which lines up with the original only when folding
 * kept the length; otherwise the excerpt starts at the row's beginning.
 */
function preview(text: string, folded: string, needle: string): string {
  return excerpt(text, folded.length === text.length ? Math.max(0, folded.indexOf(needle)) : 0);
}

/**
 * About PREVIEW_CHARS code units of `text` on one line, starting PREVIEW_LEAD before `at`
 * (the start of the text for at = 0), with an ellipsis on each side that was cut.
 */
export function excerpt(text: string, at: number): string {
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

/**
 * Counts every match and keeps the requested page of them, in the order they are fed. An `id`
 * is a transcript seq (transcript_grep) or an lcm node id (lcm_grep's summaries); `accept`
 * decides the scope: which (id, session) pairs count at all.
 */
export class MatchPage {
  total = 0;
  /** The page's matches; `preview` is filled in at the end for those found by the index. */
  readonly page: Array<{ sid: number; id: number; preview: string | undefined }> = [];
  readonly needle: string;

  constructor(
    pattern: string,
    private readonly offset: number,
    private readonly limit: number,
    private readonly accept: (id: number, sid: number) => boolean,
  ) {
    this.needle = fold(pattern);
  }

  private keep(sid: number, id: number, preview: string | undefined): void {
    const index = this.total++;
    if (index >= this.offset && index < this.offset + this.limit) this.page.push({ sid, id, preview });
  }

  /**
   * An index answer already scoped, counted and paged (indexMatches: [total, id, sid, ...] for
   * the page at this offset). It comes first, so nothing is counted yet.
   */
  indexed(answer: Float64Array): void {
    if (this.total !== 0) throw new Error('MatchPage: an index answer must come before every other match');
    this.total = answer[0] ?? 0;
    for (let i = 1; i + 1 < answer.length; i += 2) this.page.push({ id: answer[i]!, sid: answer[i + 1]!, preview: undefined });
  }

  /**
   * `n` more matches, all after every match fed so far and none of them on the page: counted,
   * not kept (the scan's newest matches, past the page, in grep).
   */
  counted(n: number): void {
    if (n > 0 && this.total < this.offset + this.limit) throw new Error('MatchPage: matches only counted would belong on the page');
    this.total += n;
  }

  /** Index hits, as (id, sid) pairs, are exact matches already: only the scope decides. */
  async hits(pairs: Float64Array, slice: () => Promise<void>): Promise<void> {
    for (let i = 0; i < pairs.length; i += 2) {
      if ((i & 0xffff) === 0) await slice();
      const sid = pairs[i + 1]!;
      if (this.accept(pairs[i]!, sid)) this.keep(sid, pairs[i]!, undefined);
    }
  }

  /** Checks scanned texts, yielding through `slice` so a batch of long texts never holds the thread. */
  async scan(rows: ReadonlyArray<{ id: number; sid: number; text: string }>, slice: () => Promise<void>): Promise<void> {
    for (const row of rows) {
      await slice();
      if (!this.accept(row.id, row.sid)) continue;
      const folded = fold(row.text);
      if (folded.includes(this.needle)) this.keep(row.sid, row.id, preview(row.text, folded, this.needle));
    }
  }

  /**
   * The page's previews: `text` is asked only for the rows the index found, one at a time with
   * `slice` between them, since a page of long rows (each derived from its body, a packed one
   * inflated first) is tens of milliseconds of work.
   */
  async previews(text: (id: number) => string, slice: () => Promise<void>): Promise<Array<{ sid: number; id: number; preview: string }>> {
    const out: Array<{ sid: number; id: number; preview: string }> = [];
    for (const m of this.page) {
      if (m.preview !== undefined) {
        out.push({ sid: m.sid, id: m.id, preview: m.preview });
        continue;
      }
      await slice();
      const t = text(m.id);
      out.push({ sid: m.sid, id: m.id, preview: preview(t, fold(t), this.needle) });
    }
    return out;
  }
}

/**
 * Literal, Unicode case-insensitive search over transcript rows, paged in matching rows.
 *
 * Rows are visited in two parts, split where a scan down from the newest row meets the index
 * cursor C, which the daemon's indexer moves up meanwhile (C is read again before each batch):
 *  - seq > C: keyset scans of actual rows, newest first, in batches bounded by time
 *    (scanMatches, on the worker thread in the daemon), each row's text derived and matched
 *    with fold(): the session's rows through the (sid, seq) index for a session-scoped search,
 *    global rows otherwise, with the workspace's sessions filtered here. Only the matches come
 *    back; the page's previews are derived here afterwards, as for index hits.
 *  - everything below where the scan stopped: one index query (indexMatches, on the daemon's
 *    worker thread) with the scope (sessions, seq range) in its SQL counts the matching rows and
 *    returns only the page's. The index holds folded text and is case-sensitive, so its matches
 *    are exact and no row text is read except for the previews of the page.
 * The index's count comes first and the scan's matches after it, oldest first: pages are in seq order.
 *
 * The index query is not paged by rowid: measured on 200k rows, FTS5 does a phrase's whole
 * work (loading each trigram's doclist, checking positions) on every query whatever its rowid
 * bounds or LIMIT, so each batch cost about as much as the whole query and paging multiplied
 * it. That is why it runs off the event loop in the daemon.
 */
export async function grep(
  db: Db,
  params: Params<'transcript_grep'>,
  opts: GrepOptions = {},
): Promise<Result<'transcript_grep'>> {
  const yieldNow = opts.yieldEvery ?? giveWay;
  const slice = timeSlicer(yieldNow);
  const st = stmts(db);
  const scope = params.session === undefined ? null : requireSession(db, params.session);
  let sids: Set<number> | null = params.workspace === undefined ? null : new Set(st.workspaceSids.all(params.workspace));
  if (scope !== null) sids = sids === null || sids.has(scope.sid) ? new Set([scope.sid]) : new Set();
  const range = opts.range ?? { from: 1, to: Number.MAX_SAFE_INTEGER };
  const accept = (seq: number, sid: number): boolean => (sids === null || sids.has(sid)) && seq >= range.from && seq <= range.to;
  const matches = new MatchPage(params.pattern, params.offset, params.limit, accept);

  if ((sids === null || sids.size > 0) && range.from <= range.to) {
    // The rows past the index cursor are scanned newest first, a batch at a time (on the worker
    // when there is one, else inline, a slice per batch), while the daemon's indexer moves the
    // cursor up from the other end: the scan stops where they meet, and the index answers
    // everything below. An empty needle (every row) does not use the index.
    const covered = (): number => (matches.needle === '' ? range.from - 1 : Math.min(indexedThrough(db), range.to));
    const scanned = new OldestMatches(params.offset + params.limit, accept);
    /** The scan has visited every row in [low, range.to]. */
    let low = range.to + 1;
    for (;;) {
      const cursor = covered();
      if (low <= range.from || cursor >= low - 1) break;
      const ask: ScanAsk = { needle: matches.needle, after: Math.max(cursor, range.from - 1), to: low - 1, sid: scope === null ? null : scope.sid, budgetMs: opts.scan === undefined ? SLICE_MS : WORKER_SCAN_MS };
      let batch: Float64Array;
      if (opts.scan === undefined) {
        await yieldNow();
        batch = scanMatches(db, ask);
      } else {
        batch = await opts.scan(ask);
      }
      scanned.add(batch.subarray(2));
      low = batch[1] === 1 ? batch[0]! : ask.after + 1;
    }
    if (low - 1 >= range.from) {
      const ask: IndexAsk = { needle: matches.needle, from: range.from, to: low - 1, sids: sids === null ? null : [...sids], offset: params.offset, limit: params.limit };
      matches.indexed(opts.hits === undefined ? indexMatches(db, ask) : await opts.hits(ask));
    }
    // The scan's matches, oldest first, after the index's.
    await matches.hits(scanned.oldestFirst(), slice);
    matches.counted(scanned.dropped);
  }

  // Previews for the page's matches: the only row text a search reads on the event loop.
  const found = await matches.previews((seq) => st.textOf.get(seq) ?? '', slice);
  const names = new Map<number, string>();
  const nameOf = (sid: number): string => {
    let name = names.get(sid);
    if (name === undefined) names.set(sid, name = st.nameOf.get(sid) ?? '');
    return name;
  };
  const page = found.map((m) => ({ session: nameOf(m.sid), seq: m.id, preview: m.preview }));
  const next = params.offset + page.length;
  return { total: matches.total, offset: params.offset, next_offset: next < matches.total ? next : null, matches: page };
}
