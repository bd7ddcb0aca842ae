// A history many stages long past the saved state is compacted in stages before the request
// (strategies/catch-up.ts, prepare.ts compactInStages), through the engine against a real SQLite
// file: where a stage ends, that no compaction is handed the whole history, that nothing evicted
// is skipped, and how the latch and a failing stage stop the stages.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Db } from '../../storage/db.ts';
import { setAutoFailures } from '../../storage/log/compaction-log.ts';
import { loadRollingState } from '../../storage/state/rolling.ts';
import { snapshot } from '../../storage/transcript/history.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { CATCH_UP_ROWS, STAGE_ROWS, stageHead } from '../../strategies/catch-up.ts';
import type { Strategy, StrategyInput } from '../../strategies/contract.ts';
import { LATCH_LIMIT, prepareRequest } from '../../strategies/prepare.ts';
import { rolling } from '../../strategies/rolling/rolling.ts';
import { parseSummaryPrompt } from '../../strategies/summarizer/prompt-format.ts';
import { tempDb } from '../storage/factories.ts';
import { argsFor, assertCallsPaired, RecordingSummarizer, setupFor, strategyInput, turn } from './engine-fixtures.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';

/** Appends `turns` turns of four rows (turn numbers from `from`), in batches. */
async function addTurns(db: Db, name: string, turns: number, from = 0): Promise<void> {
  openSession(db, { session: name });
  for (let i = 0; i < turns; i += 250) {
    const rows = [];
    for (let k = i; k < Math.min(turns, i + 250); k++) rows.push(...turn(from + k, 60));
    await appendRows(db, name, rows);
  }
}

function compactionLog(db: Db, sid: number): Array<{ ok: number; evicted_rows: number; forced: number }> {
  return db.prepare<[number], { ok: number; evicted_rows: number; forced: number }>('SELECT ok, evicted_rows, forced FROM compactions WHERE sid = ? ORDER BY id').all(sid);
}

/** rolling, recording the head and the size of the projection each `compact` is handed. */
function watched(): { strategy: Strategy; compactions: Array<{ head: number; inputs: number }> } {
  const compactions: Array<{ head: number; inputs: number }> = [];
  return {
    compactions,
    strategy: {
      ...rolling,
      compact: (input, projection, opts) => {
        compactions.push({ head: input.head, inputs: projection.inputs.length });
        return rolling.compact(input, projection, opts);
      },
    },
  };
}

const TURNS = Math.ceil((3 * CATCH_UP_ROWS) / 4);

describe('compaction in stages', () => {
  test('a stage starts only past CATCH_UP_ROWS, ends before a user row, and leaves STAGE_ROWS rows after it', async (t) => {
    const db = tempDb(t);
    await addTurns(db, 's', CATCH_UP_ROWS / 4 - 1);
    const inputAt8k = (): StrategyInput => {
      const input = strategyInput(db, new KernelCache());
      return { ...input, window: { ...input.window, window: 8000 } };
    };
    assert.equal(stageHead(inputAt8k(), 1), undefined, 'one turn short of CATCH_UP_ROWS: no stage');
    await addTurns(db, 's', 2, 100_000);
    const input = inputAt8k();
    const head = stageHead(input, 1);
    assert.ok(head !== undefined, 'past CATCH_UP_ROWS: a stage');
    const rows = db.prepare<[number], { seq: number; row_class: string }>('SELECT seq, row_class FROM transcript WHERE sid = ? ORDER BY seq').all(input.session.sid);
    const inStage = rows.filter((r) => r.seq <= head);
    assert.ok(inStage.length >= STAGE_ROWS, `${inStage.length} rows in the stage`);
    assert.ok(rows.length - inStage.length >= STAGE_ROWS, `${rows.length - inStage.length} rows after it`);
    assert.equal(rows[inStage.length]!.row_class, 'user', 'the row after the stage opens a unit');
    // From a later tail start, the rest is too short for another stage.
    assert.equal(stageHead(input, head + 1), undefined);
  });

  test('a long history is compacted a stage at a time: no compaction sees it whole, and every evicted row is summarized once', async (t) => {
    const db = tempDb(t);
    await addTurns(db, 's', TURNS);
    const total = snapshot(db, 's').rows;
    const summarizer = new RecordingSummarizer();
    const { strategy, compactions } = watched();
    const out = await prepareRequest(setupFor({ window: 8000, summarizer, strategy }), argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.equal(out.observation.compacted, true);
    assert.ok(compactions.length >= 3, `${compactions.length} compactions`);
    // Each stage's request holds its stage and what the last left, never the history whole.
    for (const c of compactions) assert.ok(c.inputs < CATCH_UP_ROWS + 256, `a compaction handed ${c.inputs} inputs of ${total} rows`);
    assert.deepEqual(compactions.map((c) => c.head), [...compactions.map((c) => c.head)].sort((a, b) => a - b), 'heads only move forward');
    assert.equal(compactions[compactions.length - 1]!.head, snapshot(db, 's').head, 'the last is the request at its own head');
    assert.match(out.observation.notes.join('\n'), new RegExp(`${compactions.length - 1} compaction\\(s\\) in stages`));
    assert.equal(out.summarizerCalls, summarizer.calls.length);

    // Logged as automatic compactions, one a stage plus the request's own.
    const log = compactionLog(db, snapshot(db, 's').sid);
    assert.equal(log.length, compactions.length);
    assert.ok(log.every((l) => l.ok === 1 && l.forced === 0));

    // Every request number up to the saved cut was in exactly one summarizer prompt, in order;
    // each later summary carries the one before.
    const seen: number[] = [];
    for (const req of summarizer.calls) {
      for (const m of parseSummaryPrompt(req.prompt).transcript.matchAll(/request (\d+):/g)) seen.push(Number(m[1]));
    }
    const state = loadRollingState(db, snapshot(db, 's').sid);
    assert.ok(state !== undefined && !('unreadable' in state));
    const kept = out.inputs.flatMap((i) => i.content.flatMap((p) => (p.type === 'text' ? [...p.text.matchAll(/^request (\d+):/g)].map((m) => Number(m[1])) : [])));
    const firstKept = Math.min(...kept);
    assert.deepEqual(seen, Array.from({ length: firstKept }, (_, i) => i), 'each evicted request summarized once, in order, up to the tail');
    assert.ok(summarizer.calls.slice(1).every((req) => (parseSummaryPrompt(req.prompt).previousSummary ?? '') !== ''), 'every later call carries the summary so far');
    assertCallsPaired(out.inputs);
  });

  test('the stages do nothing while automatic compaction is latched; a forced compaction still goes in stages', async (t) => {
    const db = tempDb(t);
    await addTurns(db, 's', TURNS);
    const sid = snapshot(db, 's').sid;
    setAutoFailures(db, sid, LATCH_LIMIT);
    const latched = watched();
    const out = await prepareRequest(setupFor({ window: 8000, strategy: latched.strategy }), argsFor(db, 's'));
    assert.equal(out.compacted, false);
    assert.deepEqual(latched.compactions, []);
    const forced = watched();
    const again = await prepareRequest(setupFor({ window: 8000, strategy: forced.strategy }), argsFor(db, 's', { force: true }));
    assert.equal(again.compacted, true);
    assert.ok(forced.compactions.length >= 3, `${forced.compactions.length} compactions`);
    assert.deepEqual(compactionLog(db, sid).map((l) => l.forced), [...forced.compactions.slice(1).map(() => 0), 1], 'the stages are automatic, the last one forced');
  });

  test('a stage that fails stops the stages, counts once toward the latch, and the request does not try again', async (t) => {
    const db = tempDb(t);
    await addTurns(db, 's', TURNS);
    const summarizer = new RecordingSummarizer();
    summarizer.failWith = 'the model is down';
    const out = await prepareRequest(setupFor({ window: 8000, summarizer }), argsFor(db, 's'));
    assert.equal(out.compacted, false);
    assert.equal(summarizer.calls.length, 1, 'one failed call, not a second try at the whole history');
    assert.match(out.observation.failure ?? '', /the model is down/);
    assert.equal(out.observation.auto_failures, 1);
    assert.match(out.observation.notes.join('\n'), /a compaction in stages failed/);
    const log = compactionLog(db, snapshot(db, 's').sid);
    assert.deepEqual(log.map((l) => l.ok), [0]);
  });

  test('a request its client gives up on during a stage compacts no further stage', async (t) => {
    const db = tempDb(t);
    await addTurns(db, 's', TURNS);
    const controller = new AbortController();
    const summarizer = new RecordingSummarizer();
    // The first summary comes back after the client has gone.
    summarizer.answer = (_req, n) => {
      controller.abort(new Error('the client went away'));
      return `summary #${n}`;
    };
    const { strategy, compactions } = watched();
    await assert.rejects(prepareRequest(setupFor({ window: 8000, summarizer, strategy }), { ...argsFor(db, 's'), signal: controller.signal }), /the client went away/);
    assert.equal(compactions.length, 1, 'the stage under way finished; no other began');
    assert.ok(compactionLog(db, snapshot(db, 's').sid).length <= 1);
  });
});
