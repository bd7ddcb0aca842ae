// rolling: the request is the system prompt, one running summary of everything evicted so
// far, a short verbatim recap of the latest evicted user requests, and the untouched tail.
// A compaction folds the oldest whole units past the tail budget into a new summary.
import type { PlainInput, Section } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { yieldToEventLoop } from '../../storage/db.ts';
import { saveRollingState } from '../../storage/rolling-state.ts';
import { userRowsAfter, userRowsBefore } from '../../storage/user-rows.ts';
import { nothingCompacted, type CompactOptions, type CompactPlan, type CompactOutcome, type Projection, type Strategy, type StrategyInput } from '../contract.ts';
import { inputsTokens, reachesPercent, textTokens } from '../estimate.ts';
import { extendFingerprint } from '../harness/cut.ts';
import { historyRows } from '../harness/history-rows.ts';
import { summaryPrompt, SUMMARIZER_SYSTEM } from '../harness/summarizer-prompt.ts';
import { summaryText } from '../harness/summary-text.ts';
import { chunkUnits, groupUnits, selectTail, type Unit } from '../harness/units.ts';
import { tailBudget } from '../harness/window.ts';
import { forModel, rowTokens } from '../projection.ts';
import { locateItemCut, resolveState, type ResolvedState } from './state.ts';

/** User messages quoted in the recap, and characters kept of each. */
export const RECAP_MESSAGES = 3;
export const RECAP_CHARS = 400;

export const SUMMARY_HEADER = 'Summary of the earlier part of this conversation, which no longer fits the context window:';
export const RECAP_HEADER = 'The most recent of those earlier user messages, quoted:';

/** Summary output cap in tokens: a tenth of the window, within [128, 2048]. */
export function summaryCap(window: number): number {
  return Math.min(2048, Math.max(128, Math.floor(window / 10)));
}

/** Largest eviction chunk per summarizer call, in estimated tokens. */
export function chunkCap(window: number): number {
  return Math.max(1000, Math.floor(window / 2));
}

function clip(text: string, max: number): string {
  const chars = [...text];
  return chars.length <= max ? text : `${chars.slice(0, max).join('')}…`;
}

function summaryInput(summary: string): PlainInput {
  return { role: 'user', content: [{ type: 'text', text: `${SUMMARY_HEADER}\n\n${summary}` }] };
}

type Recap = { input: PlainInput; seqs: number[]; tokens: number } | undefined;

/**
 * The recap quotes the last user messages before the cut, so it changes only with the cut (or
 * a rewrite of those rows): it is built once per cut and kept in the kernel.
 */
function recapInput(input: StrategyInput, cutSeq: number, rewrites: number): Recap {
  if (cutSeq <= 1) return undefined;
  const key = `${cutSeq}:${rewrites}`;
  const cached = input.cache.get('rolling.recap') as { key: string; recap: Recap } | undefined;
  if (cached?.key === key) return cached.recap;
  const recent = userRowsBefore(input.db, input.session.sid, cutSeq, RECAP_MESSAGES);
  let recap: Recap;
  if (recent.length > 0) {
    const quoted = recent.map((r) => `> ${clip(r.text, RECAP_CHARS).replaceAll('\n', '\n> ')}`).join('\n\n');
    const built: PlainInput = { role: 'user', content: [{ type: 'text', text: `${RECAP_HEADER}\n\n${quoted}` }] };
    recap = { input: built, seqs: recent.map((r) => r.seq), tokens: inputsTokens([built]) };
  }
  input.cache.set('rolling.recap', { key, recap });
  return recap;
}

/** The request for a resolved state and the rows after its cut. */
function build(input: StrategyInput, resolved: ResolvedState, rows: readonly StoredRow[]): Projection {
  const inputs: PlainInput[] = [];
  const sections: Section[] = [];
  if (resolved.state !== undefined) {
    const s = summaryInput(resolved.state.summary);
    inputs.push(s);
    sections.push({
      name: 'summary',
      source: `rolling summary of ${resolved.users} user message(s) before #${resolved.cutSeq}, by ${resolved.state.backend ?? 'unknown'}`,
      estimated_tokens: inputsTokens([s]),
    });
    const recap = recapInput(input, resolved.cutSeq, resolved.rewrites);
    if (recap !== undefined) {
      inputs.push(recap.input);
      sections.push({ name: 'recap', source: `user rows ${recap.seqs.map((s) => `#${s}`).join(', ')}`, estimated_tokens: recap.tokens });
    }
  }
  const tail = forModel(rows, input.target);
  inputs.push(...tail);
  if (rows.length > 0) {
    sections.push({
      name: 'tail',
      source: `rows #${rows[0]!.seq}-#${rows[rows.length - 1]!.seq} (${rows.length} rows, verbatim)`,
      estimated_tokens: inputsTokens(tail),
    });
  }
  const estimate = input.pinnedTokens + inputsTokens(inputs);
  const { window, triggerPercent } = input.window;
  return { inputs, sections, estimate, due: window !== null && reachesPercent(estimate, window, triggerPercent), notes: resolved.notes };
}

function project(input: StrategyInput): Projection {
  const resolved = resolveState(input);
  return build(input, resolved, historyRows(input, resolved.cutSeq));
}

const NOTHING_TO_EVICT = 'cannot compact further without splitting the newest unit';

/** Which whole units after the cut would be evicted now, and the window size they are judged by. */
function selectEviction(input: StrategyInput, forced: boolean) {
  const resolved = resolveState(input);
  const rows = historyRows(input, resolved.cutSeq);
  const units = groupUnits(rows, (r) => r.row_class !== 'other', (r) => rowTokens(r, input.target));
  const historyTokens = units.reduce((n, u) => n + u.tokens, 0);
  const tailStart = selectTail(units, tailBudget(input.window, historyTokens, forced));
  const basis = input.window.window ?? historyTokens;
  return { resolved, units, tailStart, basis };
}

function plan(input: StrategyInput, projection: Projection, forced: boolean): CompactPlan {
  const { resolved, units, tailStart, basis } = selectEviction(input, forced);
  const evicted = units.slice(0, tailStart).flatMap((u) => u.items);
  const tail = units.slice(tailStart).flatMap((u) => u.items);
  const sized = { state: { summary: 'x'.repeat(summaryCap(basis) * 4), cut: { format: 2 as const, users: 0, fingerprint: '' }, cutSeq: 0, backend: null, rewrites: null, updatedAt: 0 } };
  const after =
    tailStart === 0
      ? projection
      : build(input, { ...resolved, ...sized, cutSeq: tail[0]?.seq ?? input.head + 1, notes: [] }, tail);
  return {
    evictRows: evicted.length,
    evictFromSeq: evicted[0]?.seq ?? null,
    evictToSeq: evicted[evicted.length - 1]?.seq ?? null,
    tailRows: tail.length,
    estimateBefore: projection.estimate,
    estimateAfter: after.estimate,
    reason: tailStart === 0 ? NOTHING_TO_EVICT : null,
  };
}

async function compact(input: StrategyInput, projection: Projection, opts: CompactOptions): Promise<CompactOutcome> {
  const { resolved, units, tailStart, basis } = selectEviction(input, opts.forced);
  if (tailStart === 0) return nothingCompacted(NOTHING_TO_EVICT);
  const evicted = units.slice(0, tailStart);
  const cap = summaryCap(basis);
  let summary = resolved.state?.summary ?? '';
  let tokensIn = 0;
  let tokensOut = 0;
  let backend: string | null = null;
  // Fold the eviction in order, chunk by chunk, carrying the summary along. A local summarizer
  // never waits on I/O, so each chunk gives the event loop a turn.
  for (const chunk of chunkUnits(evicted, chunkCap(basis))) {
    await yieldToEventLoop();
    const prompt = summaryPrompt({
      previousSummary: summary,
      transcript: summaryText(chunk.flatMap((u: Unit<StoredRow>) => u.items)),
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
    tokensIn += textTokens(SUMMARIZER_SYSTEM) + textTokens(prompt);
    tokensOut += result.outputTokens;
  }

  const evictedRows = evicted.flatMap((u) => u.items);
  const newUsers = evictedRows.filter((r) => r.row_class === 'user').length;
  const texts = userRowsAfter(input.db, input.session.sid, Math.max(0, resolved.cutSeq - 1), newUsers).map((r) => r.text);
  const cutSeq = units[tailStart]!.items[0]!.seq;
  const cut = { format: 2 as const, users: resolved.users + newUsers, fingerprint: extendFingerprint(resolved.fingerprint, texts) };
  const stateAfter = { summary, cut, cutSeq, backend, rewrites: resolved.rewrites, updatedAt: 0 };
  const after = build(input, { state: stateAfter, cutSeq, users: cut.users, fingerprint: cut.fingerprint, rewrites: resolved.rewrites, notes: [] }, units.slice(tailStart).flatMap((u) => u.items));
  if (after.estimate >= projection.estimate) {
    return { ...nothingCompacted(`compaction would not make the request smaller (~${projection.estimate} -> ~${after.estimate} tokens)`), backend, summarizerTokensIn: tokensIn, summarizerTokensOut: tokensOut };
  }
  saveRollingState(input.db, input.session.sid, { summary, cut, cutSeq, backend });
  return { compacted: true, reason: null, backend, summarizerTokensIn: tokensIn, summarizerTokensOut: tokensOut, evictedRows: evictedRows.length };
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
    cut: { format: 2, users: located.users, fingerprint: located.fingerprint },
    cutSeq: located.cutSeq,
    backend: state.backend,
  });
}

export const rolling: Strategy = { name: 'rolling', project, plan, compact, adopt };
