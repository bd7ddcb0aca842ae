// The cut: where a strategy's saved state (summary, archive, notes) ends and the verbatim tail
// begins. One module for every strategy that saves one: how a cut is written, found again in
// the transcript as it is now, and chosen for the next compaction.
//
// Invariants
// 1. A cut names the row that opens a unit — by the number of user inputs before it (`users`)
//    plus, when that opener is an image-fit notice, its place among the fits after the last of
//    those inputs (`fits`) — and fingerprints those user inputs' stored text. Provider
//    projection never drops or reorders user inputs, so the count means the same place for
//    every provider and model; the fingerprint notices a transcript that is no longer the one
//    the state was made from, and such a state is ignored (never deleted) until replaced.
// 2. A cut may lie inside that unit, after its first `exchanges` exchanges, whose rows are
//    digested into `exchange_fingerprint`. The opener itself always stays verbatim at the head
//    of the tail. This is the one place we go past the rule that cuts fall only between whole
//    units: a coding agent works through dozens of tool calls after a single prompt, so its
//    newest unit alone can hold most of the window, and a whole-unit cut could never bring it
//    under the trigger. Exchanges keep every call with its results, so nothing is split that a
//    provider would reject. When the digest no longer matches, the cut falls back to the start
//    of the unit (the summary then overlaps the tail; nothing is lost).
// 3. `rows` counts the session's rows before the opener when the cut was saved. Rows before
//    the opener change only when a late tool result is settled beside a call that was already
//    evicted; a count that grew means exactly that, and the cut moves back to the start of
//    that result's unit, so the model still sees the result.
// 4. Locating is derived, read-only and cached per kernel: when nothing moved since the save
//    (same rewrite counter), the saved hints are trusted after one index count; otherwise the
//    fingerprints are re-checked from the transcript (reads every user input before the cut).
// 5. `planCut` chooses the next cut: whole units whenever evicting them brings the request
//    under the trigger, otherwise exchanges inside the newest unit, keeping its newest
//    exchange.
// 6. Except when that exchange cannot fit the window beside its opener even with the state at
//    its smallest (the caller's `fits`): a signed thinking block the provider needs whole, say,
//    with a large pinned prompt at a small window. Then it leaves the tail as well, with its
//    calls and results together, and the tail is the opener alone until the next rows arrive.
//    The saved cut counts every exchange of the unit, so it resumes at the head.
import { createHash } from 'node:crypto';
import type { StoredRow } from '../../protocol/rows.ts';
import { countRowsBetween, foldSources } from '../../storage/transcript/history.ts';
import type { CutHints, SavedCut } from '../../storage/state/saved-cut.ts';
import { firstSeq, fitsBetween, newestRowsBefore, nthFitAfter, nthUserSeq, openerAtOrBefore, rowsBeforeCount, sessionRewrites, userRowsAfter, userRowsBeforeCount } from '../../storage/transcript/user-rows.ts';
import { runSteps, type Steps } from '../../protocol/time-slice.ts';
import type { StrategyInput } from '../contract.ts';
import type { CacheSlot } from './kernel-cache.ts';
import { groupUnits, groupUnitsSteps, ITEMS_PER_STEP, itemsSteps, opensExchange, opensUnit, selectTail, type Unit } from './units.ts';

export const EMPTY_FINGERPRINT = '';

/** Extends a fingerprint by more texts, in order. */
export function extendFingerprint(fingerprint: string, texts: Iterable<string>): string {
  let fp = fingerprint;
  for (const t of texts) fp = createHash('sha256').update(fp).update('\0').update(t).digest('hex');
  return fp;
}

/**
 * What an exchange fingerprint hashes of a row: its kind, text and call ids. Image marks are
 * left out on purpose: compaction elides evicted images and image fits replace hashes, and
 * neither makes it a different conversation.
 */
export function exchangeDigest(row: StoredRow): string {
  const b = row.body;
  switch (b.kind) {
    case 'assistant':
      return JSON.stringify(['a', b.content.map((p) => (p.type === 'tool_call' ? ['c', p.id, p.name] : p.type === 'text' ? p.text : 'r'))]);
    case 'tool_result':
      return JSON.stringify(['t', b.call_id, b.content.map((p) => (p.type === 'text' ? p.text : 'i'))]);
    case 'user':
      return JSON.stringify(['u', b.content.map((p) => (p.type === 'text' ? p.text : 'i'))]);
    case 'notice':
      return JSON.stringify(['n', b.body.notice]);
  }
}

/** The cut before any history: nothing saved, everything verbatim. */
export const START_CUT: SavedCut = { format: 2, users: 0, fingerprint: EMPTY_FINGERPRINT };

/** A saved cut found in the transcript as it is now. */
export interface LocatedCut {
  /** The cut as it applies now (moved back or fallen back when the transcript changed). */
  cut: SavedCut;
  /** Seq of the unit's opener (the first tail row); 1 for the start cut. */
  openerSeq: number;
  /** First seq of the verbatim rows after the opener; equals openerSeq for a whole-unit cut. */
  resumeSeq: number;
  /** The cut lies between exchanges of the opener's unit. */
  withinUnit: boolean;
  /** What /context should say about how the cut was found. */
  notes: string[];
}

export function startCut(): LocatedCut {
  return { cut: START_CUT, openerSeq: 1, resumeSeq: 1, withinUnit: false, notes: [] };
}

/** What a strategy saved alongside its cut. */
export interface SavedPosition {
  cut: SavedCut;
  hints: CutHints;
  /** The session's rewrite counter at the save; null when the save predates it. */
  rewrites: number | null;
  /** When it was saved, ms since the epoch (keys the cache). */
  savedAt: number;
}

/** Per-kernel memory of located cuts, keyed on the saved position and the rewrite counter. */
export class CutCache {
  private readonly entries = new Map<string, LocatedCut | undefined>();

  lookup(key: string, compute: () => LocatedCut | undefined): LocatedCut | undefined {
    if (this.entries.has(key)) return this.entries.get(key);
    const value = compute();
    if (this.entries.size >= 16) this.entries.clear();
    this.entries.set(key, value);
    return value;
  }
}

/** User inputs read per statement when a fingerprint is extended. */
const USER_BATCH = 4096;

/** The fingerprint of the session's first `count` user inputs, or undefined when it has fewer. */
export function userFingerprint(input: StrategyInput, count: number): string | undefined {
  let fp = EMPTY_FINGERPRINT;
  let after = 0;
  let seen = 0;
  while (seen < count) {
    const rows = userRowsAfter(input.db, input.session.sid, after, Math.min(USER_BATCH, count - seen));
    if (rows.length === 0) return undefined;
    fp = extendFingerprint(fp, rows.map((r) => r.text));
    seen += rows.length;
    after = rows[rows.length - 1]!.seq;
  }
  return fp;
}

/** Seq of the opener a cut names, or undefined when the transcript has no such row. */
function openerOf(input: StrategyInput, cut: SavedCut): number | undefined {
  const { db } = input;
  const sid = input.session.sid;
  const next = nthUserSeq(db, sid, cut.users) ?? input.head + 1;
  const fits = cut.fits ?? 0;
  if (fits === 0) return next;
  const prev = cut.users === 0 ? 0 : nthUserSeq(db, sid, cut.users - 1);
  if (prev === undefined) return undefined;
  const fit = nthFitAfter(db, sid, prev, fits - 1);
  return fit !== undefined && fit < next ? fit : undefined;
}

/** The cut that opens on `opener`, with its user count, fit place and fingerprint recomputed. */
function cutAt(input: StrategyInput, opener: number, isUser: boolean): LocatedCut | undefined {
  const { db } = input;
  const sid = input.session.sid;
  const users = userRowsBeforeCount(db, sid, opener);
  const fingerprint = userFingerprint(input, users);
  if (fingerprint === undefined) return undefined;
  const prev = users === 0 ? 0 : (nthUserSeq(db, sid, users - 1) ?? 0);
  const fits = isUser ? 0 : fitsBetween(db, sid, prev, opener) + 1;
  const cut: SavedCut = { format: 2, users, fingerprint, ...(fits > 0 ? { fits } : {}), rows: rowsBeforeCount(db, sid, opener) };
  return { cut, openerSeq: opener, resumeSeq: opener, withinUnit: false, notes: [] };
}

/**
 * The whole-unit cut that opens on `row`, with its counts and fingerprint computed from the
 * transcript (reads every user input before it); undefined when `row` opens no unit.
 */
export function locateAt(input: StrategyInput, row: StoredRow): LocatedCut | undefined {
  return opensUnit(row) ? cutAt(input, row.seq, row.row_class === 'user') : undefined;
}

/** Rows of the opener's unit after the opener, in exchanges, up to `want` complete ones plus the next. */
function unitExchanges(input: StrategyInput, openerSeq: number, want: number): Unit<StoredRow>[] {
  const rows: StoredRow[] = [];
  let exchanges = 0;
  outer: for (const page of foldSources(input.db, input.session.name, openerSeq + 1, input.head, { boundary: input.head })) {
    for (const row of page) {
      if (opensUnit(row)) break outer;
      if (opensExchange(row) || rows.length === 0) exchanges += 1;
      if (exchanges > want + 1) break outer;
      rows.push(row);
    }
  }
  return groupUnits(rows, opensExchange, () => 0);
}

/** Re-checks a cut from the transcript (the slow path of `locate`). */
function verify(input: StrategyInput, saved: SavedCut, savedRewrites: number | null): LocatedCut | undefined {
  const { db } = input;
  const sid = input.session.sid;
  if (userFingerprint(input, saved.users) !== saved.fingerprint) return undefined;
  const opener = openerOf(input, saved);
  if (opener === undefined) return undefined;

  // Invariant 3: late results that landed in evicted history move the cut back to their unit.
  if (saved.rows !== undefined && savedRewrites !== null) {
    const before = rowsBeforeCount(db, sid, opener);
    if (before > saved.rows) {
      const late = newestRowsBefore(db, sid, opener, before - saved.rows).reduce((a, b) => Math.min(a, b), opener);
      const back = openerAtOrBefore(db, sid, late);
      const moved = back === undefined ? { ...startCut(), openerSeq: firstSeq(db, sid) ?? 1, resumeSeq: firstSeq(db, sid) ?? 1 } : cutAt(input, back.seq, back.isUser);
      if (moved !== undefined) {
        moved.notes.push(`a tool result arrived after its call was evicted (row #${late}); the tail starts again at its unit (#${moved.openerSeq})`);
        return moved;
      }
    }
  }

  const base: LocatedCut = { cut: saved, openerSeq: opener, resumeSeq: opener, withinUnit: false, notes: [] };
  const k = saved.exchanges ?? 0;
  if (k === 0) return base;
  const exchanges = unitExchanges(input, opener, k);
  const fp = extendFingerprint(EMPTY_FINGERPRINT, exchanges.slice(0, k).flatMap((e) => e.items.map(exchangeDigest)));
  if (exchanges.length < k || fp !== saved.exchange_fingerprint) {
    const { exchanges: _e, exchange_fingerprint: _f, ...whole } = saved;
    base.cut = whole;
    base.notes.push(`the evicted part of the unit at #${opener} changed; the tail starts again at that unit`);
    return base;
  }
  const resume = exchanges[k]?.items[0]?.seq ?? input.head + 1;
  return { ...base, resumeSeq: resume, withinUnit: true };
}

/**
 * Where a saved cut falls now, or undefined when the transcript no longer matches it (the
 * caller ignores the state). Cached in `slot` of the kernel cache.
 */
export function locate(input: StrategyInput, slot: CacheSlot<CutCache>, saved: SavedPosition): LocatedCut | undefined {
  const rewrites = sessionRewrites(input.db, input.session.sid);
  const key = `${saved.savedAt}:${JSON.stringify(saved.cut)}:${saved.hints.openerSeq}:${saved.hints.resumeSeq}:${rewrites}`;
  const cache = input.cache.getOrSet(slot, () => new CutCache());
  return cache.lookup(key, () => {
    const { cut, hints } = saved;
    // Nothing before the cut moved or changed since the save (same rewrite counter, and new
    // rows only ever get higher seqs): the hints hold. The index count guards against rows
    // deleted behind the daemon's back.
    if (saved.rewrites === rewrites && userRowsBeforeCount(input.db, input.session.sid, hints.openerSeq) === cut.users) {
      const k = cut.exchanges ?? 0;
      return { cut, openerSeq: hints.openerSeq, resumeSeq: hints.resumeSeq, withinUnit: k > 0, notes: [] };
    }
    return verify(input, cut, saved.rewrites);
  });
}

/** A compaction's choice: what leaves the tail, what stays, and the cut to save. */
export interface CutPlan {
  /** Rows that leave the verbatim tail, in transcript order (summarized or archived). */
  evicted: StoredRow[];
  /** Rows that stay verbatim, in order; a within-unit cut's opener comes first. */
  tail: StoredRow[];
  /** Estimated tokens of `tail`. */
  tailTokens: number;
  cut: SavedCut;
  hints: CutHints;
  withinUnit: boolean;
}

export interface CutChoice {
  /** Estimated tokens of a row as the request would carry it. */
  tokens: (row: StoredRow) => number;
  /** Tail budget in estimated tokens (see window.ts `tailBudget`). */
  budget: number;
  /** Whether a request whose verbatim tail costs this many tokens lands under the trigger. */
  settles: (tailTokens: number) => boolean;
  /**
   * Whether a request whose verbatim tail costs this many tokens fits the whole window, with
   * the strategy's saved state at the smallest it would write. When the newest unit's opener
   * and newest exchange alone do not, that exchange leaves the tail too (see planCut).
   */
  fits?: (tailTokens: number) => boolean;
}

const sum = (units: readonly Unit<StoredRow>[]): number => units.reduce((n, u) => n + u.tokens, 0);

/**
 * The next cut for rows after `located` (`rows` is the current tail: the opener first for a
 * within-unit cut). Undefined when nothing can leave the tail without splitting the newest
 * exchange.
 */
export function planCut(input: StrategyInput, located: LocatedCut, rows: readonly StoredRow[], choice: CutChoice): CutPlan | undefined {
  return runSteps(planCutSteps(input, located, rows, choice));
}

/** `planCut` in steps (see runSteps): a compaction of a long history plans it in slices. */
export function* planCutSteps(input: StrategyInput, located: LocatedCut, rows: readonly StoredRow[], choice: CutChoice): Steps<CutPlan | undefined> {
  const units = yield* groupUnitsSteps(rows, opensUnit, choice.tokens);
  if (units.length === 0) return undefined;
  const newest = units[units.length - 1]!;
  const opener = newest.items[0]!;
  const exchanges = opensUnit(opener) ? yield* groupUnitsSteps(newest.items.slice(1), opensExchange, choice.tokens) : [];
  // Invariant 6: a newest exchange that cannot fit the window beside its opener leaves too.
  const last = exchanges[exchanges.length - 1];
  if (last !== undefined && choice.fits !== undefined && !choice.fits(choice.tokens(opener) + last.tokens)) {
    return yield* withinUnitPlan(input, located, units, exchanges, exchanges.length, choice);
  }
  const wholeStart = selectTail(units, choice.budget);
  const wholeTail = units.slice(wholeStart);
  if (wholeStart > 0 && choice.settles(sum(wholeTail))) return yield* wholePlan(input, located, units, wholeStart);

  // Whole units are not enough: split the newest unit between its exchanges.
  const keepFrom = exchanges.length < 2 ? 0 : selectTail(exchanges, choice.budget - choice.tokens(opener));
  if (keepFrom === 0) return wholeStart > 0 ? yield* wholePlan(input, located, units, wholeStart) : undefined;
  return yield* withinUnitPlan(input, located, units, exchanges, keepFrom, choice);
}

/**
 * The cut after the first `keepFrom` exchanges of the newest unit (its opener stays at the head
 * of the tail); every exchange when `keepFrom` is their count, so the tail is the opener alone
 * until new rows arrive.
 */
function* withinUnitPlan(input: StrategyInput, located: LocatedCut, units: readonly Unit<StoredRow>[], exchanges: readonly Unit<StoredRow>[], keepFrom: number, choice: CutChoice): Steps<CutPlan> {
  const opener = units[units.length - 1]!.items[0]!;
  const newlyEvicted = exchanges.slice(0, keepFrom).flatMap((e) => e.items);
  const evicted = [...(yield* itemsSteps(units.slice(0, -1))), ...newlyEvicted];
  const kept = exchanges.slice(keepFrom);
  const tail = [opener, ...kept.flatMap((e) => e.items)];
  const sameUnit = located.withinUnit && opener.seq === located.openerSeq;
  const priorExchanges = sameUnit ? (located.cut.exchanges ?? 0) : 0;
  const priorFp = sameUnit ? (located.cut.exchange_fingerprint ?? EMPTY_FINGERPRINT) : EMPTY_FINGERPRINT;
  const base = yield* unitCut(input, located, evicted, opener);
  return {
    evicted,
    tail,
    tailTokens: choice.tokens(opener) + sum(kept),
    cut: {
      ...base,
      exchanges: priorExchanges + keepFrom,
      exchange_fingerprint: extendFingerprint(priorFp, newlyEvicted.map(exchangeDigest)),
    },
    hints: { openerSeq: opener.seq, resumeSeq: kept[0]?.items[0]?.seq ?? input.head + 1 },
    withinUnit: true,
  };
}

function* wholePlan(input: StrategyInput, located: LocatedCut, units: readonly Unit<StoredRow>[], start: number): Steps<CutPlan> {
  const evicted = yield* itemsSteps(units.slice(0, start));
  const tailUnits = units.slice(start);
  const opener = tailUnits[0]!.items[0]!;
  return {
    evicted,
    tail: yield* itemsSteps(tailUnits),
    tailTokens: sum(tailUnits),
    cut: yield* unitCut(input, located, evicted, opener),
    hints: { openerSeq: opener.seq, resumeSeq: opener.seq },
    withinUnit: false,
  };
}

/**
 * The whole-unit part of a new cut opening on `opener`, after `evicted` (the rows from
 * `located`'s opener on) left the tail. Without an opener the cut lies past every row through
 * the head; it then carries no `rows` count, because rows appended later would read as late
 * results (invariant 3). The evicted user inputs' stored text is read in batches, a step each.
 */
function* unitCut(input: StrategyInput, located: LocatedCut, evicted: readonly StoredRow[], opener: StoredRow | undefined): Steps<SavedCut> {
  const { db } = input;
  const sid = input.session.sid;
  let newUsers = 0;
  for (let i = 0; i < evicted.length; i++) {
    if (evicted[i]!.row_class === 'user') newUsers++;
    if (i % ITEMS_PER_STEP === ITEMS_PER_STEP - 1) yield;
  }
  // The stored text of the newly evicted user inputs, in order, extends the fingerprint.
  let fingerprint = located.cut.fingerprint;
  let after = located.openerSeq - 1;
  for (let read = 0; read < newUsers;) {
    const batch = userRowsAfter(db, sid, after, Math.min(USER_BATCH_STEP, newUsers - read));
    if (batch.length === 0) break;
    fingerprint = extendFingerprint(fingerprint, batch.map((r) => r.text));
    read += batch.length;
    after = batch[batch.length - 1]!.seq;
    yield;
  }
  const users = located.cut.users + newUsers;
  if (opener === undefined) return { format: 2, users, fingerprint };
  const prevUser = users === 0 ? 0 : (nthUserSeq(db, sid, users - 1) ?? 0);
  const fits = opener.row_class === 'image_fit' ? fitsBetween(db, sid, prevUser, opener.seq) + 1 : 0;
  // The rows before the opener, counted a range of seqs per step: one count of a long
  // history's index held the event loop for milliseconds. Whatever runs between the steps
  // cannot change the count: seqs are only handed out above the head, and a settle moves
  // contents along the session's seqs, never the seqs themselves (docs/transcript.md).
  let rows = 0;
  for (let after = (firstSeq(db, sid) ?? opener.seq) - 1; after < opener.seq - 1; after += COUNT_SEQS_STEP) {
    rows += countRowsBetween(db, sid, after, Math.min(after + COUNT_SEQS_STEP, opener.seq - 1), Number.MAX_SAFE_INTEGER);
    yield;
  }
  return { format: 2, users, fingerprint, ...(fits > 0 ? { fits } : {}), rows };
}

/** User inputs a cut's fingerprint reads per step; their texts run to kilobytes each. */
const USER_BATCH_STEP = 256;

/** Seqs of the session index a cut's row count reads per step. */
const COUNT_SEQS_STEP = 16_384;

/**
 * The whole-unit cut a layer saves after `evicted` — rows read from a located whole-unit cut's
 * opener on, in order — opening on `opener`, or past every row through the head when there is
 * none. For layers that derive what to cover instead of planning a cut (notes); in steps (see
 * runSteps), since an eviction can be a whole long history.
 */
export function* cutAfterSteps(input: StrategyInput, located: LocatedCut, evicted: readonly StoredRow[], opener: StoredRow | undefined): Steps<{ cut: SavedCut; hints: CutHints }> {
  const seq = opener?.seq ?? input.head + 1;
  return { cut: yield* unitCut(input, located, evicted, opener), hints: { openerSeq: seq, resumeSeq: seq } };
}
