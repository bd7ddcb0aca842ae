// The engine contract beyond one strategy: layers over the active strategy, stored folds read
// through `prior`, the fork hook inside the fork transaction, and warming long reads with yields.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PlainInput } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows, forkSession } from '../../storage/transcript/write.ts';
import type { FoldPlugin, Layer, LayerView, Strategy } from '../../strategies/contract.ts';
import { forkStrategyState } from '../../strategies/fork-state.ts';
import { historyRows, warmTailRows } from '../../strategies/harness/history-rows.ts';
import { startCut } from '../../strategies/harness/cut.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { foldPluginsFor } from '../../strategies/harness/prior.ts';
import { inspectRequest, prepareRequest, targetOf } from '../../strategies/prepare.ts';
import { plainTarget } from '../../strategies/projection.ts';
import { rolling } from '../../strategies/rolling/rolling.ts';
import { parseSummaryPrompt } from '../../strategies/summarizer/prompt-format.ts';
import { tempDb } from '../storage/factories.ts';
import { argsFor, RecordingSummarizer, sessionWithTurns, setupFor, turn } from './engine-fixtures.ts';

const texts = (inputs: readonly PlainInput[]): string[] => inputs.map((i) => i.content.map((p) => (p.type === 'text' ? p.text : p.type)).join(' '));

/** A layer that keeps one line of notes, rewritten at every compaction, and records its calls. */
class NotesLike implements Layer {
  readonly name = 'notes-like';
  text = 'notes v0';
  compactions = 0;
  failProject = false;
  failCompact = false;

  private view(): LayerView {
    return { inputs: [{ role: 'user', content: [{ type: 'text', text: `[notes] ${this.text}` }] }], sections: [{ name: 'notes', source: 'test layer', estimated_tokens: 5 }], notes: [] };
  }

  project(): LayerView {
    if (this.failProject) throw new Error('layer project broke');
    return this.view();
  }

  async compact(_input: unknown, before: { estimate: number }, after: { estimate: number }): Promise<LayerView> {
    this.compactions += 1;
    if (this.failCompact) throw new Error('layer summarizer down');
    assert.ok(after.estimate < before.estimate, 'the layer sees the request the compaction produced');
    this.text = `notes v${this.compactions}`;
    return this.view();
  }
}

describe('layers', () => {
  test('a layer projects in front of every request, and compacts only when the strategy did', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 10);
    const layer = new NotesLike();
    const setup = setupFor({ window: 8000, layers: [layer] });
    const small = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(small.compacted, false);
    assert.equal(texts(small.inputs)[0], '[notes] notes v0');
    assert.equal(small.observation.sections[1]!.name, 'notes');
    assert.equal(layer.compactions, 0);
    for (let i = 10; i < 40; i++) await appendRows(db, 's', turn(i));
    const big = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(big.compacted, true);
    assert.equal(layer.compactions, 1);
    assert.equal(texts(big.inputs)[0], '[notes] notes v1', 'the compacted request carries what the layer just wrote');
  });

  test('a layer that throws never fails the turn: it is left out, or keeps its old view, and /context says so', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const layer = new NotesLike();
    const errors: string[] = [];
    const setup = { ...setupFor({ window: 8000, layers: [layer] }), onLayerError: (name: string) => errors.push(name) };
    layer.failCompact = true;
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, true, 'the strategy committed');
    assert.equal(texts(out.inputs)[0], '[notes] notes v0', 'the old notes go out');
    assert.ok(out.observation.notes.some((n) => /could not update after this compaction/.test(n)));
    layer.failProject = true;
    const next = await prepareRequest(setup, argsFor(db, 's'));
    assert.ok(!texts(next.inputs).some((x) => x.startsWith('[notes]')));
    assert.ok(next.observation.notes.some((n) => /layer notes-like failed/.test(n)));
    assert.deepEqual(errors, ['notes-like', 'notes-like'], 'each failure is reported once for the log');
  });
});

/** Like lcm-memory: rows through seq `through` are covered by one stored summary node. */
function foldOf(through: number, owner = 'lcm'): FoldPlugin {
  return {
    name: 'lcm-memory',
    owner,
    prior(_input, history: readonly StoredRow[]) {
      const take = history.filter((r) => r.seq <= through);
      if (take.length === 0) return { folds: [], rest: history };
      return { folds: [{ source: 'lcm', text: 'LCM NODE: modules 0-4 were fixed', firstSeq: take[0]!.seq, lastSeq: take[take.length - 1]!.seq }], rest: history.slice(take.length) };
    },
  };
}

describe('stored folds', () => {
  test('rolling sends stored folds as text in place of the rows they cover, then folds them into its summary', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    const folds = [foldOf(20)]; // rows #1-#20: 5 whole turns
    const seen = inspectRequest(setupFor({ window: 1_000_000, folds }), argsFor(db, 's'));
    assert.deepEqual(seen.sections.map((s) => s.name), ['system', 'folds', 'tail']);
    assert.match(seen.sections[1]!.source, /1 stored fold\(s\) from lcm over rows #1-#20/);
    assert.match(seen.sections[2]!.source, /^rows #21-/);

    const out = await prepareRequest(setupFor({ window: 8000, folds, summarizer }), argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.match(parseSummaryPrompt(summarizer.calls[0]!.prompt).transcript, /^\[stored summary from lcm of rows #1-#20\]\nLCM NODE/);
    assert.ok(!texts(out.inputs).some((x) => x.includes('LCM NODE')), 'once summarized, the fold leaves the request');
  });

  test("the plugins a request reads are the enabled ones in registry order, without the active strategy's own", () => {
    const lcm = { ...foldOf(1, 'lcm'), name: 'lcm-memory' };
    const snap = { ...foldOf(1, 'snapcompact'), name: 'snapcompact-memory' };
    const plugins = { 'lcm-memory': lcm, 'snapcompact-memory': snap };
    assert.deepEqual(foldPluginsFor(['rolling', 'lcm-memory', 'snapcompact-memory'], plugins, 'rolling'), [lcm, snap]);
    assert.deepEqual(foldPluginsFor(['lcm', 'lcm-memory', 'snapcompact-memory'], plugins, 'lcm'), [snap]);
    assert.deepEqual(foldPluginsFor(['rolling', 'snapcompact-memory'], plugins, 'rolling'), [snap]);
  });
});

describe('forks and warming', () => {
  test('every strategy with a fork hook gets the parent -> branch seq map inside the fork transaction', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 'p', 3);
    const calls: Array<{ from: number; to: number; pairs: number }> = [];
    const copying: Strategy = { ...rolling, name: 'copying', fork: (_db, from, to, seqs) => void calls.push({ from: from.sid, to: to.sid, pairs: seqs.size }) };
    const failing: Strategy = {
      ...rolling,
      name: 'failing',
      fork: () => {
        throw new Error('copy failed');
      },
    };
    const parent = argsFor(db, 'p').session.sid;
    const branch = db.transaction(() => {
      const f = forkSession(db, 'p', { branch: 'b' });
      forkStrategyState(db, { sid: parent }, { sid: f.sid }, [rolling, copying]);
      return f;
    })();
    assert.deepEqual(calls, [{ from: parent, to: branch.sid, pairs: 12 }]);
    assert.throws(() =>
      db.transaction(() => {
        const f = forkSession(db, 'p', { branch: 'c' });
        forkStrategyState(db, { sid: parent }, { sid: f.sid }, [failing]);
      })()
    );
    assert.equal(db.prepare("SELECT count(*) FROM sessions WHERE name = 'c'").pluck().get(), 0, 'a failing hook rolls the fork back');
  });

  test('warming decodes a long tail with yields and leaves exactly what project would read', async (t) => {
    const db = tempDb(t);
    openSession(db, { session: 's' });
    for (let i = 0; i < 40; i++) await appendRows(db, 's', Array.from({ length: 500 }, (_, j) => ({ kind: 'user' as const, origin: 'user' as const, content: [{ type: 'text' as const, text: `row ${i}.${j} ${'x'.repeat(200)}` }] })));
    const cache = new KernelCache();
    const a = argsFor(db, 's');
    const input = {
      db,
      session: a.session,
      head: a.head,
      window: { window: 8000, source: 'config' as const, triggerPercent: 80, tailPercent: 25, ratio: 1 },
      settings: { triggerPercent: 80, tailPercent: 25 },
      pinnedTokens: 0,
      target: plainTarget('s'),
      folds: [],
      cache,
    };
    let turns = 0;
    const tick = setInterval(() => (turns += 1), 0);
    await warmTailRows(input, startCut());
    clearInterval(tick);
    assert.ok(turns > 0, 'the event loop ran while 20,000 rows were decoded');
    const warmed = historyRows(input, 1);
    assert.equal(warmed.length, 20_000);
    assert.equal(historyRows(input, 1), warmed, 'project reads the warmed rows, not the database');
    assert.deepEqual(warmed, historyRows({ ...input, cache: new KernelCache() }, 1));
    assert.equal(warmTailRows(input, startCut()), undefined, 'once filled there is nothing to wait for, and no yield');
  });
});

describe('the target', () => {
  const model = { id: 'claude-sonnet-4-5', provider: 'anthropic', context_window: 200_000, input: ['text', 'image'] as const, max_image_edge_px: 1568, max_images_per_request: 100 };
  const session = { sid: 1, name: 's' };

  test("the client's provider and its upstream's limits win over the catalog; the catalog fills the rest", () => {
    const fromCatalog = targetOf({ model: { ...model, input: ['text', 'image'] }, modelId: model.id }, { session }, 20_000);
    assert.deepEqual(
      { provider: fromCatalog.provider, edge: fromCatalog.maxImageEdgePx, images: fromCatalog.maxImages, bytes: fromCatalog.maxImageBytes, uploads: fromCatalog.uploadsImages, reads: fromCatalog.readsImages },
      { provider: 'anthropic', edge: 1568, images: 100, bytes: undefined, uploads: false, reads: true },
    );
    const declared = targetOf(
      { model: { ...model, input: ['text', 'image'] }, modelId: model.id },
      { session, provider: 'amazon-bedrock', upstream: { max_images: 20, max_image_edge_px: 1000, max_image_bytes: 5_000_000, uploads_images: true } },
      20_000,
    );
    assert.deepEqual(
      { provider: declared.provider, edge: declared.maxImageEdgePx, images: declared.maxImages, bytes: declared.maxImageBytes, uploads: declared.uploadsImages },
      { provider: 'amazon-bedrock', edge: 1000, images: 20, bytes: 5_000_000, uploads: true },
    );
    const blind = targetOf({ model: { ...model, input: ['text'] }, modelId: 'text-only' }, { session }, null);
    assert.equal(blind.readsImages, false);
    assert.equal(targetOf({ model: undefined, modelId: 'unknown' }, { session }, null).readsImages, true, 'an uncatalogued model is taken to read images');
  });
});

test("a session's requests share one tool list while the tools stay the same, and a changed schema is counted anew", async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 2);
  const cache = new KernelCache();
  const setup = setupFor({});
  // The client's tools arrive as new objects on every request, as they do over the socket.
  const tools = (description: string) => [{ name: 'read', description, input_schema: { type: 'object', properties: { path: { type: 'string' } } } }];
  const first = await prepareRequest(setup, { ...argsFor(db, 's', { cache }), tools: tools('Read a file.') });
  const again = await prepareRequest(setup, { ...argsFor(db, 's', { cache }), tools: tools('Read a file.') });
  assert.equal(again.tools, first.tools, 'the same tools: the list of the request before, kept by identity');
  assert.equal(again.observation.estimated_input_tokens, first.observation.estimated_input_tokens);
  const longer = 'Read a file from the repository, whole or a range of its lines, as text with line numbers.';
  const changed = await prepareRequest(setup, { ...argsFor(db, 's', { cache }), tools: tools(longer) });
  assert.notEqual(changed.tools, first.tools);
  assert.deepEqual(changed.tools.map((x) => x.description), [longer]);
  const system = (p: typeof first) => p.observation.sections.find((s) => s.name === 'system')!.estimated_tokens;
  assert.ok(system(changed) > system(first), "the longer description is counted, not the kept list's tokens");
});
