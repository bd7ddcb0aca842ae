// The notes layer through the engine (prepareRequest over rolling) against a real SQLite file:
// what a rewrite reads and asks, what every later request starts with, failures, stale cuts,
// forks, strategy switches, and the derivation of what a compaction evicted.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PlainInput } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import type { Db } from '../../storage/db.ts';
import { loadNotes, type NotesState } from '../../storage/state/notes.ts';
import { appendNotice, appendRows, forkSession } from '../../storage/transcript/write.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { foldSources } from '../../storage/transcript/history.ts';
import type { Strategy } from '../../strategies/contract.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { keptFrom } from '../../strategies/notes/evicted.ts';
import { readLedger } from '../../strategies/notes/ledger.ts';
import { NOTES_HEADER, notesLayer } from '../../strategies/notes/notes.ts';
import { NOTES_SYSTEM, notesAnswerProblem, notesBudget, notesOutputCap } from '../../strategies/notes/prompt.ts';
import { NotesSettings } from '../../strategies/notes/settings.ts';
import { inspectRequest, prepareRequest } from '../../strategies/prepare.ts';
import { forModel, plainTarget } from '../../strategies/projection.ts';
import { lcm } from '../../strategies/lcm/lcm.ts';
import { rolling } from '../../strategies/rolling/rolling.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';
import { parseSummaryPrompt } from '../../strategies/summarizer/prompt-format.ts';
import type { SummaryRequest } from '../../strategies/summarizer/types.ts';
import { assistant, tempDb, toolResult, user } from '../storage/factories.ts';
import { argsFor, RecordingSummarizer, sessionWithTurns, setupFor, turn } from './engine-fixtures.ts';
import { recordingDb } from '../storage/recording-db.ts';

/** snapcompact as the engine runs it, its fallback to rolling resolved. */
const snapcompact = BUILTIN_SET.strategies.snapcompact!;

const BUDGET = 300;
const layer = notesLayer({ budgetTokens: BUDGET });

function firstText(inputs: readonly PlainInput[]): string {
  const p = inputs[0]?.content[0];
  return p?.type === 'text' ? p.text : '';
}

/** The request numbers ("request N:") a summarizer prompt's transcript quotes, in order. */
function requestsIn(req: SummaryRequest): number[] {
  return [...parseSummaryPrompt(req.prompt).transcript.matchAll(/request (\d+):/g)].map((m) => Number(m[1]));
}

/** A summarizer whose notes list the requests it read (on top of the notes so far); rolling gets `summary #n`. */
function notesSummarizer(): RecordingSummarizer & { answers: Map<SummaryRequest, string> } {
  const s = Object.assign(new RecordingSummarizer(), { answers: new Map<SummaryRequest, string>() });
  s.answer = (req, n) => {
    if (req.purpose !== 'notes') return `summary #${n}`;
    const parts = parseSummaryPrompt(req.prompt);
    const seen = requestsIn(req);
    const text = [parts.previousSummary ?? '', `covered requests ${seen[0]}-${seen[seen.length - 1]}`].filter((x) => x !== '').join('\n');
    s.answers.set(req, text);
    return text;
  };
  return s;
}

function notesOf(db: Db, sid: number): NotesState {
  const n = loadNotes(db, sid);
  assert.ok(n !== undefined && !('unreadable' in n), 'readable notes');
  return n;
}

/** Seq of the first tail row the observation's tail section names. */
function tailStart(sections: ReadonlyArray<{ name: string; source: string }>): number {
  const tail = sections.find((s) => s.name === 'tail');
  return Number(/#(\d+)/.exec(tail?.source ?? '')![1]);
}

function rowsOfSession(db: Db, session: string): StoredRow[] {
  const out: StoredRow[] = [];
  for (const page of foldSources(db, session, 1, Number.MAX_SAFE_INTEGER)) out.push(...page);
  return out;
}

/** A session of 40 turns prepared once over rolling with the notes layer, so it compacted. */
async function compactedSession(t: Parameters<typeof tempDb>[0]) {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 40);
  const summarizer = notesSummarizer();
  const setup = setupFor({ window: 8000, summarizer, layers: [layer] });
  const cache = new KernelCache();
  const out = await prepareRequest(setup, argsFor(db, 's', { cache }));
  assert.equal(out.compacted, true);
  return { db, summarizer, setup, cache, out, sid: argsFor(db, 's').session.sid };
}

describe('notes', () => {
  test('the rewrite decodes no row the compaction already read, and the engine lets those rows go afterwards', async (t) => {
    // Transcript rows read in pages by a forced compaction of the same session, with and without
    // the notes layer. Rows, not pages: a sliced read ends a page when its time is spent.
    const pageReads = async (layers: typeof layer[]): Promise<{ reads: number; cache: KernelCache; notesCalls: number }> => {
      const base = tempDb(t);
      await sessionWithTurns(base, 's', 40);
      const { db, returned } = recordingDb(base);
      const summarizer = notesSummarizer();
      const cache = new KernelCache();
      const out = await prepareRequest(setupFor({ window: 8000, summarizer, layers }), argsFor(db, 's', { cache }));
      assert.equal(out.compacted, true);
      const reads = [...returned].filter(([sql]) => /FROM transcript\s+WHERE sid = \? AND seq > \? AND seq <= \? ORDER BY seq LIMIT/.test(sql)).reduce((n, [, rows]) => n + rows, 0);
      return { reads, cache, notesCalls: summarizer.calls.filter((c) => c.purpose === 'notes').length };
    };
    const without = await pageReads([]);
    const withNotes = await pageReads([layer]);
    assert.ok(withNotes.notesCalls > 0, 'the notes were rewritten');
    assert.ok(without.reads > 0, 'the compaction read rows in pages');
    assert.equal(withNotes.reads, without.reads, 'the notes read their rows from the kernel, not from the file');
    const passed = withNotes.cache.slotSizes().find((s) => s.slot === 'history-rows.passed');
    assert.ok(passed !== undefined && passed.bytes <= 8, `the passed rows are let go: ${JSON.stringify(passed)}`);
  });

  // issue 30, defect 11: /context showed "notes ~2,543 ... (budget 2000 tokens)", two units read as one.
  test('notes written up to their cap run over the budget in estimated tokens, and the section says in which unit each is counted', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    const cap = Math.floor((BUDGET * 5) / 4);
    // As the extractive backend does: it fills the output cap it is given (bytes/4).
    summarizer.answer = (req, n) => (req.purpose === 'notes' ? `keep src/feature${n}.ts. `.repeat(200).slice(0, 4 * req.maxOutputTokens).trim() : `summary #${n}`);
    const out = await prepareRequest(setupFor({ window: 8000, summarizer, layers: [layer] }), argsFor(db, 's', { cache: new KernelCache() }));
    assert.equal(out.compacted, true);
    const section = out.observation.sections.find((s) => s.name === 'notes')!;
    assert.ok(section.estimated_tokens > BUDGET, `the notes (${section.estimated_tokens}) pass the budget of ${BUDGET} in estimated tokens`);
    const header = Math.ceil(Buffer.byteLength(`${NOTES_HEADER}\n\n`) / 4) + 12;
    assert.ok(section.estimated_tokens <= cap + header + 1, `but stay within the cap of ${cap} plus the header: ${section.estimated_tokens}`);
    assert.match(section.source, new RegExp(`budget ${BUDGET} model tokens`), "the budget is in the model's tokens");
    assert.match(section.source, new RegExp(`capped at ${cap} estimated tokens, bytes/4`), 'the cap, in the unit the section is measured in');
  });

  test('the first compaction writes the notes from exactly what it evicted; later requests start with them, byte for byte', async (t) => {
    const { db, summarizer, setup, cache, out, sid } = await compactedSession(t);

    const calls = summarizer.calls.filter((c) => c.purpose === 'notes');
    assert.ok(calls.length >= 2, `the eviction went in ${calls.length} chunk(s)`);
    const firstTail = Number(/request (\d+):/.exec(JSON.stringify(out.inputs.slice(4)))![1]);
    const covered = calls.flatMap(requestsIn);
    assert.deepEqual(covered, Array.from({ length: firstTail }, (_, i) => i), 'every evicted request once, in order, none of the tail');
    calls.forEach((c, i) => {
      assert.equal(c.system, NOTES_SYSTEM);
      assert.equal(c.maxOutputTokens, Math.floor((BUDGET * 5) / 4), 'the output cap is the budget plus a quarter');
      const parts = parseSummaryPrompt(c.prompt);
      assert.match(parts.instructions ?? '', new RegExp(`at most about ${BUDGET} tokens`));
      assert.match(parts.instructions ?? '', /already tells what happened/);
      assert.ok(Buffer.byteLength(parts.transcript) / 4 <= 4000 + 400, `chunk ${i} is within half the window`);
      // Each chunk carries the notes so far.
      assert.equal(parts.previousSummary ?? '', i === 0 ? '' : summarizer.answers.get(calls[i - 1]!));
    });

    const text = firstText(out.inputs);
    assert.ok(text.startsWith(`${NOTES_HEADER}\n\n`), 'the request starts with the notes');
    assert.match(NOTES_HEADER, /transcript_grep/);
    assert.match(NOTES_HEADER, /transcript_read/);
    assert.deepEqual(out.observation.sections.map((s) => s.name), ['system', 'notes', 'artifact ledger', 'summary', 'recap', 'tail']);
    const section = out.observation.sections[1]!;
    assert.match(section.source, /by client \(budget 300 model tokens asked of the summarizer; text capped at 375 estimated tokens, bytes\/4\)/);
    assert.equal(notesOf(db, sid).hints.openerSeq, tailStart(out.observation.sections), 'the notes cover history up to the tail');

    // A turn without a compaction: the same notes, the same bytes in front.
    await appendRows(db, 's', turn(40));
    const next = await prepareRequest(setup, argsFor(db, 's', { cache }));
    assert.equal(next.compacted, false);
    assert.equal(JSON.stringify(next.inputs.slice(0, out.inputs.length)), JSON.stringify(out.inputs), 'the prefix is unchanged');
    assert.equal(summarizer.calls.length, calls.length + summarizer.calls.filter((c) => c.purpose === 'rolling').length, 'no summarizer call without a compaction');
    // The very inputs sent before, made once per saved text (harness/kept-input.ts): measured
    // and encoded once, not rebuilt on every request.
    ['notes', 'artifact ledger', 'summary', 'recap'].forEach((name, i) => {
      assert.equal(out.observation.sections[i + 1]!.name, name);
      assert.equal(next.inputs[i], out.inputs[i], `the ${name} input is the object sent before`);
    });
  });

  test('the notes do not count toward the trigger', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const setup = setupFor({ window: 8000, summarizer: notesSummarizer(), layers: [layer] });
    await prepareRequest(setup, argsFor(db, 's'));
    const withNotes = inspectRequest(setup, argsFor(db, 's'));
    const without = inspectRequest({ ...setup, layers: [] }, argsFor(db, 's'));
    const notesTokens = withNotes.sections.filter((s) => s.name === 'notes' || s.name === 'artifact ledger').reduce((n, s) => n + s.estimated_tokens, 0);
    assert.equal(withNotes.estimated_input_tokens, without.estimated_input_tokens + notesTokens, 'the estimate shows them, and their ledger');
    assert.equal(withNotes.due, without.due, 'the trigger does not see them');
  });

  test("the next compaction sends only history after the notes' cut, with the notes so far", async (t) => {
    const { db, summarizer, setup, cache, sid } = await compactedSession(t);
    const first = notesOf(db, sid);
    const n = summarizer.calls.length;
    for (let i = 40; i < 80; i++) await appendRows(db, 's', turn(i));
    const out = await prepareRequest(setup, argsFor(db, 's', { cache }));
    assert.equal(out.compacted, true);
    const calls = summarizer.calls.slice(n).filter((c) => c.purpose === 'notes');
    assert.equal(parseSummaryPrompt(calls[0]!.prompt).previousSummary, first.text);
    const covered = calls.flatMap(requestsIn);
    const firstRow = rowsOfSession(db, 's').find((r) => r.seq === first.hints.openerSeq)!;
    const from = Number(/request (\d+):/.exec(JSON.stringify(firstRow.body))![1]);
    assert.equal(covered[0], from, 'starts where the notes stopped');
    assert.equal(covered.length, new Set(covered).size, 'nothing twice');
    assert.ok(notesOf(db, sid).hints.openerSeq > first.hints.openerSeq);
  });

  test('a failed rewrite keeps the old notes, never fails the turn, says so, and the next compaction covers what it missed', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = notesSummarizer();
    const setup = setupFor({ window: 8000, summarizer, layers: [layer] });
    const cache = new KernelCache();
    const errors: string[] = [];
    const logged = { ...setup, onLayerError: (name: string) => void errors.push(name) };
    await prepareRequest(logged, argsFor(db, 's', { cache }));
    const sid = argsFor(db, 's').session.sid;
    const good = notesOf(db, sid);

    for (let i = 40; i < 80; i++) await appendRows(db, 's', turn(i));
    const answer = summarizer.answer!;
    summarizer.answer = (req, n) => {
      if (req.purpose === 'notes') throw new Error('notes backend down');
      return answer(req, n);
    };
    const out = await prepareRequest(logged, argsFor(db, 's', { cache }));
    assert.equal(out.compacted, true, 'the strategy committed; the turn goes on');
    assert.equal(firstText(out.inputs), `${NOTES_HEADER}\n\n${good.text}`, 'the old notes go out');
    assert.ok(out.observation.notes.some((x) => /layer notes could not update after this compaction.*notes backend down/.test(x)), out.observation.notes.join('\n'));
    assert.deepEqual(errors, ['notes'], 'logged once');
    const failed = notesOf(db, sid);
    assert.equal(failed.text, good.text);
    assert.deepEqual(failed.cut, good.cut, 'the cut stays where the good notes end');
    // The ledger needs no model: it took in this compaction's eviction all the same.
    const ledgerPaths = (state: NotesState): string[] => {
      const l = readLedger(state.ledger);
      assert.ok(!('unreadable' in l));
      return l.files.map((f) => f.path);
    };
    assert.ok(ledgerPaths(failed).length > ledgerPaths(good).length, 'the ledger grew past the failed rewrite');
    const later = inspectRequest(logged, argsFor(db, 's', { cache }));
    assert.ok(later.notes.some((x) => /not rewritten at the last compaction \(notes backend down\)/.test(x)), 'later observations still say so');

    summarizer.answer = answer;
    const n = summarizer.calls.length;
    for (let i = 80; i < 120; i++) await appendRows(db, 's', turn(i));
    await prepareRequest(logged, argsFor(db, 's', { cache }));
    const recovered = summarizer.calls.slice(n).filter((c) => c.purpose === 'notes').flatMap(requestsIn);
    const firstRow = rowsOfSession(db, 's').find((r) => r.seq === good.hints.openerSeq)!;
    assert.equal(recovered[0], Number(/request (\d+):/.exec(JSON.stringify(firstRow.body))![1]), 'the missed history is covered now');
    assert.equal(notesOf(db, sid).failure, null);
    // The recovery re-read history the ledger already held: nothing in it is counted twice.
    const final = readLedger(notesOf(db, sid).ledger);
    assert.ok(!('unreadable' in final) && final.files.length > 0 && final.files.every((f) => f.reads === 1), 'each file read once is counted once');
  });

  test('an empty or garbage answer is a failed rewrite', async (t) => {
    for (const bad of ['   ', '<transcript>\n¶user: request 0\n</transcript>', 'ok\u0000\u0001']) {
      const db = tempDb(t);
      await sessionWithTurns(db, 's', 40);
      const summarizer = notesSummarizer();
      summarizer.answer = (req, n) => (req.purpose === 'notes' ? bad : `summary #${n}`);
      const out = await prepareRequest(setupFor({ window: 8000, summarizer, layers: [layer] }), argsFor(db, 's'));
      assert.equal(out.compacted, true);
      assert.ok(!firstText(out.inputs).startsWith(NOTES_HEADER), 'no notes were written');
      assert.ok(out.observation.notes.some((x) => /layer notes could not update/.test(x)), JSON.stringify(bad));
      const stored = loadNotes(db, argsFor(db, 's').session.sid);
      assert.ok(stored !== undefined && !('unreadable' in stored) && stored.text === '' && stored.failure !== null);
    }
    assert.equal(notesAnswerProblem('- src/a.ts: decided to keep it'), null);
  });

  test('a fork has no notes: its first compaction writes them from all it evicted', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 'p', 40);
    const setup = setupFor({ window: 8000, summarizer: notesSummarizer(), layers: [layer] });
    await prepareRequest(setup, argsFor(db, 'p'));
    const branch = forkSession(db, 'p', { branch: 'b' });
    assert.equal(loadNotes(db, branch.sid), undefined, 'no notes row in the branch');
    assert.ok(!inspectRequest(setup, argsFor(db, 'b')).sections.some((x) => x.name === 'notes'), 'the branch starts without notes');
    const summarizer = notesSummarizer();
    const out = await prepareRequest({ ...setup, summarizer }, argsFor(db, 'b'));
    assert.equal(out.compacted, true);
    const calls = summarizer.calls.filter((c) => c.purpose === 'notes');
    assert.equal(parseSummaryPrompt(calls[0]!.prompt).previousSummary, undefined, 'from scratch');
    assert.equal(calls.flatMap(requestsIn)[0], 0, "from the branch's first row");
    assert.ok(firstText(out.inputs).startsWith(NOTES_HEADER));
  });

  test("a transcript that no longer matches the notes' cut leaves them out, and the next compaction rewrites them from scratch", async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const setup = setupFor({ window: 8000, summarizer: notesSummarizer(), layers: [layer] });
    await prepareRequest(setup, argsFor(db, 's'));
    const sid = argsFor(db, 's').session.sid;
    // Rewrite an early user input behind the daemon's back, as an import would.
    db.prepare("UPDATE transcript SET legacy_text = 'something else' WHERE sid = ? AND seq = (SELECT min(seq) FROM transcript WHERE sid = ? AND row_class = 'user')").run(sid, sid);
    db.prepare('UPDATE sessions SET rewrites = rewrites + 1 WHERE sid = ?').run(sid);
    const seen = inspectRequest(setup, argsFor(db, 's'));
    assert.ok(!seen.sections.some((s) => s.name === 'notes'));
    assert.ok(seen.notes.some((x) => /notes no longer match the transcript/.test(x)));
    const summarizer = notesSummarizer();
    const out = await prepareRequest({ ...setup, summarizer }, argsFor(db, 's', { force: true }));
    assert.equal(out.compacted, true);
    const calls = summarizer.calls.filter((c) => c.purpose === 'notes');
    assert.equal(parseSummaryPrompt(calls[0]!.prompt).previousSummary, undefined);
    assert.equal(calls.flatMap(requestsIn)[0], 0);
  });

  test('the notes belong to the session: another strategy keeps sending them and extends them at its compaction', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = notesSummarizer();
    await prepareRequest(setupFor({ window: 8000, summarizer, layers: [layer] }), argsFor(db, 's'));
    const sid = argsFor(db, 's').session.sid;
    const written = notesOf(db, sid);
    // A strategy with no saved state of its own: it keeps the newest 8 turns and drops the rest.
    let keep = 0;
    const newest: Strategy = {
      name: 'newest-turns',
      settings: rolling.settings,
      project(input) {
        const rows = rowsOfSession(input.db, input.session.name);
        const users = rows.filter((r) => r.row_class === 'user');
        const from = keep === 0 ? 0 : rows.indexOf(users[Math.max(0, users.length - keep)]!);
        const inputs = forModel(rows.slice(from), input.target);
        return { inputs, sections: [], estimate: 100, due: false, notes: [] };
      },
      async compact() {
        return { compacted: true, commit: () => void (keep = 8), reason: null, backend: null, evictedRows: 0 };
      },
    };
    const switched = setupFor({ window: 8000, summarizer, layers: [layer], strategy: newest });
    assert.equal(firstText((await prepareRequest(switched, argsFor(db, 's'))).inputs), `${NOTES_HEADER}\n\n${written.text}`, 'the notes survive the switch');
    for (let i = 40; i < 50; i++) await appendRows(db, 's', turn(i));
    const n = summarizer.calls.length;
    const out = await prepareRequest(switched, argsFor(db, 's', { force: true }));
    assert.equal(out.compacted, true);
    const covered = summarizer.calls.slice(n).flatMap(requestsIn);
    const firstRow = rowsOfSession(db, 's').find((r) => r.seq === written.hints.openerSeq)!;
    assert.equal(covered[0], Number(/request (\d+):/.exec(JSON.stringify(firstRow.body))![1]), 'from where the notes stopped');
    assert.equal(covered[covered.length - 1], 41, 'up to what the new strategy evicted (it keeps requests 42-49)');
  });

  test('the notes and their ledger survive rolling -> lcm -> snapcompact: each starts its requests with them and extends them', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = notesSummarizer();
    const sid = argsFor(db, 's').session.sid;
    const vision = { model: { id: 'claude-test', provider: 'anthropic', context_window: 200_000, input: ['text', 'image'] as const }, modelId: 'claude-test' };
    let written = '';
    for (const [k, strategy] of [rolling, lcm, snapcompact].entries()) {
      if (k > 0) { for (let i = 40 + 40 * (k - 1); i < 40 + 40 * k; i++) await appendRows(db, 's', turn(i)); }
      const setup = { ...setupFor({ window: 8000, summarizer, layers: [layer], strategy }), ...(strategy === snapcompact ? vision : {}) };
      const before = inspectRequest(setup, argsFor(db, 's'));
      if (written !== '') assert.equal(before.sections[1]?.name, 'notes', `${strategy.name} sends the notes it found`);
      const out = await prepareRequest(setup, argsFor(db, 's', { force: true }));
      assert.equal(out.compacted, true, `${strategy.name}: ${out.reason ?? ''}`);
      const now = notesOf(db, sid).text;
      assert.ok(now.startsWith(written), `${strategy.name} extends the notes`);
      assert.ok(now.length > written.length);
      assert.equal(firstText(out.inputs), `${NOTES_HEADER}\n\n${now}`);
      written = now;
      // The ledger keeps every file the history read, from the first compaction on, and the
      // request shows it as its own section right after the notes.
      const saved = notesOf(db, sid);
      const ledger = readLedger(saved.ledger);
      assert.ok(!('unreadable' in ledger));
      const paths = new Set(ledger.files.map((f) => f.path));
      assert.ok(paths.has('call-0.ts'), `${strategy.name}: the first compaction's files are still in the ledger`);
      const newest = Math.max(...[...paths].map((p) => Number(/call-(\d+)\.ts/.exec(p)![1])));
      assert.ok(newest >= 30 + 40 * k, `${strategy.name}: the ledger grew with this compaction (newest file call-${newest}.ts)`);
      assert.equal(out.observation.sections[2]?.name, 'artifact ledger');
      assert.match(JSON.stringify(out.inputs[1]), /Artifacts so far/);
    }
  });

  test('capability notices never reach the notes summarizer', async (t) => {
    const db = tempDb(t);
    openSession(db, { session: 's' });
    for (let i = 0; i < 20; i++) await appendRows(db, 's', turn(i));
    appendNotice(db, argsFor(db, 's').session.sid, { notice: 'capabilities_changed', context: 'SECRET-CAPABILITY-CONTEXT' });
    for (let i = 20; i < 40; i++) await appendRows(db, 's', turn(i));
    const summarizer = notesSummarizer();
    await prepareRequest(setupFor({ window: 8000, summarizer, layers: [layer] }), argsFor(db, 's'));
    const notes = summarizer.calls.filter((c) => c.purpose === 'notes');
    assert.ok(notes.flatMap(requestsIn).includes(20), 'the rows around the notice were read');
    assert.ok(summarizer.calls.every((c) => !c.prompt.includes('SECRET-CAPABILITY-CONTEXT')));
  });

  test('settings: budgetTokens is a positive integer, 2000 by default', () => {
    assert.equal(NotesSettings.parse({}).budgetTokens, 2000);
    assert.equal(NotesSettings.safeParse({ budgetTokens: 0 }).success, false);
    assert.equal(NotesSettings.safeParse({ budgetTokens: 1.5 }).success, false);
    assert.equal(NotesSettings.safeParse({ budget: 10 }).success, false, 'unknown keys are errors');
  });
});

describe('what a compaction evicted', () => {
  const target = plainTarget('s');
  async function rows(t: Parameters<typeof tempDb>[0], rowsIn: Parameters<typeof appendRows>[2]): Promise<StoredRow[]> {
    const db = tempDb(t);
    openSession(db, { session: 's' });
    await appendRows(db, 's', rowsIn);
    return rowsOfSession(db, 's');
  }

  test('the longest tail the request ends with, at a user row', async (t) => {
    const r = await rows(t, [...turn(0), ...turn(1), ...turn(2)]);
    const tail = forModel(r.slice(4), target);
    const request: PlainInput[] = [{ role: 'user', content: [{ type: 'text', text: 'summary' }] }, ...tail];
    assert.equal(keptFrom(r, request, target), 4);
    assert.equal(keptFrom(r, forModel(r, target), target), 0, 'nothing evicted');
    assert.equal(keptFrom(r, [request[0]!], target), r.length, 'everything evicted');
  });

  test('a tail that starts inside a unit moves forward to the next user row', async (t) => {
    const r = await rows(t, [
      user('one long task'),
      assistant('step 1', ['c1']),
      toolResult('c1', 'out 1'),
      assistant('step 2', ['c2']),
      toolResult('c2', 'out 2'),
      user('follow-up'),
      assistant('done'),
    ]);
    // The strategy kept the opener and the second exchange of the first unit, then the follow-up.
    const request = [...forModel([r[0]!], target), ...forModel(r.slice(3), target)];
    assert.equal(keptFrom(r, request, target), 5, 'the first unit counts as evicted, the follow-up is kept');
    // Only exchanges of one unit: nothing after the cut opens at a user row.
    const single = r.slice(0, 5);
    assert.equal(keptFrom(single, [...forModel([single[0]!], target), ...forModel(single.slice(3), target)], target), 5);
  });
});

test('on a small window the notes budget is at most half the room above the trigger; a large one keeps the setting', () => {
  const w = (window: number | null, triggerPercent = 80, ratio = 1) => ({ window, source: 'config' as const, triggerPercent, tailPercent: 25, ratio });
  assert.equal(notesBudget(2000, w(200_000)), 2000);
  assert.equal(notesBudget(2000, w(null)), 2000);
  assert.equal(notesBudget(2000, w(8000)), 800);
  assert.equal(notesBudget(2000, w(8000, 90)), 400);
  assert.equal(notesBudget(2000, w(8000, 80, 1.3)), 615);
  // The trigger plus the notes at their output cap stays under the window.
  assert.ok(0.8 * 8000 + notesOutputCap(notesBudget(2000, w(8000))) < 8000);
  assert.equal(notesBudget(2000, w(500)), 100);
});
