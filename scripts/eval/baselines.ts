// The eval's two baselines, written against the Strategy contract (strategies/contract.ts) and
// run inside the daemon like any strategy, but registered only by the eval's daemon entry
// (scripts/eval/daemon-entry.ts), never shipped:
// - `none`: what a client without compaction sends: the whole history, cut from the oldest end
//   when it no longer fits the window, whole exchanges at a time (a call keeps its results).
// - `single-summary`: one summary of everything evicted, rewritten from the old one at each
//   compaction, then only the newest exchange verbatim; no recap, no tail budget. This is the
//   shape of Claude Code's and Codex's auto-compact.
// - `masking`: observation masking, the cheap baseline the "Complexity Trap" study (JetBrains,
//   2025) found as good as summarizing. No summary: at each compaction the tool outputs before
//   a new boundary become a one-line placeholder naming the transcript_read call that reads
//   them; the calls and all messages stay. The exchanges after the boundary (M of them) are the
//   tail budget's, as rolling's tail. When even the masked history no longer fits the window,
//   its oldest exchanges are dropped, as `none` drops them.
// All reuse the harness (cut planning, projection, the summarizer prompt); single-summary
// saves its summary where rolling does (rolling_state), which is safe because an eval daemon
// runs one strategy per session and never switches.
import type { PlainInput, Section } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { yieldToEventLoop } from '../../protocol/time-slice.ts';
import { saveRollingState } from '../../storage/state/rolling.ts';
import { nothingCompacted, type CompactOptions, type CompactOutcome, type Projection, type Strategy, type StrategyInput } from '../../strategies/contract.ts';
import type { ExtensionModule } from '../../strategies/extensions/module.ts';
import { inputsTokens } from '../../strategies/estimate.ts';
import { planCut, startCut } from '../../strategies/harness/cut.ts';
import { priorTail } from '../../strategies/harness/prior.ts';
import { rowMemo } from '../../strategies/harness/row-memo.ts';
import { resolveState } from '../../strategies/rolling/running-summary-state.ts';
import { summaryCap } from '../../strategies/rolling/running-summary.ts';
import { summaryPrompt, SUMMARIZER_SYSTEM } from '../../strategies/harness/summarizer-prompt.ts';
import { summaryChunks } from '../../strategies/harness/summary-text.ts';
import { evictionChunkTokens, groupUnits, opensExchange, opensUnit } from '../../strategies/harness/units.ts';
import { isDue, roomUnderTrigger, roomUnderWindow, tailBudget } from '../../strategies/harness/window.ts';
import { forModel, tokenCounter } from '../../strategies/projection.ts';
import { RollingSettings } from '../../strategies/rolling/settings.ts';

export const SINGLE_SUMMARY_HEADER = 'Summary of the conversation so far:';

function tailSection(rows: readonly StoredRow[], inputs: PlainInput[]): Section[] {
  if (rows.length === 0) return [];
  return [{ name: 'tail', source: `rows #${rows[0]!.seq}-#${rows[rows.length - 1]!.seq} (${rows.length} rows, verbatim)`, estimated_tokens: inputsTokens(inputs) }];
}

/** `none`: the newest whole exchanges that fit the window; never due, never compacts. */
function projectNone(input: StrategyInput): Projection {
  const { rest } = priorTail(input, startCut());
  const memo = rowMemo(input);
  const tokens = tokenCounter(rest, input.target, memo.sizes, memo.inputs);
  const groups = groupUnits(rest, (r) => opensUnit(r) || opensExchange(r), tokens);
  const room = roomUnderWindow(input.window, input.pinnedTokens);
  let start = 0;
  let total = groups.reduce((n, g) => n + g.tokens, 0);
  while (room !== null && start < groups.length - 1 && total > room) total -= groups[start++]!.tokens;
  // Row sizes are close to, not exactly, the projected size: settle on the exact estimate.
  for (;;) {
    const rows = groups.slice(start).flatMap((g) => g.items);
    const inputs = forModel(rows, input.target, memo.inputs);
    const estimate = input.pinnedTokens + inputsTokens(inputs);
    if (room === null || estimate - input.pinnedTokens <= room || start >= groups.length - 1) {
      const notes = start > 0 ? [`none: ${groups.slice(0, start).reduce((n, g) => n + g.items.length, 0)} oldest row(s) dropped to fit the window`] : [];
      return { inputs, sections: tailSection(rows, inputs), estimate, due: false, notes };
    }
    start++;
  }
}

export const none: Strategy = {
  name: 'none',
  settings: RollingSettings,
  project: projectNone,
  compact: () => Promise.resolve(nothingCompacted('none never compacts')),
};

function summaryInput(summary: string): PlainInput {
  return { role: 'user', content: [{ type: 'text', text: `${SINGLE_SUMMARY_HEADER}\n\n${summary}` }] };
}

function projectSingle(input: StrategyInput): Projection {
  const resolved = resolveState(input);
  const { rest } = priorTail(input, resolved.located);
  const tail = forModel(rest, input.target, rowMemo(input).inputs);
  const inputs: PlainInput[] = [];
  const sections: Section[] = [];
  if (resolved.state !== undefined) {
    const s = summaryInput(resolved.state.summary);
    inputs.push(s);
    sections.push({ name: 'summary', source: `single summary by ${resolved.state.backend ?? 'unknown'}`, estimated_tokens: inputsTokens([s]) });
  }
  inputs.push(...tail);
  sections.push(...tailSection(rest, tail));
  const estimate = input.pinnedTokens + inputsTokens(inputs);
  return { inputs, sections, estimate, due: isDue(estimate, input.window), notes: resolved.notes };
}

/** Evicts everything but the newest exchange (and its unit's opener) into one new summary. */
async function compactSingle(input: StrategyInput, projection: Projection, opts: CompactOptions): Promise<CompactOutcome> {
  const resolved = resolveState(input);
  const { rest } = priorTail(input, resolved.located);
  const memo = rowMemo(input);
  const tokens = tokenCounter(rest, input.target, memo.sizes, memo.inputs);
  const cut = planCut(input, resolved.located, rest, { tokens, budget: 0, settles: () => false });
  if (cut === undefined || cut.evicted.length === 0) return nothingCompacted('nothing to evict but the newest exchange');
  const basis = input.window.window ?? rest.reduce((n, r) => n + tokens(r), 0);
  const cap = summaryCap(basis);
  let summary = resolved.state?.summary ?? '';
  let backend: string | null = null;
  for await (const transcript of summaryChunks(cut.evicted, tokens, evictionChunkTokens(basis))) {
    await yieldToEventLoop();
    const prompt = summaryPrompt({ previousSummary: summary, transcript, focus: opts.focus, maxOutputTokens: cap, what: 'a summary of the whole conversation' });
    const result = await opts.summarizer.summarize({ session: input.session.name, purpose: 'single-summary', system: SUMMARIZER_SYSTEM, prompt, maxOutputTokens: cap, signal: opts.signal });
    summary = result.text;
    backend = result.backend;
  }
  const after = input.pinnedTokens + inputsTokens([summaryInput(summary), ...forModel(cut.tail, input.target, memo.inputs)]);
  if (after >= projection.estimate) {
    return { ...nothingCompacted(`the summary would not make the request smaller (~${projection.estimate} -> ~${after})`), backend };
  }
  const commit = (): void => saveRollingState(input.db, input.session.sid, { summary, cut: cut.cut, hints: cut.hints, backend });
  return { compacted: true, commit, reason: null, backend, evictedRows: cut.evicted.length };
}

export const singleSummary: Strategy = { name: 'single-summary', settings: RollingSettings, project: projectSingle, compact: compactSingle };

export const MASKED_HEADER = 'tool output elided by masking';

/** A tool result before the boundary as the masked request carries it: one line that says where it is. */
function masked(row: StoredRow): StoredRow {
  if (row.body.kind !== 'tool_result') return row;
  const chars = row.body.content.reduce((n, p) => n + (p.type === 'text' ? p.text.length : 0), 0);
  const text = `[${MASKED_HEADER}: ${chars} characters; transcript_read {"from_seq": ${row.seq}, "to_seq": ${row.seq}} reads it]`;
  return { ...row, body: { ...row.body, content: [{ type: 'text', text }] } };
}

/** The history split at the saved boundary: rows before it (masked) and the verbatim rest. */
function maskedSplit(input: StrategyInput): { before: StoredRow[]; rest: readonly StoredRow[]; notes: string[] } {
  const resolved = resolveState(input);
  const { rest } = priorTail(input, resolved.located);
  if (resolved.state === undefined) return { before: [], rest, notes: resolved.notes };
  const verbatim = new Set(rest.map((r) => r.seq));
  const before = priorTail(input, startCut()).rest.filter((r) => !verbatim.has(r.seq)).map(masked);
  return { before, rest, notes: resolved.notes };
}

function projectMasking(input: StrategyInput): Projection {
  const { before, rest, notes } = maskedSplit(input);
  const memo = rowMemo(input);
  // Masked rows are new objects: projected without the row memo, which is keyed by the stored row.
  const tailInputs = forModel(rest, input.target, memo.inputs);
  const tailTokens = inputsTokens(tailInputs);
  const room = roomUnderWindow(input.window, input.pinnedTokens + tailTokens);
  const groups = groupUnits(before, (r) => opensUnit(r) || opensExchange(r), tokenCounter(before, input.target));
  // Skip by the groups' sizes first, then settle on the exact estimate (as `none` does).
  let start = 0;
  let total = groups.reduce((n, g) => n + g.tokens, 0);
  while (room !== null && start < groups.length && total > room) total -= groups[start++]!.tokens;
  for (;;) {
    const kept = groups.slice(start).flatMap((g) => g.items);
    const maskedInputs = forModel(kept, input.target);
    const estimate = input.pinnedTokens + inputsTokens(maskedInputs) + tailTokens;
    if (room === null || inputsTokens(maskedInputs) <= room || start >= groups.length) {
      const sections: Section[] = kept.length === 0 ? [] : [{ name: 'masked', source: `rows #${kept[0]!.seq}-#${kept[kept.length - 1]!.seq}, tool outputs as placeholders`, estimated_tokens: inputsTokens(maskedInputs) }];
      const dropped = groups.slice(0, start).reduce((n, g) => n + g.items.length, 0);
      return {
        inputs: [...maskedInputs, ...tailInputs],
        sections: [...sections, ...tailSection(rest, tailInputs)],
        estimate,
        due: isDue(estimate, input.window),
        notes: dropped > 0 ? [...notes, `masking: ${dropped} oldest row(s) dropped to fit the window`] : notes,
      };
    }
    start++;
  }
}

/** Moves the boundary: the older part of the verbatim history is masked from now on; no model call. */
function compactMasking(input: StrategyInput, _projection: Projection, opts: CompactOptions): Promise<CompactOutcome> {
  const resolved = resolveState(input);
  const { before, rest } = maskedSplit(input);
  const memo = rowMemo(input);
  const tokens = tokenCounter(rest, input.target, memo.sizes, memo.inputs);
  const fixed = input.pinnedTokens + inputsTokens(forModel(before, input.target));
  const historyTokens = rest.reduce((n, r) => n + tokens(r), 0);
  const room = roomUnderTrigger(input.window, fixed);
  let budget = tailBudget(input.window, historyTokens, opts.forced);
  if (room !== null) budget = Math.min(budget, Math.max(0, Math.floor(room / 2)));
  const cut = planCut(input, resolved.located, rest, { tokens, budget, settles: (tail) => input.window.window === null || !isDue(fixed + tail, input.window) });
  if (cut === undefined || cut.evicted.length === 0) return Promise.resolve(nothingCompacted('nothing to mask but the newest exchange'));
  const commit = (): void => saveRollingState(input.db, input.session.sid, { summary: '', cut: cut.cut, hints: cut.hints, backend: null });
  return Promise.resolve({ compacted: true, commit, reason: null, backend: null, evictedRows: cut.evicted.length });
}

export const masking: Strategy = { name: 'masking', settings: RollingSettings, project: projectMasking, compact: compactMasking };

/** A baseline as an extension: a strategy, off unless chosen, its section the rolling one's shape. */
function baseline(strategy: Strategy, description: string): ExtensionModule {
  return { name: strategy.name, kind: 'strategy', defaultEnabled: false, requires: [], description, settings: strategy.settings, strategy };
}

/** What the eval's daemon entry registers. */
export const BASELINES: readonly ExtensionModule[] = [
  baseline(none, 'eval baseline: the whole history, oldest exchanges dropped to fit the window'),
  baseline(singleSummary, 'eval baseline: one summary of everything evicted, then the newest exchange'),
  baseline(masking, 'eval baseline: tool outputs before a moving boundary replaced by a placeholder, no summary'),
];
