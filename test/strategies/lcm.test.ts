// lcm through the engine (prepareRequest) against a real SQLite file: the tree it writes, what
// a request holds, condensation, the smaller-than-source rule, failures, forks, settling and the
// lcm-memory folds another strategy reads. The shape rules alone are in lcm-tree.test.ts.
import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import type { PlainInput } from '../../protocol/prepared.ts';
import type { Db } from '../../storage/db.ts';
import { childNodes, frontierNodes, lcmNode, loadLcmState, parentNode, writeTreePass, type LcmNode } from '../../storage/state/lcm-tree.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows, forkSession, forkMap } from '../../storage/transcript/write.ts';
import { loadRollingState } from '../../storage/state/rolling.ts';
import { readTranscript } from '../../storage/transcript/read.ts';
import { lcm } from '../../strategies/lcm/lcm.ts';
import { lcmMemory } from '../../strategies/lcm/memory.ts';
import { notesLayer } from '../../strategies/notes/notes.ts';
import { CONDENSE_SPARE_PERCENT, condenseSpare, MAX_CONDENSE_ROUNDS, nodeCap, nodeInput } from '../../strategies/lcm/tree.ts';
import { inspectRequest, planCompaction, prepareRequest } from '../../strategies/prepare.ts';
import { rolling } from '../../strategies/rolling/rolling.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { createSummarizer, type ClientCall } from '../../strategies/summarizer/index.ts';
import { SummarizerConfig } from '../../strategies/summarizer/types.ts';
import { assistant, tempDb, toolResult, user } from '../storage/factories.ts';
import { argsFor, assertCallsPaired, RecordingSummarizer, sessionWithTurns, setupFor, turn } from './engine-fixtures.ts';

function texts(inputs: readonly PlainInput[]): string[] {
  return inputs.map((i) => i.content.map((p) => (p.type === 'text' ? p.text : p.type)).join(' | '));
}

function allNodes(db: Db, sid: number): LcmNode[] {
  const ids = db.prepare<[number], number>('SELECT node FROM lcm_nodes WHERE sid = ? ORDER BY node').pluck().all(sid);
  return ids.map((id) => lcmNode(db, sid, id)!);
}

const sidOf = (db: Db, name: string) => argsFor(db, name).session.sid;

/** An empty session `s` under lcm at an 8k window whose summaries are bulky (~700 tokens), so that passes condense. */
function bulkySession(t: TestContext) {
  const db = tempDb(t);
  const summarizer = new RecordingSummarizer();
  summarizer.answer = (_req, n) => `summary #${n} ${'of the work so far '.repeat(150)}`;
  const setup = setupFor({ window: 8000, summarizer, strategy: lcm });
  const cache = new KernelCache();
  openSession(db, { session: 's' });
  return { db, summarizer, setup, cache };
}

/** 70 turns in `s` whose first 60 are covered by a stored frontier of 60 leaves (one per turn), ~36k tokens against an 8k window. */
async function frontierOfSixty(t: TestContext) {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 70);
  const sid = sidOf(db, 's');
  const drafts = Array.from({ length: 60 }, (_, i) => ({
    depth: 0,
    firstSeq: i * 4 + 1,
    lastSeq: i * 4 + 4,
    summary: `turn ${i} ${'detail '.repeat(120)}`,
    estimatedTokens: 600,
    sourceTokens: 700,
    pointer: false,
    backend: 'client',
    children: [],
  }));
  writeTreePass(db, sid, { drafts, coveredSeq: 240 });
  return { db, sid };
}

describe('lcm', () => {
  test('below the trigger: no summarizer call, no tree, history verbatim', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 3);
    const summarizer = new RecordingSummarizer();
    const out = await prepareRequest(setupFor({ window: 100_000, summarizer, strategy: lcm }), argsFor(db, 's'));
    assert.equal(out.compacted, false);
    assert.equal(summarizer.calls.length, 0);
    assert.equal(loadLcmState(db, sidOf(db, 's')), undefined);
    assert.equal(out.inputs.length, 3 * 4);
  });

  test('at the trigger: leaves over whole older units, the frontier nodes named in the request, then the tail', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    const setup = setupFor({ window: 8000, summarizer, strategy: lcm });
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, true);
    const sid = sidOf(db, 's');
    const state = loadLcmState(db, sid)!;
    const frontier = frontierNodes(db, sid);
    assert.ok(frontier.length >= 1);
    // Every node of the frontier is one input naming its id, rows, depth and the tool.
    const t0 = texts(out.inputs);
    frontier.forEach((n, i) => {
      assert.ok(t0[i]!.startsWith(`[lcm node ${n.node} · rows #${n.firstSeq}-#${n.lastSeq} · depth ${n.depth} · lcm_expand {"node":${n.node}} reads the original rows]\n`), t0[i]);
    });
    // The tail starts after the cursor, at a user request, and keeps every call with its result.
    assert.match(t0[frontier.length]!, /^request \d+:/);
    assertCallsPaired(out.inputs);
    const leaves = allNodes(db, sid).filter((n) => n.depth === 0);
    // Leaves cover the history from the first row to the cursor without gaps or overlaps.
    assert.equal(leaves[0]!.firstSeq, 1);
    for (let i = 1; i < leaves.length; i++) assert.ok(leaves[i]!.firstSeq > leaves[i - 1]!.lastSeq);
    assert.equal(leaves[leaves.length - 1]!.lastSeq, state.coveredSeq);
    assert.ok(out.observation.estimated_input_tokens * 100 < 8000 * 80, 'under the trigger after the compaction');
    assert.match(out.observation.sections.find((s) => s.name === 'summary')!.source, new RegExp(`covered through #${state.coveredSeq}`));
  });

  test('a session grown past the trigger many times stays within its window on every prepare', async (t) => {
    const db = tempDb(t);
    const summarizer = new RecordingSummarizer();
    summarizer.answer = (_req, n) => `summary #${n} ${'of the work so far '.repeat(150)}`;
    const setup = setupFor({ window: 8000, summarizer, strategy: lcm });
    const cache = new KernelCache();
    let compactions = 0;
    openSession(db, { session: 's' });
    for (let i = 0; i < 150; i++) {
      await appendRows(db, 's', turn(i));
      const out = await prepareRequest(setup, argsFor(db, 's', { cache }));
      if (out.compacted) compactions += 1;
      assert.ok(out.observation.estimated_input_tokens <= 8000, `turn ${i}: ~${out.observation.estimated_input_tokens} tokens`);
      assertCallsPaired(out.inputs);
    }
    assert.ok(compactions >= 5, `${compactions} compactions`);
    const sid = sidOf(db, 's');
    const nodes = allNodes(db, sid);
    // Condensed parents exist, each one level above its deepest child, with ordered children.
    const parents = nodes.filter((n) => n.depth > 0);
    assert.ok(parents.length > 0);
    for (const p of parents) {
      const kids = childNodes(db, p.node).map((id) => lcmNode(db, sid, id)!);
      assert.ok(kids.length >= 2);
      assert.equal(p.depth, Math.max(...kids.map((k) => k.depth)) + 1);
      assert.equal(p.firstSeq, kids[0]!.firstSeq);
      assert.equal(p.lastSeq, kids[kids.length - 1]!.lastSeq);
      for (let i = 1; i < kids.length; i++) assert.ok(kids[i]!.firstSeq > kids[i - 1]!.lastSeq, 'children in source order');
      for (const k of kids) assert.equal(parentNode(db, k.node), p.node);
    }
  });

  test("condensation's spare: a tenth of the window as the provider counts it, never less than a node's cap", () => {
    const info = (window: number | null, ratio = 1) => ({ window, source: 'config' as const, triggerPercent: 80, tailPercent: 25, ratio });
    // 32k: 3,200 tokens free under the trigger, where a node's cap (768) left lcm compacting again a few turns later.
    assert.equal(condenseSpare(info(32_000), 768), 3_200);
    // A ratio of 1.3 (the provider counts more than the estimate): a tenth of the window in estimated tokens.
    assert.equal(condenseSpare(info(32_000, 1.3), 768), Math.floor((32_000 / 1.3) * 0.1));
    // A small window: the next leaf's cap is the larger.
    assert.equal(condenseSpare(info(6_000), 768), 768);
    assert.equal(condenseSpare(info(null), 768), 768, 'an unknown window keeps the cap');
  });

  test('a pass that condenses leaves a tenth of the window free under the trigger (at least the next leaf), and no turn compacts right after one', async (t) => {
    const { db, setup, cache } = bulkySession(t);
    const sid = sidOf(db, 's');
    const compactedAt: number[] = [];
    let condensed = 0;
    for (let i = 0; i < 150; i++) {
      await appendRows(db, 's', turn(i));
      const parentsBefore = allNodes(db, sid).filter((n) => n.depth > 0).length;
      const out = await prepareRequest(setup, argsFor(db, 's', { cache }));
      if (!out.compacted) continue;
      compactedAt.push(i);
      if (allNodes(db, sid).filter((n) => n.depth > 0).length === parentsBefore) continue;
      condensed += 1;
      // What the pass left: under the trigger by CONDENSE_SPARE_PERCENT of the window, and at
      // least the cap of the next pass's leaf.
      const trigger = Math.floor((8000 * out.observation.trigger_percent) / 100);
      const spare = Math.max(nodeCap(8000, 0), Math.floor((8000 * CONDENSE_SPARE_PERCENT) / 100));
      assert.ok(out.observation.estimated_input_tokens + spare <= trigger, `turn ${i}: ~${out.observation.estimated_input_tokens} + ${spare} over the trigger's ${trigger}`);
    }
    assert.ok(condensed >= 3, `${condensed} passes condensed`);
    const backToBack = compactedAt.filter((at, k) => k > 0 && compactedAt[k - 1] === at - 1);
    assert.deepEqual(backToBack, [], `turns compacting right after a compaction (of ${compactedAt.join(', ')})`);
  });

  test('the request right after a pass, from the frontier the pass computed, is the one a fresh kernel reads back from the tree', async (t) => {
    const { db, setup, cache } = bulkySession(t);
    const sid = sidOf(db, 's');
    let compactions = 0;
    let condensed = 0;
    for (let i = 0; i < 120; i++) {
      await appendRows(db, 's', turn(i));
      const parentsBefore = allNodes(db, sid).filter((n) => n.depth > 0).length;
      const out = await prepareRequest(setup, argsFor(db, 's', { cache }));
      if (!out.compacted) continue;
      compactions += 1;
      if (allNodes(db, sid).filter((n) => n.depth > 0).length > parentsBefore) condensed += 1;
      // Stored nodes and new ones (leaves and parents, their ids assigned by the commit).
      const fresh = inspectRequest(setup, argsFor(db, 's', { cache: new KernelCache() }));
      assert.deepEqual(out.observation.sections, fresh.sections, `turn ${i}`);
      const frontier = frontierNodes(db, sid);
      assert.deepEqual(out.inputs.slice(0, frontier.length), frontier.map(nodeInput), `turn ${i}`);
      const again = await prepareRequest(setup, argsFor(db, 's', { cache }));
      const reread = await prepareRequest(setup, argsFor(db, 's', { cache: new KernelCache() }));
      assert.deepEqual(again.inputs, reread.inputs, `turn ${i}: the next request, seeded view against a fresh read`);
    }
    assert.ok(compactions >= 3 && condensed >= 1, `${compactions} compactions, ${condensed} condensing`);
  });

  test('"At the trigger, it summarizes complete older conversation units": a request at the trigger waits at most one turn, and says why', async (t) => {
    const db = tempDb(t);
    const summarizer = new RecordingSummarizer();
    // Notes near their cap at this window (~900 tokens): they carry the request past the
    // trigger while lcm's own part is still under it.
    summarizer.answer = (req, n) => (req.purpose === 'notes' ? `- open: ${'keep src/module.ts exact; '.repeat(140)}` : `summary #${n}`);
    const setup = setupFor({ window: 8000, summarizer, strategy: lcm, layers: [notesLayer({ budgetTokens: 2000 })] });
    const cache = new KernelCache();
    openSession(db, { session: 's' });
    const trigger = (8000 * 80) / 100;
    let waited = 0;
    let previousWaited = false;
    for (let i = 0; i < 120; i++) {
      await appendRows(db, 's', turn(i));
      const o = (await prepareRequest(setup, argsFor(db, 's', { cache }))).observation;
      const sitting = !o.compacted && (o.calibrated_input_tokens ?? o.estimated_input_tokens) >= trigger;
      assert.ok(!(sitting && previousWaited), `turn ${i}: ~${o.calibrated_input_tokens} tokens at the trigger a second turn without compacting`);
      if (sitting) {
        waited += 1;
        assert.match(o.notes.join('; '), /automatic compaction waits one turn: /, `turn ${i}`);
      }
      previousWaited = sitting;
    }
    assert.ok(waited > 0, 'some request reached the trigger only with the notes');
  });

  test('a failed summary advances nothing: cursor, nodes and links as before', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    const setup = setupFor({ window: 8000, summarizer, strategy: lcm });
    await prepareRequest(setup, argsFor(db, 's'));
    for (let i = 40; i < 80; i++) await appendRows(db, 's', turn(i));
    const sid = sidOf(db, 's');
    const before = { state: loadLcmState(db, sid), nodes: allNodes(db, sid), edges: db.prepare('SELECT * FROM lcm_edges ORDER BY child').all() };
    // The first leaf succeeds, the second fails: nothing of the pass may be written.
    let n = 0;
    summarizer.answer = () => {
      n += 1;
      if (n === 2) throw new Error('provider answered 500');
      return 'a leaf';
    };
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, false);
    assert.match(out.observation.failure ?? '', /provider answered 500/);
    assert.deepEqual({ state: loadLcmState(db, sid), nodes: allNodes(db, sid), edges: db.prepare('SELECT * FROM lcm_edges ORDER BY child').all() }, before);
  });

  test('a summary not smaller than its source is retried at a third of the limit, then stored as a pointer', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    // Far larger than any chunk it is asked to summarize.
    summarizer.answer = () => 'padding '.repeat(20_000);
    const out = await prepareRequest(setupFor({ window: 8000, summarizer, strategy: lcm }), argsFor(db, 's'));
    assert.equal(out.compacted, true);
    const sid = sidOf(db, 's');
    const leaf = allNodes(db, sid).find((n) => n.depth === 0)!;
    assert.equal(leaf.pointer, true);
    assert.match(leaf.summary, new RegExp(`rows #${leaf.firstSeq}-#${leaf.lastSeq} are read back with lcm_expand`));
    // Two calls for that leaf: the limit, then max(32, limit / 3).
    const limits = summarizer.calls.slice(0, 2).map((c) => c.maxOutputTokens);
    assert.equal(limits[1], Math.max(32, Math.floor(limits[0]! / 3)));
    // The rows themselves are still there to read.
    const read = await readTranscript(db, { session: 's', from_seq: leaf.firstSeq, to_seq: leaf.lastSeq, offset: 0, limit: 100 });
    assert.match(read.text, /request 0: please fix src\/module0\.ts/);
  });

  test('"If a summary exceeds the size of its source, lcm retries with a smaller output limit and then stores a short source pointer": also through the output cap every backend is held to', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    // The summarizer stack the daemon builds, over a client that always answers far over any
    // limit, in one run-on line that no sentence boundary can cut.
    const asked: number[] = [];
    const clientCall: ClientCall = async (params) => {
      asked.push(params.max_output_tokens);
      return { text: 'padding '.repeat(20_000) };
    };
    const summarizer = createSummarizer(SummarizerConfig.parse({}), { clientCall });
    const out = await prepareRequest(setupFor({ window: 8000, summarizer, strategy: lcm }), argsFor(db, 's', { force: true }));
    assert.equal(out.compacted, true, out.reason ?? '');
    const sid = sidOf(db, 's');
    const nodes = allNodes(db, sid);
    assert.ok(nodes.length > 0, 'a pointer node was stored');
    for (const n of nodes.filter((x) => x.depth === 0)) {
      assert.equal(n.pointer, true);
      assert.match(n.summary, new RegExp(`rows #${n.firstSeq}-#${n.lastSeq} are read back with lcm_expand`));
    }
    // Per leaf: the limit, then max(32, limit / 3), and nothing in between.
    const cap = nodeCap(8000, 0);
    assert.deepEqual(asked.slice(0, 2), [asked[0], Math.max(32, Math.floor(asked[0]! / 3))]);
    assert.ok(asked[0]! <= cap);
    assert.match(out.observation.notes.join('; '), /pointer/);
  });

  test('a stored frontier that sixteen rounds cannot fit is condensed level by level until the request fits, not into a chain', async (t) => {
    const { db, sid } = await frontierOfSixty(t);
    const summarizer = new RecordingSummarizer();
    // Parents of ~400 tokens: fifteen of them, one level up, are still over the window.
    summarizer.answer = (_req, n) => `parent summary #${n} ${'of the joined parts '.repeat(80)}`;
    const out = await prepareRequest(setupFor({ window: 8000, summarizer, strategy: lcm }), argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.ok(out.observation.estimated_input_tokens <= 8000, `~${out.observation.estimated_input_tokens} tokens`);
    const parents = allNodes(db, sid).filter((n) => n.depth > 0);
    // Level by level: every leaf is joined into a parent of four before any parent is joined
    // again (a chain of sixteen rounds reached depth 16).
    const depthOne = parents.filter((p) => p.depth === 1);
    assert.equal(depthOne.length, 15);
    for (const p of depthOne) assert.equal(childNodes(db, p.node).length, 4);
    assert.ok(Math.max(...parents.map((p) => p.depth)) <= 2, parents.map((p) => p.depth).join(','));
    // The round limit ended the pass once the request fit the window, and the note says what
    // is left over the trigger: the frontier, not the newest exchange.
    const notes = out.observation.notes.join('; ');
    assert.match(notes, new RegExp(`stopped condensing after ${MAX_CONDENSE_ROUNDS} rounds with the request within the window but above the trigger: the frontier holds \\d+ nodes`));
    assert.doesNotMatch(notes, /newest exchange/);
  });

  test('a request over the window because of its frontier says so, not that the newest exchange is too large', async (t) => {
    const { db } = await frontierOfSixty(t);
    // The read-only projection (/context before any prepare) of a frontier far over the window.
    const o = inspectRequest(setupFor({ window: 8000, strategy: lcm }), argsFor(db, 's'));
    const tail = o.sections.find((s) => s.name === 'tail')!.estimated_tokens;
    assert.ok(o.estimated_input_tokens > 8000 && tail < 8000);
    const note = o.notes.find((n) => n.includes('larger than the 8000-token window'));
    assert.ok(note !== undefined, o.notes.join('; '));
    assert.doesNotMatch(note, /newest exchange/);
    assert.match(note, new RegExp(`the summary section takes ~\\d+ tokens, the verbatim tail only ~${tail}`));
  });

  test('after a switch to lcm on a long history the first request fits the window (300 units of ~2,400 tokens at 8,000)', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 300, 3150);
    const summarizer = new RecordingSummarizer();
    summarizer.answer = (_req, n) => `summary #${n} ${'of the work so far '.repeat(30)}`;
    const out = await prepareRequest(setupFor({ window: 8000, summarizer, strategy: lcm }), argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.ok(out.observation.estimated_input_tokens <= 8000, `~${out.observation.estimated_input_tokens} tokens; ${out.observation.notes.join('; ')}`);
    const sid = sidOf(db, 's');
    const frontier = frontierNodes(db, sid);
    // No node reaches the depth of a chain: 150 leaves fit under four levels of fan-out four.
    assert.ok(Math.max(...allNodes(db, sid).map((n) => n.depth)) <= 4);
    assert.ok(frontier.length >= 1);
  });

  test('a newest unit larger than the window is covered exchange by exchange; its opener stays verbatim', async (t) => {
    const db = tempDb(t);
    openSession(db, { session: 's' });
    const rows = [user('one long autonomous task: migrate every module')];
    for (let i = 0; i < 60; i++) rows.push(assistant(`step ${i}: editing src/m${i}.ts`, [`c${i}`]), toolResult(`c${i}`, `ok ${'output '.repeat(60)}`));
    await appendRows(db, 's', rows);
    const summarizer = new RecordingSummarizer();
    const out = await prepareRequest(setupFor({ window: 8000, summarizer, strategy: lcm }), argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.ok(out.observation.estimated_input_tokens <= 8000);
    assertCallsPaired(out.inputs);
    const t0 = texts(out.inputs);
    const opener = t0.findIndex((s) => s.startsWith('one long autonomous task'));
    assert.ok(opener > 0, 'the opener follows the frontier');
    assert.ok(t0.slice(0, opener).every((s) => s.startsWith('[lcm node ')));
    // The first leaf holds the opener too, so every covered row belongs to a node.
    assert.equal(allNodes(db, sidOf(db, 's'))[0]!.firstSeq, 1);
  });

  test('the dry run says what the next leaf pass would cover and writes nothing', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const setup = setupFor({ window: 8000, strategy: lcm });
    const { dryRun } = planCompaction(setup, argsFor(db, 's'));
    assert.ok(dryRun !== null && dryRun.plan.evict_rows > 0);
    assert.equal(dryRun.plan.evict_from_seq, 1);
    assert.ok(dryRun.plan.estimated_tokens_after < dryRun.plan.estimated_tokens_before);
    assert.equal(loadLcmState(db, sidOf(db, 's')), undefined);
  });

  test('a late result settled into a covered range moves ranges with the rows: each node reads its own rows', async (t) => {
    const db = tempDb(t);
    // Unit 0 has a call whose result comes late; many units follow it.
    openSession(db, { session: 's' });
    await appendRows(db, 's', [user('start the build'), assistant('building', ['late'])]);
    for (let i = 1; i < 40; i++) await appendRows(db, 's', turn(i));
    const setup = setupFor({ window: 8000, strategy: lcm });
    await prepareRequest(setup, argsFor(db, 's'));
    const sid = sidOf(db, 's');
    const render = async (n: LcmNode) => (await readTranscript(db, { session: 's', from_seq: n.firstSeq, to_seq: n.lastSeq, offset: 0, limit: 1_000_000 })).text;
    const before = await Promise.all(allNodes(db, sid).map(async (n) => ({ node: n.node, text: await render(n) })));
    const coveredBefore = loadLcmState(db, sid)!.coveredSeq;
    const r = await appendRows(db, 's', [toolResult('late', 'build finished')]);
    assert.ok(r.moved !== undefined && r.moved.length > 0, 'the result settled beside its call');
    const after = allNodes(db, sid);
    const same = (text: string) => text.replace(/#\d+/g, '#');
    for (const [i, n] of after.entries()) {
      const text = await render(n);
      if (n.firstSeq <= 2 && 2 <= n.lastSeq) {
        // The node holding the call now also holds its result, right after the call.
        assert.match(text, /building\n→ [^\n]*\n\n#\d+ tool_result late\nbuild finished/);
        assert.equal(same(text.replace(/#\d+ tool_result late\nbuild finished\n\n/, '')), same(before[i]!.text));
      } else {
        assert.equal(same(text), same(before[i]!.text), `node ${n.node} reads the same rows`);
      }
    }
    assert.equal(loadLcmState(db, sid)!.coveredSeq, coveredBefore + 1);
  });

  test('forks copy the nodes wholly before the fork point, remapped, without a model call', async (t) => {
    const { db, summarizer, setup, cache } = bulkySession(t);
    for (let i = 0; i < 120; i++) {
      await appendRows(db, 's', turn(i));
      await prepareRequest(setup, argsFor(db, 's', { cache }));
    }
    const sid = sidOf(db, 's');
    const nodes = allNodes(db, sid);
    const parent = nodes.find((n) => n.depth > 0)!;
    const kids = childNodes(db, parent.node).map((id) => lcmNode(db, sid, id)!);
    const calls = summarizer.calls.length;
    // Inside the parent, after its first child: the parent is left out, the first child is kept.
    const at = kids[1]!.firstSeq + 1;
    const fork = forkSession(db, 's', { at, branch: 'b' });
    lcm.fork!(db, { sid }, { sid: fork.sid }, forkMap(db, fork.sid));
    const map = forkMap(db, fork.sid);
    const copied = allNodes(db, fork.sid);
    const expected = nodes.filter((n) => n.lastSeq < at && n.firstSeq <= loadLcmState(db, sid)!.coveredSeq);
    assert.deepEqual(
      copied.map((n) => [n.firstSeq, n.lastSeq, n.depth, n.summary]),
      expected.map((n) => [map.get(n.firstSeq), map.get(n.lastSeq), n.depth, n.summary]),
    );
    assert.ok(!copied.some((n) => n.summary === parent.summary && n.depth === parent.depth), 'the crossing parent is omitted');
    // The branch's nodes name the branch's rows only, and its own ids.
    for (const n of copied) {
      assert.ok(!nodes.some((p) => p.node === n.node));
      const row = db.prepare<[number], { sid: number }>('SELECT sid FROM transcript WHERE seq = ?').get(n.firstSeq)!;
      assert.equal(row.sid, fork.sid);
    }
    assert.equal(summarizer.calls.length, calls, 'no model call');
    // A fork before any node copies none; one after everything copies every node.
    const early = forkSession(db, 's', { at: 2, branch: 'early' });
    lcm.fork!(db, { sid }, { sid: early.sid }, forkMap(db, early.sid));
    assert.equal(allNodes(db, early.sid).length, 0);
    const late = forkSession(db, 's', { branch: 'late' });
    lcm.fork!(db, { sid }, { sid: late.sid }, forkMap(db, late.sid));
    assert.equal(allNodes(db, late.sid).length, nodes.length);
    assert.equal(frontierNodes(db, late.sid).length, frontierNodes(db, sid).length);
  });

  test('lcm -> rolling reads the frontier as folds, never the covered rows; back to lcm never summarizes the rolling summary', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const turnBodyAt5 = JSON.parse(db.prepare<[], string>('SELECT body FROM transcript WHERE seq = 5').pluck().get()!) as unknown;
    const summarizer = new RecordingSummarizer();
    summarizer.answer = (req, n) => `${req.purpose} summary #${n}`;
    await prepareRequest(setupFor({ window: 8000, summarizer, strategy: lcm }), argsFor(db, 's'));
    const sid = sidOf(db, 's');
    const covered = loadLcmState(db, sid)!.coveredSeq;
    const frontier = frontierNodes(db, sid);
    // rolling, with lcm-memory's folds.
    const viaRolling = inspectRequest(setupFor({ window: 8000, summarizer, strategy: rolling, folds: [lcmMemory] }), argsFor(db, 's'));
    const folds = viaRolling.sections.find((s) => s.name === 'folds');
    assert.ok(folds !== undefined);
    assert.match(folds.source, new RegExp(`${frontier.length} stored fold\\(s\\) from lcm-memory over rows #${frontier[0]!.firstSeq}-#${frontier[frontier.length - 1]!.lastSeq}`));
    const tail = viaRolling.sections.find((s) => s.name === 'tail')!;
    assert.match(tail.source, new RegExp(`^rows #${covered + 1}-`));
    // The covered rows are never decoded: a fresh kernel of rolling projects the same request
    // even when a covered row's body could not be read.
    db.prepare(`UPDATE transcript SET body = '{"kind":"unreadable"}' WHERE seq = 5`).run();
    const fresh = inspectRequest(setupFor({ window: 8000, summarizer, strategy: rolling, folds: [lcmMemory] }), argsFor(db, 's'));
    assert.deepEqual(fresh.sections, viaRolling.sections);
    db.prepare(`UPDATE transcript SET body = ? WHERE seq = 5`).run(JSON.stringify(turnBodyAt5));
    // More turns, compacted by rolling: it folds lcm's nodes into its summary.
    for (let i = 40; i < 70; i++) await appendRows(db, 's', turn(i));
    const r = await prepareRequest(setupFor({ window: 8000, summarizer, strategy: rolling, folds: [lcmMemory] }), argsFor(db, 's'));
    assert.equal(r.compacted, true);
    const rollingCalls = summarizer.calls.filter((c) => c.purpose === 'rolling');
    assert.ok(rollingCalls[0]!.prompt.includes('[stored summary from lcm-memory'));
    // Back to lcm: it continues from its own cursor, and no lcm call ever reads rolling's summary.
    for (let i = 70; i < 75; i++) await appendRows(db, 's', turn(i));
    await prepareRequest(setupFor({ window: 8000, summarizer, strategy: lcm }), argsFor(db, 's', { force: true }));
    const lcmCalls = summarizer.calls.filter((c) => c.purpose === 'lcm');
    assert.ok(lcmCalls.every((c) => !/rolling summary #/.test(c.prompt)), 'lcm never summarizes the rolling summary');
    assert.ok(loadLcmState(db, sid)!.coveredSeq > covered);
  });

  test('lcm -> rolling with a cut inside the unit: nodes within the exchanges rolling summarized are folded once, then gone', async (t) => {
    const db = tempDb(t);
    openSession(db, { session: 's' });
    const step = (i: number) => [assistant(`step ${i}: editing src/m${i}.ts`, [`c${i}`]), toolResult(`c${i}`, `ok ${'output '.repeat(60)}`)];
    const rows = [user('one long autonomous task: migrate every module')];
    for (let i = 0; i < 60; i++) rows.push(...step(i));
    await appendRows(db, 's', rows);
    const summarizer = new RecordingSummarizer();
    summarizer.answer = (req, n) => `${req.purpose} summary #${n}`;
    await prepareRequest(setupFor({ window: 8000, summarizer, strategy: lcm }), argsFor(db, 's'));
    const sid = sidOf(db, 's');
    const covered = loadLcmState(db, sid)!.coveredSeq;
    assert.ok(covered > 1, 'lcm covered exchanges of the one unit');
    const viaRolling = setupFor({ window: 8000, summarizer, strategy: rolling, folds: [lcmMemory] });
    const rollingPrompts = () => summarizer.calls.filter((c) => c.purpose === 'rolling').map((c) => c.prompt);
    await prepareRequest(viaRolling, argsFor(db, 's', { force: true }));
    assert.ok(rollingPrompts().some((p) => p.includes('[stored summary from lcm-memory')), 'the first rolling compaction reads the nodes');
    // The situation of the issue: rolling's cut lies inside the unit, past every row lcm covered.
    const saved = loadRollingState(db, sid);
    assert.ok(saved !== undefined && 'hints' in saved);
    assert.ok(saved.hints.resumeSeq > covered && saved.hints.openerSeq === 1, JSON.stringify(saved.hints));
    const after = inspectRequest(viaRolling, argsFor(db, 's'));
    assert.equal(after.sections.find((s) => s.name === 'folds'), undefined, after.sections.map((s) => `${s.name}: ${s.source}`).join('; '));
    // The unit goes on; the next compaction summarizes the new exchanges, never the nodes again.
    const more = [];
    for (let i = 60; i < 70; i++) more.push(...step(i));
    await appendRows(db, 's', more);
    const before = rollingPrompts().length;
    const r = await prepareRequest(viaRolling, argsFor(db, 's', { force: true }));
    assert.equal(r.compacted, true);
    const later = rollingPrompts().slice(before);
    assert.ok(later.length > 0);
    assert.ok(later.every((p) => !p.includes('[stored summary from lcm-memory')), 'the nodes are not summarized a second time');
    assert.ok(r.inputs.every((i) => i.content.every((p) => p.type !== 'text' || !p.text.includes('lcm summary #'))), 'no request carries the nodes beside the summary');
  });
});
