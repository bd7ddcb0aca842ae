// The notes layer: a short text of exact identifiers, decisions, verified facts, open work and
// the next step, rewritten at every compaction from the previous notes plus what that
// compaction evicted, and sent at the top of every request. docs/notes.md explains the why.
// It reads only the request a compaction produced, so it works over any strategy.
import type { PlainInput, Section } from '../../protocol/prepared.ts';
import { runStepsSliced, yieldToEventLoop } from '../../storage/db.ts';
import { loadNotes, noteNotesFailure, saveNotes, type NotesState } from '../../storage/notes-state.ts';
import type { CompactOptions, Layer, LayerView, Projection, StrategyInput } from '../contract.ts';
import { inputsTokens } from '../estimate.ts';
import { CutCache, cutAfterSteps, locate, START_CUT, startCut, type LocatedCut } from '../harness/cut.ts';
import { rowsThroughHead } from '../harness/history-rows.ts';
import { cacheSlot } from '../harness/kernel-cache.ts';
import { rowMemo } from '../harness/row-memo.ts';
import { loadSaved, savedSlot } from '../harness/saved-state.ts';
import { summaryChunks } from '../harness/summary-text.ts';
import { evictionChunkTokens } from '../harness/units.ts';
import { tokenCounter, tokenCounterYielding } from '../projection.ts';
import { summarizerFailed } from '../summarizer/types.ts';
import { notesAnswerProblem, notesBudget, notesOutputCap, notesPrompt, NOTES_SYSTEM } from './prompt.ts';
import { keptFrom } from './evicted.ts';
import type { NotesSettings } from './settings.ts';

/** The line above the notes in every request; it names the tools that reach the exact history. */
export const NOTES_HEADER = 'Session notes, rewritten at each compaction (transcript_grep searches and transcript_read reads the exact history they come from):';

const CUTS = cacheSlot<CutCache>('notes.cuts');
const SAVED = savedSlot<ReturnType<typeof loadNotes>>('notes.saved');

interface Resolved {
  /** The saved notes when their cut still matches the transcript. */
  state: NotesState | undefined;
  /** Where the history the notes do not cover yet starts. */
  located: LocatedCut;
  notes: string[];
}

function resolve(input: StrategyInput): Resolved {
  const loaded = loadSaved(input, SAVED, () => loadNotes(input.db, input.session.sid));
  if (loaded === undefined) return { state: undefined, located: startCut(), notes: [] };
  if ('unreadable' in loaded) {
    return { state: undefined, located: startCut(), notes: [`the saved session notes cannot be read (${loaded.unreadable}); they are left out until the next compaction rewrites them`] };
  }
  const located = locate(input, CUTS, { cut: loaded.cut, hints: loaded.hints, rewrites: loaded.rewrites, savedAt: loaded.updatedAt });
  if (located === undefined) {
    return { state: undefined, located: startCut(), notes: ['the saved session notes no longer match the transcript; they are left out until the next compaction rewrites them from the start'] };
  }
  const notes = [...located.notes];
  if (loaded.failure !== null) {
    notes.push(`the session notes were not rewritten at the last compaction (${loaded.failure}); they cover history before row #${located.openerSeq}, and the next compaction adds what they miss`);
  }
  return { state: loaded, located, notes };
}

function notesInput(text: string): PlainInput {
  return { role: 'user', content: [{ type: 'text', text: `${NOTES_HEADER}\n\n${text}` }] };
}

function view(input: StrategyInput, settings: NotesSettings): LayerView {
  const { state, located, notes } = resolve(input);
  if (state === undefined || state.text === '') return { inputs: [], sections: [], notes };
  const inp = notesInput(state.text);
  const budget = notesBudget(settings.budgetTokens, input.window);
  // The budget is what the summarizer is asked for, in its model's tokens; the section is
  // measured like every other, in estimated tokens, and may pass the budget up to the cap
  // (plus the header). The source names both units so the two numbers are not compared as one.
  const section: Section = {
    name: 'notes',
    source: `session notes by ${state.backend ?? 'unknown'} (budget ${budget} model tokens asked of the summarizer; text capped at ${notesOutputCap(budget)} estimated tokens, bytes/4), covering history before row #${located.openerSeq}`,
    estimated_tokens: inputsTokens([inp]),
  };
  return { inputs: [inp], sections: [section], notes };
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Rewrites the notes after a committed compaction. The history after the notes' cut is read,
 * the part the new request no longer ends with is the eviction (evicted.ts), and it is folded
 * into the notes chunk by chunk, each call carrying the notes so far. Only a complete rewrite
 * is saved; any failure records why (the old text and cut stay) and is thrown on for the
 * engine to report, so the next compaction covers what this one missed.
 */
async function rewrite(input: StrategyInput, after: Projection, opts: CompactOptions, settings: NotesSettings): Promise<void> {
  const { state, located } = resolve(input);
  // The strategy has just read these rows for its own compaction: shared, not decoded again.
  const rows = await rowsThroughHead(input, located.openerSeq);
  const kept = keptFrom(rows, after.inputs, input.target);
  if (kept === 0) return;
  const evicted = rows.slice(0, kept);
  // Sized through the kernel's row memo: shared rows were sized by the strategy; rows read here
  // afresh are sized with yields (an eviction can be a whole never-compacted history). Sizes
  // only: the evicted rows' projections are not needed again.
  const sizes = rowMemo(input).sizes;
  await tokenCounterYielding(evicted, input.target, sizes);
  const tokens = tokenCounter([], input.target, sizes);
  const basis = input.window.window ?? evicted.reduce((n, r) => n + tokens(r), 0);
  const budget = notesBudget(settings.budgetTokens, input.window);
  const cap = notesOutputCap(budget);
  let text = state?.text ?? '';
  let backend = state?.backend ?? null;
  // Capability notices render to nothing, so a chunk of only them needs no call.
  for await (const transcript of summaryChunks(evicted, tokens, evictionChunkTokens(basis))) {
    if (transcript === '') continue;
    await yieldToEventLoop();
    const result = await opts.summarizer.summarize({
      session: input.session.name,
      purpose: 'notes',
      system: NOTES_SYSTEM,
      prompt: notesPrompt({ notes: text, transcript, focus: opts.focus, budgetTokens: budget }),
      maxOutputTokens: cap,
      signal: opts.signal,
    });
    const problem = notesAnswerProblem(result.text);
    if (problem !== null) throw summarizerFailed(result.backend, 'invalid_answer', `notes rewrite: ${problem}`);
    text = result.text.trim();
    backend = result.backend;
  }
  const { cut, hints } = await runStepsSliced(cutAfterSteps(input, located, evicted, rows[kept]), () => opts.signal?.throwIfAborted());
  saveNotes(input.db, input.session.sid, { text, cut, hints, backend });
}

/** The notes layer with its section of extensions.json. */
export function notesLayer(settings: NotesSettings): Layer {
  return {
    name: 'notes',
    // The notes may grow to their output cap at the next compaction, under their header.
    reserve: (input) => inputsTokens([notesInput('x'.repeat(4 * notesOutputCap(notesBudget(settings.budgetTokens, input.window))))]),
    project: (input) => view(input, settings),
    async compact(input, _before, after, opts) {
      try {
        await rewrite(input, after, opts, settings);
      } catch (err) {
        // A cancelled request is not a failed rewrite: nothing is recorded, the engine rethrows.
        if (opts.signal?.aborted !== true) noteNotesFailure(input.db, input.session.sid, describe(err), START_CUT);
        throw err;
      }
      return view(input, settings);
    },
  };
}
