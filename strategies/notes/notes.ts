// The notes layer: a short text of exact identifiers, decisions, verified facts, open work and
// the next step, rewritten at every compaction from the previous notes plus what that
// compaction evicted, and sent at the top of every request. docs/notes.md explains the why.
// It reads only the request a compaction produced, so it works over any strategy.
import type { PlainInput, Section } from '../../protocol/prepared.ts';
import { runStepsSliced, giveWay } from '../../protocol/time-slice.ts';
import { commitOwed } from '../../storage/db.ts';
import { loadNotes, noteNotesFailure, saveLedger, saveNotes, type NotesState } from '../../storage/state/notes.ts';
import type { CompactOptions, Layer, LayerView, Projection, StrategyInput } from '../contract.ts';
import { inputsTokens } from '../estimate.ts';
import { CutCache, cutAfterSteps, locate, START_CUT, startCut, type LocatedCut } from '../harness/cut.ts';
import { rowsThroughHead } from '../harness/history-rows.ts';
import { keptInput, type KeptInputSlot } from '../harness/kept-input.ts';
import { cacheSlot } from '../harness/kernel-cache.ts';
import { rowMemo } from '../harness/row-memo.ts';
import { loadSaved, savedSlot } from '../harness/saved-state.ts';
import { summaryChunks } from '../harness/summary-text.ts';
import { evictionChunkTokens } from '../harness/units.ts';
import { tokenCounter, tokenCounterYielding } from '../projection.ts';
import { summarizerFailed } from '../summarizer/types.ts';
import { notesAnswerProblem, notesBudget, notesOutputCap, notesPrompt, NOTES_SYSTEM } from './prompt.ts';
import { keptFrom } from './evicted.ts';
import { emptyLedger, foldLedger, ledgerBudget, readLedger, renderLedger, resultsOf, type Ledger } from './ledger.ts';
import type { NotesSettings } from './settings.ts';

/** The line above the notes in every request; it names the tools that reach the exact history. */
export const NOTES_HEADER = 'Session notes, rewritten at each compaction (transcript_grep searches and transcript_read reads the exact history they come from):';

/** Evicted rows folded into the ledger between two turns of the event loop. */
const LEDGER_SLICE_ROWS = 1000;

const CUTS = cacheSlot<CutCache>('notes.cuts');
const SAVED = savedSlot<ReturnType<typeof loadNotes>>('notes.saved');

/**
 * The saved ledger read back and rendered, once per saved notes (and budget): every request
 * sends the same text, and parsing and fitting it again each time cost more than the rest of a
 * warm prepare.
 */
const ledgers = new WeakMap<NotesState, { ledger: Ledger | { unreadable: string }; rendered?: { budget: number; text: string } }>();

function savedLedger(state: NotesState): Ledger | { unreadable: string } {
  let e = ledgers.get(state);
  if (e === undefined) ledgers.set(state, e = { ledger: readLedger(state.ledger) });
  return e.ledger;
}

function renderedLedger(state: NotesState, ledger: Ledger, budget: number): string {
  const e = ledgers.get(state);
  if (e?.rendered?.budget === budget) return e.rendered.text;
  const text = renderLedger(ledger, budget);
  if (e !== undefined) e.rendered = { budget, text };
  return text;
}

interface Resolved {
  /** The saved notes when their cut still matches the transcript. */
  state: NotesState | undefined;
  /** Their artifact ledger (empty without notes, or when the saved one cannot be read). */
  ledger: Ledger;
  /** Where the history the notes do not cover yet starts. */
  located: LocatedCut;
  notes: string[];
}

function resolve(input: StrategyInput): Resolved {
  const loaded = loadSaved(input, SAVED, () => loadNotes(input.db, input.session.sid));
  if (loaded === undefined) return { state: undefined, ledger: emptyLedger(), located: startCut(), notes: [] };
  if ('unreadable' in loaded) {
    return { state: undefined, ledger: emptyLedger(), located: startCut(), notes: [`the saved session notes cannot be read (${loaded.unreadable}); they are left out until the next compaction rewrites them`] };
  }
  const located = locate(input, CUTS, { cut: loaded.cut, hints: loaded.hints, rewrites: loaded.rewrites, savedAt: loaded.updatedAt });
  if (located === undefined) {
    return { state: undefined, ledger: emptyLedger(), located: startCut(), notes: ['the saved session notes no longer match the transcript; they are left out until the next compaction rewrites them from the start'] };
  }
  const notes = [...located.notes];
  let ledger = savedLedger(loaded);
  if ('unreadable' in ledger) {
    notes.push(`the saved artifact ledger cannot be read (${ledger.unreadable}); it starts again from the next compaction's evicted history`);
    ledger = emptyLedger();
  }
  if (loaded.failure !== null) {
    notes.push(`the session notes were not rewritten at the last compaction (${loaded.failure}); they cover history before row #${located.openerSeq}, and the next compaction adds what they miss`);
  }
  return { state: loaded, ledger, located, notes };
}

function notesInput(text: string): PlainInput {
  return { role: 'user', content: [{ type: 'text', text: `${NOTES_HEADER}\n\n${text}` }] };
}

function ledgerInput(text: string): PlainInput {
  return { role: 'user', content: [{ type: 'text', text }] };
}

/** The notes' and the ledger's inputs, made once per text (harness/kept-input.ts). */
const NOTES_INPUT: KeptInputSlot = cacheSlot('notes.notesInput');
const LEDGER_INPUT: KeptInputSlot = cacheSlot('notes.ledgerInput');

function view(input: StrategyInput, settings: NotesSettings): LayerView {
  const { state, ledger, located, notes } = resolve(input);
  if (state === undefined) return { inputs: [], sections: [], notes };
  const budget = notesBudget(settings.budgetTokens, input.window);
  const ledgerText = renderedLedger(state, ledger, ledgerBudget(budget));
  const led: LayerView = { inputs: [], sections: [], notes };
  if (ledgerText !== '') {
    const inp = keptInput(input.cache, LEDGER_INPUT, ledgerText, ledgerInput);
    led.inputs.push(inp);
    led.sections.push({
      name: 'artifact ledger',
      source: `files, commands, test runs and where the work stood, read off the history through row #${ledger.through} (exact; within ${ledgerBudget(budget)} estimated tokens)`,
      estimated_tokens: inputsTokens([inp]),
    });
  }
  if (state.text === '') return led;
  const inp = keptInput(input.cache, NOTES_INPUT, state.text, notesInput);
  // The budget is what the summarizer is asked for, in its model's tokens; the section is
  // measured like every other, in estimated tokens, and may pass the budget up to the cap
  // (plus the header). The source names both units so the two numbers are not compared as one.
  const section: Section = {
    name: 'notes',
    source: `session notes by ${state.backend ?? 'unknown'} (budget ${budget} model tokens asked of the summarizer; text capped at ${notesOutputCap(budget)} estimated tokens, bytes/4), covering history before row #${located.openerSeq}`,
    estimated_tokens: inputsTokens([inp]),
  };
  return { inputs: [inp, ...led.inputs], sections: [section, ...led.sections], notes };
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
  const { state, ledger, located } = resolve(input);
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
  // The ledger first: it needs no model, so a rewrite that fails below does not hold it back
  // (rows it already holds are not counted again at the next compaction). In slices, with a
  // turn of the event loop between: a first compaction can evict a whole long history at once.
  const results = resultsOf(evicted);
  let folded = ledger;
  for (let i = 0; i < evicted.length; i += LEDGER_SLICE_ROWS) {
    folded = foldLedger(folded, evicted.slice(i, i + LEDGER_SLICE_ROWS), results);
    await giveWay();
  }
  // Saved now and again with the notes below: one serialization of a ledger that can run to
  // hundreds of kilobytes.
  const ledgerJson = JSON.stringify(folded);
  commitOwed(input.db, () => saveLedger(input.db, input.session.sid, ledgerJson, START_CUT));
  const budget = notesBudget(settings.budgetTokens, input.window);
  const cap = notesOutputCap(budget);
  let text = state?.text ?? '';
  let backend = state?.backend ?? null;
  // Capability notices render to nothing, so a chunk of only them needs no call.
  for await (const transcript of summaryChunks(evicted, tokens, evictionChunkTokens(basis))) {
    if (transcript === '') continue;
    await giveWay();
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
  // Both saves leave their fsync owed: the compaction's request waits for it off the event loop.
  commitOwed(input.db, () => saveNotes(input.db, input.session.sid, { text, ledger: ledgerJson, cut, hints, backend }));
}

/**
 * The layer's reserve by notes budget. Every request asks for it, and measuring it means
 * building texts of the budget's size: a session's budget changes only with its window.
 */
const RESERVES = new Map<number, number>();

/** The notes layer with its section of extensions.json. */
export function notesLayer(settings: NotesSettings): Layer {
  return {
    name: 'notes',
    // The notes may grow to their output cap at the next compaction, under their header, and the
    // ledger to its share.
    reserve: (input) => {
      const budget = notesBudget(settings.budgetTokens, input.window);
      let n = RESERVES.get(budget);
      if (n === undefined) {
        n = inputsTokens([notesInput('x'.repeat(4 * notesOutputCap(budget))), ledgerInput('x'.repeat(4 * ledgerBudget(budget)))]);
        if (RESERVES.size >= 64) RESERVES.clear();
        RESERVES.set(budget, n);
      }
      return n;
    },
    project: (input) => view(input, settings),
    async compact(input, _before, after, opts) {
      try {
        await rewrite(input, after, opts, settings);
      } catch (err) {
        // A cancelled request is not a failed rewrite: nothing is recorded, the engine rethrows.
        if (opts.signal?.aborted !== true) commitOwed(input.db, () => noteNotesFailure(input.db, input.session.sid, describe(err), START_CUT));
        throw err;
      }
      return view(input, settings);
    },
  };
}
