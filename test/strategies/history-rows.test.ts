// The per-kernel cache of decoded history rows: extending it after appends gives exactly what
// a fresh read gives, anything that changes earlier rows starts it over, a long lag is read
// ahead in slices, and a compaction's second reader gets the cached rows themselves.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StoredRow } from '../../protocol/rows.ts';
import type { Db } from '../../storage/db.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendNotice, appendRows } from '../../storage/transcript/write.ts';
import { EXTEND_IN_STRETCH_ROWS, historyRows, rowsThroughHead, warmTailRows } from '../../strategies/harness/history-rows.ts';
import { startCut } from '../../strategies/harness/cut.ts';
import { assistant, imageIn, pngBytes, tempDb, toolResult, user } from '../storage/factories.ts';
import { argsFor, sessionWithTurns, strategyInput } from './engine-fixtures.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';

/**
 * Appends a user row with a 64 px image and reads the history into `cache`, then appends a row
 * with a 16 px image and an image_fit notice that replaces the first image with it. Returns the
 * rows cached before the fit.
 */
async function cachedThenFitted(db: Db, cache: KernelCache): Promise<readonly StoredRow[]> {
  const big = await pngBytes(64, 64);
  await appendRows(db, 's', [user('look', { images: [imageIn(big, 'image/png')] })]);
  const before = historyRows(strategyInput(db, cache), 1);
  const shown = before.at(-1)!.body;
  assert.ok(shown.kind === 'user' && shown.content[1]?.type === 'image');
  const small = await pngBytes(16, 16);
  const [fittedSeq] = (await appendRows(db, 's', [user('fit target', { images: [imageIn(small, 'image/png')] })])).seqs;
  const fitted = historyRows(strategyInput(db, new KernelCache()), 1).find((r) => r.seq === fittedSeq)!.body;
  assert.ok(fitted.kind === 'user' && fitted.content[1]?.type === 'image');
  appendNotice(db, argsFor(db, 's').session.sid, { notice: 'image_fit', from_hash: shown.content[1].hash, to: fitted.content[1], reason: 'too large' });
  return before;
}

test('appended rows extend the cached rows, equal to a fresh read', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 5);
  const cache = new KernelCache();
  const first = historyRows(strategyInput(db, cache), 3);
  assert.equal(historyRows(strategyInput(db, cache), 3), first, 'same head: the cached array itself');
  await appendRows(db, 's', [user('more'), assistant('reply')]);
  const extended = historyRows(strategyInput(db, cache), 3);
  assert.deepEqual(extended, historyRows(strategyInput(db, new KernelCache()), 3));
  assert.equal(extended.length, first.length + 2);
});

test('a settle that moves earlier rows starts the cache over', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 2);
  await appendRows(db, 's', [assistant('calling', ['late']), user('typed while the tool ran')]);
  const cache = new KernelCache();
  historyRows(strategyInput(db, cache), 1);
  // The result settles beside its call: the user message's contents move one seq later.
  await appendRows(db, 's', [toolResult('late', 'finally')]);
  const after = historyRows(strategyInput(db, cache), 1);
  assert.deepEqual(after, historyRows(strategyInput(db, new KernelCache()), 1));
  assert.equal(after.at(-1)!.body.kind, 'user');
});

test('a new image fit changes earlier rows, so the cache starts over', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 1);
  const cache = new KernelCache();
  const before = await cachedThenFitted(db, cache);
  const after = historyRows(strategyInput(db, cache), 1);
  assert.deepEqual(after, historyRows(strategyInput(db, new KernelCache()), 1));
  const replaced = after.find((r) => r.seq === before.at(-1)!.seq)!.body;
  assert.ok(replaced.kind === 'user' && replaced.content[1]?.type === 'image' && replaced.content[1].width === 16);
});

const userRows = (n: number, tag: string) => Array.from({ length: n }, (_, j) => user(`${tag} ${j} ${'x'.repeat(100)}`));

test('a cache that lags its head by many rows is extended ahead, with yields; a few new rows are left for the tail read', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  await appendRows(db, 's', userRows(100, 'old'));
  const cache = new KernelCache();
  assert.equal(await warmTailRows(strategyInput(db, cache), startCut()), undefined);
  const before = historyRows(strategyInput(db, cache), 1);

  await appendRows(db, 's', userRows(EXTEND_IN_STRETCH_ROWS - 1, 'few'));
  assert.equal(warmTailRows(strategyInput(db, cache), startCut()), undefined, 'fewer new rows than the threshold: nothing to warm');

  for (let i = 0; i < 8; i++) await appendRows(db, 's', userRows(500, `many${i}`));
  let turns = 0;
  const tick = setInterval(() => (turns += 1), 0);
  const warming = warmTailRows(strategyInput(db, cache), startCut());
  assert.ok(warming !== undefined, 'thousands of new rows are read ahead');
  await warming;
  clearInterval(tick);
  assert.ok(turns > 0, 'the event loop ran while the new rows were decoded');
  const after = historyRows(strategyInput(db, cache), 1);
  assert.deepEqual(after, historyRows(strategyInput(db, new KernelCache()), 1));
  assert.equal(after[0], before[0], 'the rows cached before are kept, not decoded again');
  assert.equal(warmTailRows(strategyInput(db, cache), startCut()), undefined);
});

test('a new image fit among the rows read ahead makes the warm-up read everything again', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  const cache = new KernelCache();
  await cachedThenFitted(db, cache);
  for (let i = 0; i < 2; i++) await appendRows(db, 's', userRows(500, `more${i}`));
  await warmTailRows(strategyInput(db, cache), startCut());
  const after = historyRows(strategyInput(db, cache), 1);
  assert.deepEqual(after, historyRows(strategyInput(db, new KernelCache()), 1));
  const replaced = after[0]!.body;
  assert.ok(replaced.kind === 'user' && replaced.content[1]?.type === 'image' && replaced.content[1].width === 16);
});

test('rowsThroughHead hands out the cached row objects when they cover the range, and reads otherwise', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 6);
  const cache = new KernelCache();
  const cachedRows = historyRows(strategyInput(db, cache), 3);
  const from = cachedRows[4]!.seq;
  const shared = await rowsThroughHead(strategyInput(db, cache), from);
  assert.deepEqual(shared, historyRows(strategyInput(db, new KernelCache()), from));
  assert.ok(shared.every((r, i) => r === cachedRows[4 + i]), 'the same objects, so the row memo knows them');

  const before = await rowsThroughHead(strategyInput(db, cache), 1);
  assert.deepEqual(before, historyRows(strategyInput(db, new KernelCache()), 1), 'rows before the cache are read');
  assert.notEqual(before.at(-1), cachedRows.at(-1));

  await appendRows(db, 's', [user('newer')]);
  const past = await rowsThroughHead(strategyInput(db, cache), from);
  assert.deepEqual(past, historyRows(strategyInput(db, new KernelCache()), from), 'a cache behind the head is not used');
  assert.equal(past.at(-1)!.body.kind, 'user');
});

test('a start that moves forward at the same head slices the cache; the rows it passed serve rowsThroughHead until the head moves', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 6);
  const cache = new KernelCache();
  const whole = historyRows(strategyInput(db, cache), 1);
  const cutAt = whole[6]!.seq;
  const tail = historyRows(strategyInput(db, cache), cutAt);
  assert.deepEqual(tail, historyRows(strategyInput(db, new KernelCache()), cutAt));
  assert.ok(tail.every((r, i) => r === whole[6 + i]), 'a slice of the cached objects, not a new read');

  const passed = await rowsThroughHead(strategyInput(db, cache), 1);
  assert.ok(passed.length === whole.length && passed.every((r, i) => r === whole[i]), 'the rows before the new start are still at hand');

  await appendRows(db, 's', [user('next turn')]);
  historyRows(strategyInput(db, cache), cutAt);
  const reread = await rowsThroughHead(strategyInput(db, cache), 1);
  assert.deepEqual(reread, historyRows(strategyInput(db, new KernelCache()), 1));
  assert.notEqual(reread[0], whole[0], 'once the head moved they are read again');
});
