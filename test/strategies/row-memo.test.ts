// The kernel's row memo: row sizes and own inputs kept on the row objects for one target, and
// the tail projection kept across requests (projectTail), extended as rows are appended and
// built ahead in slices for a long tail (warmRowMemo).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { appendRows } from '../../storage/transcript/write.ts';
import { inputsTokens } from '../../strategies/estimate.ts';
import { historyRows } from '../../strategies/harness/history-rows.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { projectTail, rowMemo, WARM_SIZING_ROWS, warmRowMemo } from '../../strategies/harness/row-memo.ts';
import { forModel, plainTarget, tokenCounter } from '../../strategies/projection.ts';
import { assistant, tempDb } from '../storage/factories.ts';
import { sessionWithTurns, strategyInput } from './engine-fixtures.ts';

test('the tail projection is forModel of the rows with its estimate, and appended rows only extend it', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 6);
  // A call left open at the end: its synthetic answer is in the projection, not in the projector.
  await appendRows(db, 's', [assistant('running the tests', ['open-call'])]);
  const cache = new KernelCache();
  const input = strategyInput(db, cache);
  const rows = historyRows(input, 1);
  const first = projectTail(input, rows);
  const expected = forModel(rows, input.target);
  assert.deepEqual(first.inputs, expected);
  assert.equal(first.tokens, inputsTokens(expected, input.target.maxImageEdgePx));
  const projector = rowMemo(input).projector;
  assert.equal(projector?.count, rows.length);

  await appendRows(db, 's', [assistant('still running'), assistant('done')]);
  const later = strategyInput(db, cache);
  const grown = historyRows(later, 1);
  const second = projectTail(later, grown);
  assert.equal(rowMemo(later).projector, projector, 'the same projector, extended');
  assert.equal(projector?.count, grown.length);
  assert.deepEqual(second.inputs, forModel(grown, later.target));
  // The earlier request is not changed by the rows projected after it.
  assert.deepEqual(first.inputs, expected);
});

test('sizes kept on the rows leave them equal to a fresh read, and belong to one target', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 4, 4000);
  const cache = new KernelCache();
  const plain = strategyInput(db, cache);
  const rows = historyRows(plain, 1);
  const memo = rowMemo(plain);
  const count = tokenCounter(rows, plain.target, memo.sizes, memo.inputs);
  assert.ok(rows.every((r) => memo.sizes.has(r) && memo.inputs.has(r)));
  const fresh = historyRows(strategyInput(db, new KernelCache()), 1);
  assert.deepEqual(rows, fresh);
  assert.equal(JSON.stringify(rows), JSON.stringify(fresh));

  // A capped target gets a memo of its own: it sees none of the other's sizes, and its own differ.
  const capped = strategyInput(db, cache, { ...plainTarget('s'), maxOutputTokens: 100 });
  const cappedMemo = rowMemo(capped);
  assert.notEqual(cappedMemo, memo);
  assert.ok(rows.every((r) => !cappedMemo.sizes.has(r)));
  const cappedCount = tokenCounter(rows, capped.target, cappedMemo.sizes, cappedMemo.inputs);
  const result = rows.find((r) => r.body.kind === 'tool_result')!;
  assert.ok(cappedCount(result) < count(result), `capped ${cappedCount(result)} < plain ${count(result)}`);
  assert.equal(cappedMemo.sizes.get(result), cappedCount(result));
});

test('a long tail is sized and projected ahead, so the request only joins it', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', Math.ceil(WARM_SIZING_ROWS / 4) + 10, 40);
  const input = strategyInput(db, new KernelCache());
  const rows = historyRows(input, 1);
  assert.ok(rows.length >= WARM_SIZING_ROWS);
  const warming = warmRowMemo(input, rows);
  assert.ok(warming !== undefined, 'a long unsized tail is warmed');
  await warming;
  const memo = rowMemo(input);
  assert.ok(rows.every((r) => memo.sizes.has(r)));
  assert.equal(memo.projector?.count, rows.length);
  assert.equal(warmRowMemo(input, rows), undefined, 'nothing left to warm');
  assert.deepEqual(projectTail(input, rows).inputs, forModel(rows, input.target));
});
