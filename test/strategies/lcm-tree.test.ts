// lcm's shape rules on their own: leaf chunking, which nodes a condensation joins, the
// smaller-than-source rule with its retry and pointer, and how a node reads in a request.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StoredRow } from '../../protocol/rows.ts';
import { textTokens } from '../../strategies/estimate.ts';
import { condenseRun, leafChunks, nodeCap, nodeHeader, retryCap, shrink } from '../../strategies/lcm/tree.ts';
import { summarizerFailed, type SummaryResult } from '../../strategies/summarizer/types.ts';

let seq = 0;
function row(kind: 'user' | 'assistant' | 'tool_result'): StoredRow {
  seq += 1;
  const body = kind === 'user'
    ? { kind, origin: 'user' as const, content: [{ type: 'text' as const, text: `u${seq}` }] }
    : kind === 'assistant'
    ? { kind, content: [{ type: 'text' as const, text: `a${seq}` }] }
    : { kind, call_id: `c${seq}`, is_error: false, content: [{ type: 'text' as const, text: `r${seq}` }] };
  return { seq, created_at: 0, key: null, row_class: kind === 'user' ? 'user' : 'other', body } as StoredRow;
}

const ten = () => 10;

test('leaf chunks keep whole units together, in order; a unit larger than a leaf splits between exchanges only', () => {
  const units = [[row('user'), row('assistant')], [row('user'), row('assistant'), row('tool_result'), row('assistant'), row('tool_result')], [row('user')]];
  const rows = units.flat();
  // 10 tokens a row, 30 a chunk: the 5-row unit is too big for any leaf and is split at its
  // exchanges (the opener joins the first), never between a call and its result.
  const chunks = leafChunks(rows, ten, undefined, 30);
  const [u0, u1, u2] = units.map((u) => u.map((r) => r.seq));
  assert.deepEqual(chunks.map((c) => c.map((r) => r.seq)), [u0, u1!.slice(0, 3), [...u1!.slice(3), ...u2!]]);
  assert.deepEqual(chunks.flat(), rows);
  // With room for it, the same unit is one leaf.
  assert.deepEqual(leafChunks(rows, ten, undefined, 50).map((c) => c.length), [2, 5, 1]);
});

test('the unit in progress is chunked by exchange, so a long turn becomes several leaves', () => {
  const opener = row('user');
  const exchanges = [[row('assistant'), row('tool_result')], [row('assistant'), row('tool_result')], [row('assistant'), row('tool_result')]];
  const rows = [opener, ...exchanges.flat()];
  const chunks = leafChunks(rows, ten, opener.seq, 30);
  // The opener joins the first exchange; no exchange is split.
  assert.deepEqual(chunks.map((c) => c.map((r) => r.seq)), [[opener.seq, ...exchanges[0]!.map((r) => r.seq)], exchanges[1]!.map((r) => r.seq), exchanges[2]!.map((r) => r.seq)]);
  // The same rows as a finished unit that fits a leaf stay one leaf.
  assert.equal(leafChunks(rows, ten, undefined, 100).length, 1);
});

test('condensation grows the tree level by level: the oldest run of the shallowest nodes, up to four, and needs two', () => {
  assert.equal(condenseRun([]), undefined);
  assert.equal(condenseRun([0]), undefined);
  assert.deepEqual(condenseRun([0, 0, 0]), { start: 0, count: 3 });
  assert.deepEqual(condenseRun([0, 0, 0, 0, 0, 0, 0, 0, 0]), { start: 0, count: 4 });
  // A parent is not joined again while leaves after it can still be joined with each other.
  assert.deepEqual(condenseRun([1, 0, 0, 0, 0, 0]), { start: 1, count: 4 });
  assert.deepEqual(condenseRun([2, 1, 1, 1, 0, 0]), { start: 4, count: 2 });
  // A single node of the shallowest level joins the level above it.
  assert.deepEqual(condenseRun([1, 1, 0]), { start: 0, count: 3 });
  assert.deepEqual(condenseRun([2, 1, 0]), { start: 1, count: 2 });
  assert.deepEqual(condenseRun([3, 3]), { start: 0, count: 2 });
});

test('condensing a frontier of leaves until one node is left builds a balanced tree, not a chain', () => {
  let depths = Array.from({ length: 64 }, () => 0);
  let rounds = 0;
  for (let run = condenseRun(depths); run !== undefined; run = condenseRun(depths)) {
    const depth = Math.max(...depths.slice(run.start, run.start + run.count)) + 1;
    depths = [...depths.slice(0, run.start), depth, ...depths.slice(run.start + run.count)];
    rounds += 1;
  }
  // 64 leaves under fan-out four: 16 + 4 + 1 parents, and a root three levels up.
  assert.deepEqual({ rounds, depths }, { rounds: 21, depths: [3] });
});

test('node caps: a quarter of what the window leaves, within [32, 768]; retries at a third, never under 32', () => {
  assert.equal(nodeCap(200_000, 10_000), 768);
  assert.equal(nodeCap(2000, 400), 400);
  assert.equal(nodeCap(1000, 990), 32);
  assert.equal(retryCap(768), 256);
  assert.equal(retryCap(60), 32);
});

function answers(...texts: string[]) {
  const limits: number[] = [];
  const ask = async (limit: number): Promise<SummaryResult> => {
    limits.push(limit);
    const text = texts[limits.length - 1]!;
    return { text, backend: 'client', model: null, outputTokens: textTokens(text) };
  };
  return { ask, limits };
}

test('a summary smaller than its source is kept on the first try', async () => {
  const a = answers('short');
  const s = await shrink(100, 300, a.ask, () => 'pointer');
  assert.deepEqual(s, { summary: 'short', pointer: false, backend: 'client' });
  assert.deepEqual(a.limits, [300]);
});

test('a summary not smaller than its source is asked again at a third, then replaced by the pointer', async () => {
  const big = 'x'.repeat(400);
  const ok = answers(big, 'fine');
  assert.equal((await shrink(100, 300, ok.ask, () => 'pointer')).summary, 'fine');
  assert.deepEqual(ok.limits, [300, 100]);
  const never = answers(big, big);
  const s = await shrink(100, 300, never.ask, () => 'pointer to rows');
  assert.deepEqual(s, { summary: 'pointer to rows', pointer: true, backend: 'client' });
  assert.deepEqual(never.limits, [300, 100]);
});

test('an answer the output cap could not cut to its limit fails the rule like an oversized one: a retry at a third, then the pointer', async () => {
  const limits: number[] = [];
  const overCap = async (limit: number): Promise<SummaryResult> => {
    limits.push(limit);
    throw summarizerFailed('client', 'over_cap', 'no sentence to cut at');
  };
  assert.deepEqual(await shrink(100, 300, overCap, () => 'pointer'), { summary: 'pointer', pointer: true, backend: 'client' });
  assert.deepEqual(limits, [300, 100]);
  // Any other failure is not a reason for a pointer.
  await assert.rejects(shrink(100, 300, () => Promise.reject(summarizerFailed('client', 'timeout', 'slow')), () => 'p'), /slow/);
});

test('a summarizer error is not swallowed', async () => {
  await assert.rejects(shrink(100, 300, () => Promise.reject(new Error('boom')), () => 'p'), /boom/);
});

test('a node names its id, rows, depth and the tool that reads its rows', () => {
  assert.equal(nodeHeader({ node: 17, firstSeq: 1204, lastSeq: 1388, depth: 1 }), '[lcm node 17 · rows #1204-#1388 · depth 1 · lcm_expand {"node":17} reads the original rows]');
});
