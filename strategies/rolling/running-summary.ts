// The running-summary text compaction: the request is the system prompt, one running summary
// of everything evicted so far, a short verbatim recap of the latest evicted user requests, and
// the untouched tail. A compaction folds what the shared cut module evicts (whole units, or the
// older exchanges of an oversized newest unit) into a new summary; where the cut falls is
// harness/cut.ts. It is `rolling`, and what snapcompact falls back to for a model that reads no
// images (by name, strategies/harness/fallback.ts), so both save the same state
// (rolling_state): a text summary written for one is the other's too.
import type { PlainInput, Section } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { runSteps, runStepsSliced, type Steps, giveWay } from '../../protocol/time-slice.ts';
import { saveRollingState } from '../../storage/state/rolling.ts';
import { sessionRewrites, userRowsBefore } from '../../storage/transcript/user-rows.ts';
import { nothingCompacted, type CompactOptions, type CompactOutcome, type DryRun, type Fold, type Projection, type Strategy, type StrategyInput } from '../contract.ts';
import { inputsTokens, PER_INPUT_TOKENS, textTokens } from '../estimate.ts';
import { locateAt, planCutSteps, type CutPlan, type LocatedCut } from '../harness/cut.ts';
import { foldText, priorTail, warmPriorTail } from '../harness/prior.ts';
import { keptInput, type KeptInputSlot } from '../harness/kept-input.ts';
import { cacheSlot } from '../harness/kernel-cache.ts';
import { projectTail, rowMemo, warmTail } from '../harness/row-memo.ts';
import { summaryPrompt, SUMMARIZER_SYSTEM } from '../harness/summarizer-prompt.ts';
import { clipChars, summaryChunks } from '../harness/summary-text.ts';
import { chunkUnits, evictionChunkTokens } from '../harness/units.ts';
import { isDue, overWindow, roomUnderTrigger, roomUnderWindow, tailBudget } from '../harness/window.ts';
import { tokenCounterSteps } from '../projection.ts';
import { locateItemCut, resolveState } from './running-summary-state.ts';

/** User messages quoted in the recap, and characters kept of each. */
export const RECAP_MESSAGES = 3;
export const RECAP_CHARS = 400;

export const SUMMARY_HEADER = 'Summary of the earlier part of this conversation, which no longer fits the context window:';
export const RECAP_HEADER = 'The most recent of those earlier user messages, quoted:';

/** The shortest summary a compaction asks for, in tokens. */
export const MIN_SUMMARY_TOKENS = 128;

/** Summary output cap in tokens: a tenth of the window, within [128, 2048]. */
export function summaryCap(window: number): number {
  return Math.min(2048, Math.max(MIN_SUMMARY_TOKENS, Math.floor(window / 10)));
}

function summaryInput(summary: string): PlainInput {
  return { role: 'user', content: [{ type: 'text', text: `${SUMMARY_HEADER}\n\n${summary}` }] };
}

type Recap = { input: PlainInput; seqs: number[]; tokens: number } | undefined;

const RECAP = cacheSlot<{ key: string; recap: Recap }>('rolling.recap');

/** The summary's input, made once per saved summary (harness/kept-input.ts). */
const SUMMARY_INPUT: KeptInputSlot = cacheSlot('rolling.summaryInput');

/**
 * The recap's estimated tokens when its quotes are plain ASCII, for sizing a tail before the
 * cut (and so the recap) is known; the window check after planning uses the real recap.
 */
export const RECAP_TYPICAL = textTokens(RECAP_HEADER) + PER_INPUT_TOKENS + RECAP_MESSAGES * (Math.ceil(RECAP_CHARS / 4) + 8);

/**
 * The recap quotes the last user messages before the cut's opener, so it changes only with the
 * cut (or a rewrite of those rows): it is built once per cut and kept in the kernel.
 */
function recapInput(input: StrategyInput, openerSeq: number): Recap {
  if (openerSeq <= 1) return undefined;
  const key = `${openerSeq}:${sessionRewrites(input.db, input.session.sid)}`;
  const cached = input.cache.get(RECAP);
  if (cached?.key === key) return cached.recap;
  const recent = userRowsBefore(input.db, input.session.sid, openerSeq, RECAP_MESSAGES);
  let recap: Recap;
  if (recent.length > 0) {
    const quoted = recent.map((r) => `> ${clipChars(r.text, RECAP_CHARS).replaceAll('\n', '\n> ')}`).join('\n\n');
    const built: PlainInput = { role: 'user', content: [{ type: 'text', text: `${RECAP_HEADER}\n\n${quoted}` }] };
    recap = { input: built, seqs: recent.map((r) => r.seq), tokens: inputsTokens([built]) };
  }
  input.cache.set(RECAP, { key, recap });
  return recap;
}

interface Saved {
  summary: string;
  backend: string | null;
}

function describeCut(located: LocatedCut): string {
  const users = `${located.cut.users} user message(s) before #${located.openerSeq}`;
  return located.withinUnit ? `${users} and the first ${located.cut.exchanges ?? 0} exchange(s) after it` : users;
}

/**
 * The request for a summary (if any), the located cut, other extensions' stored folds over the
 * rows after it, and the verbatim rows they do not cover.
 */
function build(input: StrategyInput, saved: Saved | undefined, located: LocatedCut, rows: readonly StoredRow[], notes: string[], folds: readonly Fold[] = []): Projection {
  const inputs: PlainInput[] = [];
  const sections: Section[] = [];
  if (saved !== undefined) {
    const s = keptInput(input.cache, SUMMARY_INPUT, saved.summary, summaryInput);
    inputs.push(s);
    sections.push({
      name: 'summary',
      source: `rolling summary of ${describeCut(located)}, by ${saved.backend ?? 'unknown'}`,
      estimated_tokens: inputsTokens([s]),
    });
    const recap = recapInput(input, located.openerSeq);
    if (recap !== undefined) {
      inputs.push(recap.input);
      sections.push({ name: 'recap', source: `user rows ${recap.seqs.map((s) => `#${s}`).join(', ')}`, estimated_tokens: recap.tokens });
    }
  }
  if (folds.length > 0) {
    const foldInputs: PlainInput[] = folds.map((f) => ({ role: 'user', content: [{ type: 'text', text: foldText(f) }] }));
    inputs.push(...foldInputs);
    const sources = [...new Set(folds.map((f) => f.source))].join(', ');
    sections.push({ name: 'folds', source: `${folds.length} stored fold(s) from ${sources} over rows #${folds[0]!.firstSeq}-#${folds[folds.length - 1]!.lastSeq}`, estimated_tokens: inputsTokens(foldInputs) });
  }
  // The tail is measured once: the estimate is a sum over inputs, and on a long uncovered
  // history a second pass over the tail was a long stretch of the event loop.
  const head = inputsTokens(inputs);
  const { inputs: tail, tokens: tailTokens } = projectTail(input, rows);
  inputs.push(...tail);
  if (rows.length > 0) {
    const range = located.withinUnit && rows.length > 1 ? `row #${rows[0]!.seq}, then rows #${rows[1]!.seq}-#${rows[rows.length - 1]!.seq}` : `rows #${rows[0]!.seq}-#${rows[rows.length - 1]!.seq}`;
    sections.push({ name: 'tail', source: `${range} (${rows.length} rows, verbatim)`, estimated_tokens: tailTokens });
  }
  const estimate = input.pinnedTokens + head + tailTokens;
  return { inputs, sections, estimate, due: isDue(estimate, input.window), notes };
}

function project(input: StrategyInput): Projection {
  const resolved = resolveState(input);
  const { folds, rest } = priorTail(input, resolved.located);
  return build(input, resolved.state, resolved.located, rest, resolved.notes, folds);
}

/**
 * Decodes the tail and sizes its rows with yields, so that neither `project` nor a compaction
 * decodes or sizes a long history in one stretch of the event loop.
 */
function warm(input: StrategyInput): Promise<void> | undefined {
  const located = resolveState(input).located;
  // A short tail is sized in a few milliseconds when a compaction needs it; only a long one is
  // worth sizing ahead, in slices.
  return warmTail(input, warmPriorTail(input, located), () => priorTail(input, located).rest);
}

const NOTHING_TO_EVICT = 'cannot compact further without splitting the newest exchange';

interface Eviction {
  located: LocatedCut;
  previous: Saved | undefined;
  /** Other extensions' folds over the rows after the cut: they leave the request with any eviction. */
  folds: Fold[];
  plan: CutPlan | undefined;
  /** The row sizes the plan was made with. */
  tokens: (row: StoredRow) => number;
  /** Tokens the summary may take, and the window size it is judged by. */
  cap: number;
  basis: number;
}

/**
 * What a compaction would evict now. The tail keeps tailPercent of the window, but never more
 * than half the room the trigger leaves after the pinned prompt, the summary and the recap, so
 * a large pinned prompt does not make every turn compact again. Stored folds in front of the
 * rows are folded into the summary whenever anything is; the cut is then planned over the rows
 * they leave, which start at a unit opener.
 */
function* selectEviction(input: StrategyInput, forced: boolean, estimate: number): Steps<Eviction> {
  const resolved = resolveState(input);
  const { folds, rest } = priorTail(input, resolved.located);
  const from = folds.length === 0 || rest.length === 0 ? resolved.located : (locateAt(input, rest[0]!) ?? resolved.located);
  const memo = rowMemo(input);
  const tokens = yield* tokenCounterSteps(rest, input.target, memo.sizes, memo.inputs);
  let historyTokens = 0;
  for (const r of rest) historyTokens += tokens(r);
  const basis = input.window.window ?? historyTokens;
  const cap = summaryCap(basis);
  const fixed = input.pinnedTokens + cap + PER_INPUT_TOKENS + textTokens(SUMMARY_HEADER) + RECAP_TYPICAL;
  // The layers' share (the notes at their cap) lands in the request after the compaction too.
  const room = roomUnderTrigger(input.window, fixed + (input.window.reserved ?? 0));
  let budget = tailBudget(input.window, historyTokens, forced);
  if (room !== null) budget = Math.min(budget, Math.max(0, Math.floor(room / 2)));
  let plan = yield* planCutSteps(input, from, rest, {
    tokens,
    budget,
    settles: (tail) => input.window.window === null || !isDue(fixed + tail, input.window),
    // The smallest summary this compaction could write (see `fitted` below).
    fits: (tail) => tail <= (roomUnderWindow(input.window, fixed - cap + MIN_SUMMARY_TOKENS) ?? Infinity),
  });
  // Folds alone are worth folding into the summary: the cut moves to where they end.
  if (plan === undefined && folds.length > 0 && from !== resolved.located) {
    plan = { evicted: [], tail: [...rest], tailTokens: historyTokens, cut: from.cut, hints: { openerSeq: from.openerSeq, resumeSeq: from.resumeSeq }, withinUnit: false };
  }
  // Nothing can leave the tail, yet the request is over the window with the summary it has
  // (its newest exchange grew since the last compaction): the summary alone is written again,
  // shorter. planCut has already evicted a newest exchange that would not fit beside the
  // shortest summary, so this one does.
  const { located } = resolved;
  if (plan === undefined && resolved.state !== undefined && overWindow(estimate + (input.window.reserved ?? 0), input.window)) {
    plan = { evicted: [], tail: [...rest], tailTokens: historyTokens, cut: located.cut, hints: { openerSeq: located.openerSeq, resumeSeq: located.resumeSeq }, withinUnit: located.withinUnit };
  }
  // A newest exchange too large to leave the summary its usual cap under the whole window (a
  // long signed thinking block, say) gets a shorter summary instead, down to the minimum.
  const recap = plan === undefined ? undefined : recapInput(input, plan.hints.openerSeq);
  const left = plan === undefined ? null : roomUnderWindow(input.window, input.pinnedTokens + PER_INPUT_TOKENS + textTokens(SUMMARY_HEADER) + (recap?.tokens ?? 0) + plan.tailTokens);
  const fitted = left === null ? cap : Math.max(MIN_SUMMARY_TOKENS, Math.min(cap, left));
  return { located, previous: resolved.state, folds, plan, tokens, cap: fitted, basis };
}

function plan(input: StrategyInput, projection: Projection, forced: boolean): DryRun {
  const { located, plan: cut, cap } = runSteps(selectEviction(input, forced, projection.estimate));
  const after = cut === undefined ? projection : build(input, { summary: 'x'.repeat(cap * 4), backend: null }, locatedAfter(cut), cut.tail, []);
  return {
    plan: {
      evict_rows: cut?.evicted.length ?? 0,
      evict_from_seq: cut?.evicted[0]?.seq ?? null,
      evict_to_seq: cut?.evicted[cut.evicted.length - 1]?.seq ?? null,
      tail_rows: cut?.tail.length ?? priorTail(input, located).rest.length,
      estimated_tokens_before: projection.estimate,
      estimated_tokens_after: after.estimate,
    },
    reason: cut === undefined ? NOTHING_TO_EVICT : after.estimate >= projection.estimate ? worthless(projection.estimate, after.estimate) : null,
  };
}

function locatedAfter(cut: CutPlan): LocatedCut {
  return { cut: cut.cut, openerSeq: cut.hints.openerSeq, resumeSeq: cut.hints.resumeSeq, withinUnit: cut.withinUnit, notes: [] };
}

function worthless(before: number, after: number): string {
  return `nothing worth evicting yet: the request would not get smaller (~${before} -> ~${after} tokens)`;
}

async function compact(input: StrategyInput, projection: Projection, opts: CompactOptions): Promise<CompactOutcome> {
  // Planning reads the whole uncovered history once: in slices, so a long one stalls nothing.
  const { previous, folds, plan: cut, tokens, cap, basis } = await runStepsSliced(selectEviction(input, opts.forced, projection.estimate), () => opts.signal?.throwIfAborted());
  if (cut === undefined) return nothingCompacted(NOTHING_TO_EVICT);
  // Sized with the summary at its cap: when even that is no smaller, no model call is made.
  const bound = build(input, { summary: 'x'.repeat(cap * 4), backend: null }, locatedAfter(cut), cut.tail, []);
  if (bound.estimate >= projection.estimate) return nothingCompacted(worthless(projection.estimate, bound.estimate));

  let summary = previous?.summary ?? '';
  let backend: string | null = null;
  // Fold the eviction in order, chunk by chunk, carrying the summary along. Chunks break
  // between units or exchanges, never inside an exchange. A local summarizer never waits on
  // I/O, so each chunk gives the event loop a turn.
  for await (const transcript of evictionTranscripts(folds, cut.evicted, tokens, basis)) {
    await giveWay();
    const prompt = summaryPrompt({
      previousSummary: summary,
      transcript,
      focus: opts.focus,
      maxOutputTokens: cap,
      what: 'a running summary of the conversation',
    });
    const result = await opts.summarizer.summarize({
      session: input.session.name,
      purpose: 'rolling',
      system: SUMMARIZER_SYSTEM,
      prompt,
      maxOutputTokens: cap,
      signal: opts.signal,
    });
    summary = result.text;
    backend = result.backend;
  }

  const after = build(input, { summary, backend }, locatedAfter(cut), cut.tail, []);
  if (after.estimate >= projection.estimate) {
    return { ...nothingCompacted(worthless(projection.estimate, after.estimate)), backend };
  }
  const commit = (): void => saveRollingState(input.db, input.session.sid, { summary, cut: cut.cut, hints: cut.hints, backend });
  return { compacted: true, commit, reason: null, backend, evictedRows: cut.evicted.length };
}

/**
 * What the summarizer reads, call by call: stored folds first (the oldest part of the eviction,
 * as the text they already are), then the evicted rows. Both go in chunks under the same limit;
 * a fold is sized as the request showed it and never split, so one larger than the limit is a
 * call of its own. (A snapcompact archive read back as text is many pages, often more than the
 * window.) A summary written again shorter, with nothing newly evicted, is one call over no
 * transcript.
 */
async function* evictionTranscripts(folds: readonly Fold[], evicted: readonly StoredRow[], tokens: (row: StoredRow) => number, basis: number): AsyncGenerator<string> {
  const limit = evictionChunkTokens(basis);
  let calls = 0;
  const foldUnits = folds.map((f) => {
    const text = foldText(f);
    return { items: [text], tokens: PER_INPUT_TOKENS + textTokens(text) };
  });
  for (const chunk of chunkUnits(foldUnits, limit)) {
    calls++;
    yield chunk.map((u) => u.items[0]!).join('\n\n');
  }
  for await (const chunk of summaryChunks(evicted, tokens, limit)) {
    calls++;
    yield chunk;
  }
  if (calls === 0) yield '';
}

/** Rewrites a state saved in the item-count format as a user cut, once, when it still fits. */
function adopt(input: StrategyInput): void {
  const resolved = resolveState(input);
  const state = resolved.state;
  if (state === undefined || 'format' in state.cut) return;
  const located = locateItemCut(input, state.cut);
  if (located === undefined) return;
  saveRollingState(input.db, input.session.sid, {
    summary: state.summary,
    cut: located.cut,
    hints: { openerSeq: located.openerSeq, resumeSeq: located.resumeSeq },
    backend: state.backend,
  });
}

/** Where the verbatim history after the saved cut begins (other extensions' folds aside). */
function tailFrom(input: StrategyInput): number {
  return resolveState(input).located.openerSeq;
}

/** The strategy's functions, without a name or settings: each strategy that runs it adds its own. */
export const runningSummary: Omit<Strategy, 'name' | 'settings'> = { project, plan, compact, warm, tailFrom, adopt };
