// The turn long work takes between slices (protocol/time-slice.ts, giveWay): one turn of the
// event loop, and, while a registered server has bytes in transit, a wait until they have
// moved, bounded by their progress and by a ceiling. Transits here are counters the test moves
// itself.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GIVE_WAY_MAX_MS, GIVE_WAY_STALL_MS, giveWay, giveWayTo, runStepsSliced, SLICE_MS, type Steps, TransitTally, yieldToEventLoop } from '../../protocol/time-slice.ts';

test('with nothing registered, a turn never asks about transfers', async () => {
  let asked = 0;
  const stop = giveWayTo(() => {
    asked++;
    return undefined;
  });
  stop();
  await giveWay();
  assert.equal(asked, 0);
});

test('a turn waits while a transfer moves, and ends once it is done', async (t) => {
  let moved = 0;
  let done = false;
  const stop = giveWayTo(() => {
    if (done) return undefined;
    moved += 100;
    if (moved >= 500) done = true;
    return moved;
  });
  t.after(stop);
  await giveWay();
  assert.equal(done, true, 'the turn ended before the transfer did');
});

test('a turn goes on once nothing is in transit, without waiting', async (t) => {
  let asked = 0;
  const stop = giveWayTo(() => {
    asked++;
    return undefined;
  });
  t.after(stop);
  await giveWay();
  assert.equal(asked, 1);
});

test('a transfer that stops moving is waited for only GIVE_WAY_STALL_MS', async (t) => {
  let asked = 0;
  const stop = giveWayTo(() => {
    asked++;
    return 42; // in transit, never moving: a client that stopped reading
  });
  t.after(stop);
  const started = performance.now();
  await giveWay();
  assert.ok(performance.now() - started >= GIVE_WAY_STALL_MS, 'it gave up before the stall bound');
  assert.ok(asked > 1, 'it never looked again');
});

test('a transfer that stalled a wait is not waited for again until it moves', async (t) => {
  let moved = 7_000;
  let asked = 0;
  const stop = giveWayTo(() => {
    asked++;
    return moved;
  });
  t.after(stop);
  await giveWay(); // waits GIVE_WAY_STALL_MS, then gives up on it
  asked = 0;
  await giveWay();
  assert.equal(asked, 1, 'it waited again for a transfer that had not moved');
  moved += 1;
  const started = performance.now();
  await giveWay();
  assert.ok(asked > 2 && performance.now() - started >= GIVE_WAY_STALL_MS, 'once it moved, it was waited for again');
});

test('a transfer that keeps moving is waited for at most GIVE_WAY_MAX_MS', async (t) => {
  let moved = 0;
  const stop = giveWayTo(() => (moved += 1));
  t.after(stop);
  const started = performance.now();
  await giveWay();
  assert.ok(performance.now() - started >= GIVE_WAY_MAX_MS, 'it gave up before the ceiling');
  assert.ok(moved > 1);
});

test('several servers: a turn waits until none of them has bytes in transit', async (t) => {
  let a = 3;
  let b = 6;
  const stopA = giveWayTo(() => (a > 0 ? a-- : undefined));
  const stopB = giveWayTo(() => (b > 0 ? b-- : undefined));
  t.after(() => {
    stopA();
    stopB();
  });
  await giveWay();
  assert.equal(a, 0);
  assert.equal(b, 0);
});

test('a plain turn of the event loop never waits for transfers', async (t) => {
  let asked = 0;
  const stop = giveWayTo(() => {
    asked++;
    return 1;
  });
  t.after(stop);
  await yieldToEventLoop();
  assert.equal(asked, 0);
});

test('a tally is in transit while any transfer it began is under way, counting their bytes', () => {
  const tally = new TransitTally();
  assert.equal(tally.transit(), undefined);
  const a = tally.begin();
  const b = tally.begin();
  tally.add(10);
  assert.equal(tally.transit(), 10);
  a();
  a(); // ending twice ends it once
  tally.add(5);
  assert.equal(tally.transit(), 15);
  b();
  assert.equal(tally.transit(), undefined);
});

/** `n` steps of about a millisecond of work each, noting the first step after `seen()` turned true. */
function* busySteps(n: number, seen: () => boolean, firstSeenAt: { step?: number }): Steps<string> {
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    while (performance.now() - t < 1);
    if (seen()) firstSeenAt.step ??= i;
    yield;
  }
  return 'finished';
}

test('sliced steps give the event loop a turn once a slice is used up, and ask stop at each turn', async () => {
  let turned = false;
  setImmediate(() => (turned = true));
  let asked = 0;
  const at: { step?: number } = {};
  const out = await runStepsSliced(busySteps(6 * SLICE_MS, () => turned, at), () => asked++);
  assert.equal(out, 'finished');
  // Steps of a millisecond or more each: a slice is used up after SLICE_MS of them at most.
  assert.ok(at.step !== undefined && at.step <= SLICE_MS, `first seen at step ${at.step}`);
  assert.ok(asked >= 2, `stop asked ${asked} times`);
});

test('a stop that throws ends sliced steps at that turn, with its error', async () => {
  let steps = 0;
  function* counting(): Steps<void> {
    for (;;) {
      const t = performance.now();
      while (performance.now() - t < 1);
      steps++;
      yield;
    }
  }
  await assert.rejects(
    runStepsSliced(counting(), () => {
      throw new Error('cancelled');
    }),
    /cancelled/,
  );
  assert.ok(steps >= 1 && steps <= SLICE_MS, `${steps} steps ran`);
});
