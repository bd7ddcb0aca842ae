// The per-kernel cache of decoded history rows: extending it after appends gives exactly what
// a fresh read gives, and anything that changes earlier rows starts it over.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Db } from '../../storage/db.ts';
import { appendNotice, appendRows } from '../../storage/transcript.ts';
import type { StrategyInput } from '../../strategies/contract.ts';
import { historyRows } from '../../strategies/harness/history-rows.ts';
import { plainTarget } from '../../strategies/projection.ts';
import { assistant, imageIn, pngBytes, tempDb, toolResult, user } from '../storage/factories.ts';
import { argsFor, sessionWithTurns } from './engine-fixtures.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';

function inputFor(db: Db, cache: KernelCache): StrategyInput {
  const a = argsFor(db, 's');
  return {
    db,
    session: a.session,
    head: a.head,
    window: { window: 100_000, source: 'config', triggerPercent: 80, tailPercent: 25, ratio: 1 },
    settings: { triggerPercent: 80, tailPercent: 25 },
    pinnedTokens: 0,
    folds: [],
    target: plainTarget('s'),
    cache,
  };
}

test('appended rows extend the cached rows, equal to a fresh read', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 5);
  const cache = new KernelCache();
  const first = historyRows(inputFor(db, cache), 3);
  assert.equal(historyRows(inputFor(db, cache), 3), first, 'same head: the cached array itself');
  await appendRows(db, 's', [user('more'), assistant('reply')]);
  const extended = historyRows(inputFor(db, cache), 3);
  assert.deepEqual(extended, historyRows(inputFor(db, new KernelCache()), 3));
  assert.equal(extended.length, first.length + 2);
});

test('a settle that moves earlier rows starts the cache over', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 2);
  await appendRows(db, 's', [assistant('calling', ['late']), user('typed while the tool ran')]);
  const cache = new KernelCache();
  historyRows(inputFor(db, cache), 1);
  // The result settles beside its call: the user message's contents move one seq later.
  await appendRows(db, 's', [toolResult('late', 'finally')]);
  const after = historyRows(inputFor(db, cache), 1);
  assert.deepEqual(after, historyRows(inputFor(db, new KernelCache()), 1));
  assert.equal(after.at(-1)!.body.kind, 'user');
});

test('a new image fit changes earlier rows, so the cache starts over', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 1);
  const big = await pngBytes(64, 64);
  await appendRows(db, 's', [user('look', { images: [imageIn(big, 'image/png')] })]);
  const cache = new KernelCache();
  const before = historyRows(inputFor(db, cache), 1);
  const shown = before.at(-1)!.body;
  assert.ok(shown.kind === 'user' && shown.content[1]?.type === 'image');
  const small = await pngBytes(16, 16);
  const [fittedSeq] = (await appendRows(db, 's', [user('fit target', { images: [imageIn(small, 'image/png')] })])).seqs;
  const fitted = historyRows(inputFor(db, new KernelCache()), 1).find((r) => r.seq === fittedSeq)!.body;
  assert.ok(fitted.kind === 'user' && fitted.content[1]?.type === 'image');
  appendNotice(db, argsFor(db, 's').session.sid, { notice: 'image_fit', from_hash: shown.content[1].hash, to: fitted.content[1], reason: 'too large' });
  const after = historyRows(inputFor(db, cache), 1);
  assert.deepEqual(after, historyRows(inputFor(db, new KernelCache()), 1));
  const replaced = after.find((r) => r.seq === before.at(-1)!.seq)!.body;
  assert.ok(replaced.kind === 'user' && replaced.content[1]?.type === 'image' && replaced.content[1].width === 16);
});
