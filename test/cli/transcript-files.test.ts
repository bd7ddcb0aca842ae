// How `albedo import` cuts a file's rows into appends: each append is one transaction on the
// daemon's event loop, so it stays small (BATCH_ROWS, BATCH_BYTES); order and every row kept.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BATCH_BYTES, BATCH_ROWS, batches } from '../../cli/transcript-files.ts';
import type { RowIn } from '../../protocol/rows.ts';

const row = (i: number, chars: number): RowIn => ({ kind: 'user', origin: 'user', key: `k${i}`, content: [{ type: 'text', text: 'x'.repeat(chars) }] });

test('appends hold at most BATCH_ROWS rows and about BATCH_BYTES, in order, every row once', () => {
  assert.ok(BATCH_ROWS <= 250 && BATCH_BYTES <= 1024 * 1024, 'an append of a long session held the loop 65-120 ms at 1,000 rows and 8 MiB');
  const small = Array.from({ length: 1001 }, (_, i) => row(i, 10));
  const bySize = Array.from({ length: 40 }, (_, i) => row(i, 100_000));
  const lone = [row(0, 10), row(1, 2 * BATCH_BYTES), row(2, 10)];
  for (const rows of [small, bySize, lone]) {
    const plan = batches(rows);
    assert.deepEqual(plan.flatMap((b) => b.rows), rows);
    for (const b of plan) {
      assert.ok(b.rows.length >= 1 && b.rows.length <= BATCH_ROWS);
      assert.equal(b.bytes, b.rows.reduce((n, r) => n + JSON.stringify(r).length, 0));
      assert.ok(b.bytes <= BATCH_BYTES || b.rows.length === 1, 'only a row over the bound alone goes over it');
    }
  }
  assert.equal(batches(small).length, Math.ceil(1001 / BATCH_ROWS));
  assert.equal(batches(bySize).length, 4, '~100 KB rows: ten to an append');
  assert.deepEqual(batches(lone).map((b) => b.rows.length), [1, 1, 1]);
});
