// rolling through the engine (prepareRequest) against a real SQLite file: the four parts, the
// trigger, whole-unit cuts, chunked summaries, failure handling, state checks and old formats.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PlainInput } from '../../protocol/prepared.ts';
import { loadRollingState, type RollingState } from '../../storage/state/rolling.ts';
import { appendNotice, appendRows, forkSession } from '../../storage/transcript/write.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { inputsTokens, textTokens } from '../../strategies/estimate.ts';
import { inspectRequest, planCompaction, prepareRequest, adoptSession, LATCH_LIMIT } from '../../strategies/prepare.ts';
import { RECAP_HEADER, SUMMARY_HEADER } from '../../strategies/rolling/rolling.ts';
import { parseSummaryPrompt } from '../../strategies/summarizer/prompt-format.ts';
import { assistant, imageIn, pngBytes, tempDb, toolResult, user } from '../storage/factories.ts';
import { argsFor, assertCallsPaired, RecordingSummarizer, sessionWithTurns, setupFor, turn } from './engine-fixtures.ts';
import type { Db } from '../../storage/db.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { recordingDb } from '../storage/recording-db.ts';

/** The saved rolling state, which the test expects to be readable. */
function stateOf(db: Db, sid: number): RollingState {
  const s = loadRollingState(db, sid);
  assert.ok(s !== undefined && !('unreadable' in s), 'a readable rolling state');
  return s;
}

/** Writes a state in the item-count cut format older builds saved. */
function saveLegacyState(db: Db, sid: number, s: { summary: string; items: number; cutSeq: number; backend: string | null }): void {
  db.prepare(
    `INSERT INTO rolling_state (sid, summary, cut, cut_seq, backend, updated_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (sid) DO UPDATE SET summary = excluded.summary, cut = excluded.cut, cut_seq = excluded.cut_seq, backend = excluded.backend, updated_at = excluded.updated_at`,
  ).run(sid, s.summary, JSON.stringify({ items: s.items }), s.cutSeq, s.backend, Date.now());
}

function texts(inputs: readonly PlainInput[]): string[] {
  return inputs.map((i) => i.content.map((p) => (p.type === 'text' ? p.text : p.type === 'tool_call' ? `call ${p.id}` : p.type === 'tool_result' ? `result ${p.call_id}` : p.type)).join(' | '));
}

describe('rolling', () => {
  test('below the trigger the request is the system prompt and the history unchanged', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 3);
    const summarizer = new RecordingSummarizer();
    const out = await prepareRequest(setupFor({ window: 100_000, summarizer }), argsFor(db, 's'));
    assert.equal(out.compacted, false);
    assert.equal(out.observation.due, false);
    assert.equal(summarizer.calls.length, 0);
    assert.deepEqual(out.observation.sections.map((s) => s.name), ['system', 'tail']);
    // Per turn: the request, the assistant call, the tool result, the closing reply.
    assert.equal(out.inputs.length, 3 * 4);
  });

  test('at the trigger it compacts into summary, recap and tail, in that order, keeping calls with results', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    const setup = setupFor({ window: 8000, summarizer });
    const before = inspectRequest(setup, argsFor(db, 's'));
    assert.equal(before.due, true);
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.deepEqual(out.observation.sections.map((s) => s.name), ['system', 'summary', 'recap', 'tail']);
    assert.ok(texts(out.inputs)[0]!.startsWith(SUMMARY_HEADER));
    assert.ok(texts(out.inputs)[1]!.startsWith(RECAP_HEADER));
    // The tail starts with a whole unit: a user request.
    assert.match(texts(out.inputs)[2]!, /^request \d+:/);
    assertCallsPaired(out.inputs);
    assert.ok(out.observation.estimated_input_tokens < before.estimated_input_tokens);
    const tail = out.observation.sections.find((s) => s.name === 'tail')!;
    // The tail keeps about tailPercent of the window: at most 25% of 8000 plus one unit.
    assert.ok(tail.estimated_tokens <= 2000 + 400, `tail ~${tail.estimated_tokens} tokens`);
    assert.ok(out.observation.last_compaction?.ok);
    assert.equal(out.observation.last_compaction?.backend, 'client');
    // The log's cost is what the summarizer was sent and answered, every chunk counted.
    assert.ok(summarizer.calls.length > 0);
    assert.equal(out.summarizerCalls, summarizer.calls.length);
    assert.equal(out.observation.last_compaction?.summarizer_tokens_in, summarizer.calls.reduce((n, c) => n + textTokens(c.system) + textTokens(c.prompt), 0));
    assert.equal(out.observation.last_compaction?.summarizer_tokens_out, summarizer.calls.reduce((n, _c, i) => n + Math.ceil(`summary #${i + 1}`.length / 4), 0));
  });

  test('the recap quotes the latest evicted user messages, at most three, each bounded', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40, 900);
    const out = await prepareRequest(setupFor({ window: 8000 }), argsFor(db, 's'));
    const recap = texts(out.inputs)[1]!;
    const quoted = recap.split('\n\n').slice(1);
    assert.equal(quoted.length, 3);
    for (const q of quoted) assert.ok([...q].length <= 400 + 3, `quote of ${[...q].length} chars`);
    const tailFirst = Number(/^request (\d+):/.exec(texts(out.inputs)[2]!)![1]);
    assert.match(quoted[2]!, new RegExp(`^> request ${tailFirst - 1}:`));
  });

  test('a long eviction is summarized in chunks of at most half the window, carrying the summary along', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 120);
    const summarizer = new RecordingSummarizer();
    await prepareRequest(setupFor({ window: 8000, summarizer }), argsFor(db, 's'));
    assert.ok(summarizer.calls.length >= 3, `${summarizer.calls.length} calls`);
    for (const [i, call] of summarizer.calls.entries()) {
      const parts = parseSummaryPrompt(call.prompt);
      assert.ok(Buffer.byteLength(parts.transcript) / 4 <= 4000 + 400, `chunk ${i} ~${Buffer.byteLength(parts.transcript) / 4} tokens`);
      assert.equal(parts.previousSummary ?? '', i === 0 ? '' : `summary #${i}`);
      assert.equal(call.purpose, 'rolling');
      assert.ok(call.maxOutputTokens >= 128 && call.maxOutputTokens <= 2048);
    }
    // Chunks cover the eviction in order.
    const firstRequests = summarizer.calls.map((c) => Number(/request (\d+):/.exec(parseSummaryPrompt(c.prompt).transcript)![1]));
    assert.deepEqual([...firstRequests].sort((a, b) => a - b), firstRequests);
    assert.equal(firstRequests[0], 0);
  });

  test('the summarizer never sees image bytes or capability notices, and is told the transcript is data', async (t) => {
    const db = tempDb(t);
    openSession(db, { session: 's' });
    const png = await pngBytes(600, 400);
    await appendRows(db, 's', [user('look at this screenshot', { images: [imageIn(png, 'image/png')] })]);
    appendNotice(db, argsFor(db, 's').session.sid, { notice: 'capabilities_changed', context: 'SECRET-CAPABILITY-CONTEXT' });
    for (let i = 0; i < 30; i++) await appendRows(db, 's', turn(i));
    const summarizer = new RecordingSummarizer();
    await prepareRequest(setupFor({ window: 8000, summarizer }), argsFor(db, 's'));
    const call = summarizer.calls[0]!;
    assert.match(call.system, /never instructions to you/);
    assert.match(call.prompt, /look at this screenshot \[image [0-9a-f]{8} 600x400\]/);
    assert.ok(!call.prompt.includes(png.toString('base64').slice(0, 64)), 'no image bytes');
    assert.ok(!call.prompt.includes('SECRET-CAPABILITY-CONTEXT'), 'no capability notice');
  });

  test('a second compaction folds the previous summary into the new one', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    const setup = setupFor({ window: 8000, summarizer });
    const cache = new KernelCache();
    await prepareRequest(setup, argsFor(db, 's', { cache }));
    const n = summarizer.calls.length;
    for (let i = 40; i < 80; i++) await appendRows(db, 's', turn(i));
    const out = await prepareRequest(setup, argsFor(db, 's', { cache }));
    assert.equal(out.compacted, true);
    assert.equal(parseSummaryPrompt(summarizer.calls[n]!.prompt).previousSummary, `summary #${n}`);
    const state = stateOf(db, argsFor(db, 's').session.sid);
    assert.equal(state.summary, `summary #${summarizer.calls.length}`);
    assert.ok('format' in state.cut && state.cut.users > 40);
  });

  test('a summarizer failure writes nothing: same request as before, transcript untouched', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    const setup = setupFor({ window: 8000, summarizer });
    const sid = argsFor(db, 's').session.sid;
    await prepareRequest(setup, argsFor(db, 's'));
    for (let i = 40; i < 80; i++) await appendRows(db, 's', turn(i));
    const stateBefore = loadRollingState(db, sid);
    const projected = inspectRequest(setup, argsFor(db, 's'));
    summarizer.failWith = 'provider answered 500';
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, false);
    assert.match(out.observation.failure ?? '', /provider answered 500/);
    assert.deepEqual(loadRollingState(db, sid), stateBefore);
    assert.equal(out.observation.estimated_input_tokens, projected.estimated_input_tokens);
    assert.equal(out.observation.auto_failures, 1);
    assert.equal(out.observation.last_compaction?.ok, false);
    assert.ok((out.observation.last_compaction?.summarizer_tokens_in ?? 0) > 100, 'the prompt that was sent is counted');
  });

  test('rows that move while the summary is written void the compaction: nothing is committed, nothing latches', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 5);
    await appendRows(db, 's', [assistant('starting a slow build', ['slow']), user('typed while it ran')]);
    for (let i = 5; i < 40; i++) await appendRows(db, 's', turn(i));
    let settled = false;
    const summarizer = {
      backend: 'client' as const,
      model: 'test',
      async summarize() {
        // The late result arrives while the model is writing: it settles beside its call.
        if (!settled) await appendRows(db, 's', [toolResult('slow', 'build finished')]);
        settled = true;
        return { text: 'summary', backend: 'client' as const, model: 'test', outputTokens: 2 };
      },
    };
    const setup = setupFor({ window: 8000, summarizer });
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, false);
    assert.match(out.observation.failure ?? '', /history moved while the summary was written/);
    assert.equal(loadRollingState(db, argsFor(db, 's').session.sid), undefined, 'nothing committed');
    assert.equal(out.observation.auto_failures, 0);
    const again = await prepareRequest(setup, argsFor(db, 's', { force: true }));
    assert.equal(again.compacted, true, 'the next attempt, on the settled history, commits');
  });

  test('after three failed automatic compactions it stops trying until a forced compaction', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    summarizer.failWith = 'down';
    const setup = setupFor({ window: 8000, summarizer });
    for (let i = 0; i < LATCH_LIMIT; i++) await prepareRequest(setup, argsFor(db, 's'));
    const calls = summarizer.calls.length;
    const latched = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(summarizer.calls.length, calls, 'no summarizer call while latched');
    assert.equal(latched.observation.latched, true);
    assert.match(latched.observation.failure ?? '', /paused/);
    summarizer.failWith = undefined;
    const forced = await prepareRequest(setup, argsFor(db, 's', { force: true }));
    assert.equal(forced.compacted, true);
    assert.equal(forced.observation.latched, false);
    assert.equal(forced.observation.auto_failures, 0);
  });

  test('a request compacts at most once and sends the second projection even if still due', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 10);
    // The newest unit alone exceeds the trigger (a paste under a raised output cap): the
    // compaction cannot get under it.
    await appendRows(db, 's', [user(`huge ${'x'.repeat(40_000)}`)]);
    const summarizer = new RecordingSummarizer();
    const out = await prepareRequest(setupFor({ window: 8000, maxToolOutput: 1_000_000, summarizer }), argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.equal(out.observation.due, true);
    assert.equal(summarizer.calls.length, 1);
    // The oversized unit is whole at the end of the request, and /context says it does not fit.
    assert.match(texts(out.inputs).at(-1)!, /^huge x+$/);
    assert.ok(out.observation.notes.some((n) => /larger than the 8000-token window/.test(n)), JSON.stringify(out.observation.notes));
  });

  test('nothing to evict is said plainly, never reported as a compaction, and does not latch', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 0);
    await appendRows(db, 's', [user(`only ${'x'.repeat(40_000)}`)]);
    const summarizer = new RecordingSummarizer();
    const setup = setupFor({ window: 8000, maxToolOutput: 1_000_000, summarizer });
    const cache = new KernelCache();
    for (let i = 0; i < 4; i++) {
      const out = await prepareRequest(setup, argsFor(db, 's', { cache }));
      assert.equal(out.compacted, false);
      assert.equal(out.observation.failure, 'cannot compact further without splitting the newest exchange');
      assert.equal(out.observation.latched, false);
      assert.equal(out.observation.last_compaction, null);
    }
    assert.equal(summarizer.calls.length, 0);
  });

  test('a compaction that would not shrink the request writes nothing', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    summarizer.answer = () => 'y'.repeat(200_000);
    const out = await prepareRequest(setupFor({ window: 8000, summarizer }), argsFor(db, 's'));
    assert.equal(out.compacted, false);
    assert.match(out.observation.failure ?? '', /nothing worth evicting yet: the request would not get smaller/);
    assert.ok(summarizer.calls.length > 0, 'the summarizer ran');
    assert.equal(out.observation.auto_failures, 0, 'a compaction that gained nothing is no failure');
    assert.equal(out.observation.last_compaction, null, 'and is not logged as one');
    assert.equal(loadRollingState(db, argsFor(db, 's').session.sid), undefined);
  });

  test('consecutive prepares with nothing new are identical', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const setup = setupFor({ window: 8000 });
    const cache = new KernelCache();
    await prepareRequest(setup, argsFor(db, 's', { cache }));
    const a = await prepareRequest(setup, argsFor(db, 's', { cache }));
    const b = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(JSON.stringify(a.inputs), JSON.stringify(b.inputs));
    assert.equal(a.system, b.system);
  });

  test('the system prompt kept in the kernel follows the instructions: the same text keeps it, another replaces it', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 3);
    const setup = setupFor({ window: 100_000 });
    const cache = new KernelCache();
    const rules = (n: number): string => Array.from({ length: 200 }, (_, i) => `rule ${i}: keep going`).join('\n') + ` (v${n})`;
    const a = await prepareRequest(setup, argsFor(db, 's', { cache, instructions: rules(1) }));
    // The same text in a new string, as every call's JSON brings it.
    const same = await prepareRequest(setup, argsFor(db, 's', { cache, instructions: [rules(1)].join('') }));
    const b = await prepareRequest(setup, argsFor(db, 's', { cache, instructions: rules(2) }));
    assert.equal(same.system, a.system);
    assert.equal(same.observation.sections[0]!.estimated_tokens, a.observation.sections[0]!.estimated_tokens);
    assert.ok(b.system.endsWith('(v2)'), 'new instructions are sent at once');
    assert.equal(b.observation.sections[0]!.estimated_tokens, a.observation.sections[0]!.estimated_tokens, 'and measured (the same length here)');
    const longer = await prepareRequest(setup, argsFor(db, 's', { cache, instructions: `${rules(3)} and one more rule` }));
    assert.ok(longer.observation.sections[0]!.estimated_tokens > a.observation.sections[0]!.estimated_tokens, 'longer instructions pin more');
  });

  test('a nothing-due prepare of a warm kernel reads from one snapshot, and the summary only after a write', async (t) => {
    const base = tempDb(t);
    await sessionWithTurns(base, 's', 40);
    const { db, executed, autocommit } = recordingDb(base);
    const setup = setupFor({ window: 8000 });
    const cache = new KernelCache();
    const args = argsFor(db, 's', { cache });
    assert.equal((await prepareRequest(setup, args)).compacted, true);
    await prepareRequest(setup, args);
    executed.length = 0;
    autocommit.length = 0;
    const again = await prepareRequest(setup, args);
    assert.equal(again.compacted, false);
    assert.ok(executed.length > 0);
    assert.deepEqual(autocommit.filter((sql) => sql !== 'BEGIN'), [], 'frame, warm check and projection share one transaction');
    assert.ok(!executed.some((sql) => /FROM rolling_state/.test(sql)), 'the parsed summary is reused while nothing wrote it');
    // Any writer, even a raw UPDATE, is seen by the next prepare.
    base.prepare("UPDATE rolling_state SET summary = 'rewritten by hand' WHERE sid = ?").run(args.session.sid);
    const after = await prepareRequest(setup, args);
    assert.match(JSON.stringify(after.inputs), /rewritten by hand/);
  });

  test('a fork starts without rolling state', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    await prepareRequest(setupFor({ window: 8000 }), argsFor(db, 's'));
    forkSession(db, 's', { branch: 'b' });
    const branch = inspectRequest(setupFor({ window: 1_000_000 }), argsFor(db, 'b'));
    assert.deepEqual(branch.sections.map((s) => s.name), ['system', 'tail']);
  });

  test('a saved cut that no longer matches the transcript is ignored, then replaced, not deleted', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const setup = setupFor({ window: 8000 });
    await prepareRequest(setup, argsFor(db, 's'));
    const sid = argsFor(db, 's').session.sid;
    const saved = stateOf(db, sid);
    // Rewrite an evicted user message, as any rewriting path must: bump the rewrite counter.
    db.prepare("UPDATE transcript SET legacy_text = 'rewritten' WHERE seq = (SELECT min(seq) FROM transcript WHERE sid = ? AND row_class = 'user')").run(sid);
    db.prepare('UPDATE sessions SET rewrites = rewrites + 1 WHERE sid = ?').run(sid);
    const seen = inspectRequest(setup, argsFor(db, 's'));
    assert.ok(seen.notes.some((n) => /no longer matches/.test(n)));
    assert.ok(!seen.sections.some((s) => s.name === 'summary'));
    assert.deepEqual(loadRollingState(db, sid), saved, 'project never deletes state');
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.notDeepEqual(stateOf(db, sid).cut, saved.cut);
  });

  test('a fresh kernel adopts the saved state; after rows move, the fingerprint is checked and still holds', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    await appendRows(db, 's', [assistant('running a long tool', ['slow']), user('typed while it ran')]);
    const setup = setupFor({ window: 8000 });
    const compacted = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(compacted.compacted, true);
    const summary = (o: { sections: Array<{ name: string; source: string }> }) => o.sections.find((x) => x.name === 'summary')?.source;
    // A new kernel (empty cache), as after a restart: the state is used as saved.
    assert.equal(summary(inspectRequest(setup, argsFor(db, 's'))), summary(compacted.observation));
    // The late result settles beside its call: rows move and the rewrite counter goes up; the
    // user messages before the cut are unchanged, so the full check accepts the state.
    await appendRows(db, 's', [toolResult('slow', 'done at last')]);
    const after = inspectRequest(setup, argsFor(db, 's'));
    assert.equal(summary(after), summary(compacted.observation));
    assert.deepEqual(after.notes, []);
  });

  test('a cut saved as an item count is checked the old way, then rewritten as a user cut on adoption', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 10);
    const sid = argsFor(db, 's').session.sid;
    // 4 turns = 4 user, 4 assistant+call, 4 tool, 4 assistant = 16 items before turn 4's request.
    const fifthRequest = (db.prepare("SELECT seq FROM transcript WHERE sid = ? AND row_class = 'user' ORDER BY seq LIMIT 1 OFFSET 4").get(sid) as { seq: number }).seq;
    saveLegacyState(db, sid, { summary: 'old-format summary', items: 16, cutSeq: fifthRequest, backend: 'extractive' });
    const setup = setupFor({ window: 1_000_000 });
    const seen = inspectRequest(setup, argsFor(db, 's'));
    assert.match(seen.sections.find((s) => s.name === 'summary')!.source, /4 user message/);
    assert.ok('items' in stateOf(db, sid).cut, 'project does not rewrite');
    adoptSession(setup, argsFor(db, 's'));
    const cut = stateOf(db, sid).cut;
    assert.ok('format' in cut && cut.users === 4);
    const after = inspectRequest(setup, argsFor(db, 's'));
    assert.deepEqual(after.sections.map((s) => [s.name, s.estimated_tokens]), seen.sections.map((s) => [s.name, s.estimated_tokens]));

    // An item count that falls inside a unit does not match.
    saveLegacyState(db, sid, { summary: 'bad', items: 17, cutSeq: fifthRequest, backend: null });
    assert.ok(inspectRequest(setup, argsFor(db, 's')).notes.some((n) => /no longer matches/.test(n)));
  });

  test('without a window nothing compacts automatically, /context says so, and a forced compaction still works', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const setup = setupFor({ window: undefined });
    const auto = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(auto.compacted, false);
    assert.equal(auto.observation.window, null);
    assert.equal(auto.observation.window_source, 'unknown');
    assert.ok(auto.observation.notes.some((n) => /window unknown/.test(n)));
    const forced = await prepareRequest(setup, argsFor(db, 's', { force: true }));
    assert.equal(forced.compacted, true);
  });

  test('the dry run says what would be evicted and writes nothing', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    const setup = setupFor({ window: 8000, summarizer });
    const { dryRun } = planCompaction(setup, argsFor(db, 's'));
    assert.ok(dryRun !== null && dryRun.reason === null);
    const { plan } = dryRun;
    assert.ok(plan.evict_rows > 0 && plan.tail_rows > 0);
    assert.equal(plan.evict_rows + plan.tail_rows, 160);
    assert.ok(plan.estimated_tokens_after < plan.estimated_tokens_before);
    assert.equal(summarizer.calls.length, 0);
    assert.equal(loadRollingState(db, argsFor(db, 's').session.sid), undefined);
  });

  test('a host with no strategy sends the history uncompacted', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const out = await prepareRequest(setupFor({ window: 8000, strategy: null }), argsFor(db, 's'));
    assert.equal(out.compacted, false);
    assert.equal(out.observation.strategy, null);
    assert.equal(out.inputs.length, 40 * 4);
    assert.ok(inputsTokens(out.inputs) > 8000);
  });

  test("with no strategy, a kernel extends the history it projected; its requests equal a fresh kernel's", async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 10);
    const setup = setupFor({ window: 200_000, strategy: null });
    const cache = new KernelCache();
    const first = await prepareRequest(setup, argsFor(db, 's', { cache }));
    for (let round = 0; round < 3; round++) {
      await appendRows(db, 's', [user(`next ${round}`), assistant(`answer ${round}`, [`call-${round}`]), toolResult(`call-${round}`, `result ${round}`)]);
      const warm = await prepareRequest(setup, argsFor(db, 's', { cache }));
      const fresh = await prepareRequest(setup, argsFor(db, 's'));
      assert.deepEqual(warm.inputs, fresh.inputs);
      assert.equal(warm.observation.estimated_input_tokens, fresh.observation.estimated_input_tokens);
      assert.equal(warm.inputs.length, first.inputs.length + 3 * (round + 1));
      // Projected once: the rows the first request carried are the same objects in this one.
      assert.ok(first.inputs.every((input, i) => warm.inputs[i] === input), 'the earlier rows were not projected again');
    }
  });
});
