// The bench's bound on its own full run (issue 35: 30 minutes): judged on the full run only, with
// the parts that took longest named, and each part's time recorded in the order the parts ran.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_LCM, DEFAULT_SIZES, QUICK_SIZES, SECTIONS } from '../../../scripts/bench/args.ts';
import { FULL_RUN_TARGET_MS, isFullRun, judgeRunTime, PartClock, renderRunTime, type RunArgs } from '../../../scripts/bench/run-time.ts';

const full: RunArgs = { quick: false, sizes: [...DEFAULT_SIZES], only: [...SECTIONS], lcm: { ...DEFAULT_LCM } };
const parts = [
  { part: 'grep @1M', ms: 9 * 60_000 },
  { part: 'fairness', ms: 4 * 60_000 },
  { part: 'frames', ms: 30_000 },
  { part: 'replay', ms: 5 * 60_000 },
];

test('the full run is judged against 30 minutes, naming its three longest parts', () => {
  const [over] = judgeRunTime(full, FULL_RUN_TARGET_MS + 60_000, parts);
  assert.equal(over?.pass, false);
  assert.match(over?.measured ?? '', /^31\.0 min \(longest parts: grep @1M 9\.0 min, replay 5\.0 min, fairness 4\.0 min\)$/);
  const [under] = judgeRunTime(full, 28 * 60_000, parts);
  assert.equal(under?.pass, true);
  assert.equal(under?.target, 'the full run within 30 minutes');
});

test('a run narrowed or shrunk by any flag is not judged', () => {
  assert.equal(isFullRun(full), true);
  const narrower: RunArgs[] = [
    { ...full, quick: true },
    { ...full, sizes: [...QUICK_SIZES] },
    { ...full, sizes: DEFAULT_SIZES.slice(0, 2) },
    { ...full, only: SECTIONS.filter((s) => s !== 'fairness') },
    { ...full, lcm: { ...DEFAULT_LCM, rows: 100_000 } },
  ];
  for (const args of narrower) {
    assert.equal(isFullRun(args), false, JSON.stringify(args));
    assert.deepEqual(judgeRunTime(args, 2 * FULL_RUN_TARGET_MS, parts), []);
  }
});

test('the clock records each part once, in order, also when the part throws', async () => {
  const clock = new PartClock();
  assert.equal(await clock.time('a', () => 1), 1);
  await assert.rejects(clock.time('b', () => Promise.reject(new Error('boom'))), /boom/);
  assert.equal(await clock.time('c', async () => 'x'), 'x');
  assert.deepEqual(clock.parts.map((p) => p.part), ['a', 'b', 'c']);
  assert.ok(clock.parts.every((p) => p.ms >= 0));
});

test('the table gives each part its share of the run and what fell between parts', () => {
  const text = renderRunTime([{ part: 'grep @1M', ms: 600_000 }, { part: 'replay', ms: 300_000 }], 1_000_000);
  assert.match(text, /grep @1M\s+600\.0 s\s+60\.0%/);
  assert.match(text, /replay\s+300\.0 s\s+30\.0%/);
  assert.match(text, /\(between parts\)\s+100\.0 s\s+10\.0%/);
  assert.equal(renderRunTime([], 1000), '');
});
