// The shared harness helpers: unit grouping, tail selection, chunking, window resolution and
// validation, the estimates they run on, and the eviction's summarizer transcripts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { imageTokens, inputTokens, textTokens } from '../../strategies/estimate.ts';
import { isDue, type WindowInfo } from '../../strategies/harness/window.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { summaryChunks, summaryText } from '../../strategies/harness/summary-text.ts';
import { chunkUnits, groupUnits, selectTail, type Unit } from '../../strategies/harness/units.ts';
import { resolveWindow, tailBudget, validateWindow } from '../../strategies/harness/window.ts';

const units = (...tokens: number[]): Unit<number>[] => tokens.map((t, i) => ({ items: [i], tokens: t }));

describe('units', () => {
  test('a unit starts at each opener; items before the first opener form a leading unit', () => {
    const items = ['a', 'U1', 'b', 'c', 'U2', 'U3', 'd'];
    const g = groupUnits(items, (x) => x.startsWith('U'), () => 1);
    assert.deepEqual(g.map((u) => u.items), [['a'], ['U1', 'b', 'c'], ['U2'], ['U3', 'd']]);
    assert.deepEqual(g.map((u) => u.tokens), [1, 3, 1, 2]);
  });

  test('the tail always keeps the newest unit, even when it alone is over budget', () => {
    assert.equal(selectTail(units(10, 10, 500), 100), 2);
  });

  test('the tail takes older whole units while they fit, never part of one', () => {
    assert.equal(selectTail(units(50, 40, 30, 20), 60), 2);
    assert.equal(selectTail(units(50, 40, 30, 20), 90), 1);
    assert.equal(selectTail(units(50, 40, 30, 20), 1000), 0);
    assert.equal(selectTail(units(), 10), 0);
  });

  test('chunking keeps order, respects the cap, and keeps an oversized unit whole', () => {
    const chunks = chunkUnits(units(30, 30, 50, 200, 10, 10), 60);
    assert.deepEqual(chunks.map((c) => c.map((u) => u.items[0])), [[0, 1], [2], [3], [4, 5]]);
    assert.deepEqual(chunks.flat().map((u) => u.items[0]), [0, 1, 2, 3, 4, 5]);
  });
});

describe('summary chunks', () => {
  // Exchanges of three rows (a call, its result, a reply) inside units of ten exchanges.
  function history(exchanges: number): StoredRow[] {
    const rows: StoredRow[] = [];
    const add = (body: StoredRow['body'], rowClass: StoredRow['row_class'] = 'other') => rows.push({ session: 's', seq: rows.length + 1, row_class: rowClass, key: null, created_at: 0, body });
    for (let i = 0; i < exchanges; i++) {
      if (i % 10 === 0) add({ kind: 'user', origin: 'user', content: [{ type: 'text', text: `task ${i / 10}` }] }, 'user');
      add({ kind: 'assistant', content: [{ type: 'tool_call', id: `c${i}`, name: 'read_file', arguments: { path: `src/f${i}.ts` } }] });
      add({ kind: 'tool_result', call_id: `c${i}`, is_error: false, content: [{ type: 'text', text: `contents of f${i}\n${'x'.repeat(120)}` }] });
    }
    return rows;
  }

  test('chunks cover the rows in order, break only before a unit or an exchange, and respect the cap', async () => {
    const rows = history(40);
    const chunks: string[] = [];
    for await (const c of summaryChunks(rows, () => 10, 100)) chunks.push(c);
    assert.equal(chunks.join('\n'), summaryText(rows));
    // An exchange (call and result, 20 tokens) or a task line opens each chunk; at most 100 tokens each.
    for (const c of chunks) assert.match(c, /^(¶user: task|→ read_file)/);
    assert.ok(chunks.length >= (rows.length * 10) / 100, `${chunks.length} chunks`);
  });

  test('a long eviction is written with turns for the event loop', async () => {
    const rows = history(20_000);
    let turns = 0;
    const tick = setInterval(() => (turns += 1), 0);
    let chars = 0;
    try {
      for await (const c of summaryChunks(rows, () => 10, 1_000_000)) chars += c.length;
    } finally {
      clearInterval(tick);
    }
    assert.equal(chars, summaryText(rows).length);
    assert.ok(turns > 0, 'the event loop ran while 60,000 rows were written into one transcript');
  });
});

describe('window', () => {
  const settings = { triggerPercent: 80, tailPercent: 25, ratio: 1 };
  const model = { id: 'm', provider: 'anthropic', context_window: 200_000, input: ['text', 'image'] as const };

  test('an explicit window wins over the catalog; without either the window is unknown', () => {
    assert.deepEqual(resolveWindow({ ...settings, contextWindowTokens: 5000 }, model).window, 5000);
    assert.equal(resolveWindow({ ...settings, contextWindowTokens: 5000 }, model).source, 'config');
    assert.equal(resolveWindow(settings, model).window, 200_000);
    assert.equal(resolveWindow(settings, model).source, 'catalog');
    assert.deepEqual(resolveWindow(settings, undefined), { ...settings, window: null, source: 'unknown' });
  });

  test('validation names an unknown window, a tail not below the trigger, and a pinned prompt over the trigger', () => {
    assert.match(validateWindow(resolveWindow(settings, undefined), 0)[0]!, /window unknown/);
    assert.match(validateWindow({ window: 1000, source: 'config', triggerPercent: 50, tailPercent: 60, ratio: 1 }, 0)[0]!, /tailPercent/);
    assert.match(validateWindow({ window: 1000, source: 'config', triggerPercent: 80, tailPercent: 25, ratio: 1 }, 900)[0]!, /system prompt and tools alone/);
    assert.deepEqual(validateWindow({ window: 1000, source: 'config', triggerPercent: 80, tailPercent: 25, ratio: 1 }, 100), []);
  });

  test('a forced tail budget is taken of the smaller of window and history', () => {
    const info = { window: 10_000, source: 'config' as const, triggerPercent: 80, tailPercent: 25, ratio: 1 };
    assert.equal(tailBudget(info, 4000, false), 2500);
    assert.equal(tailBudget(info, 4000, true), 1000);
    assert.equal(tailBudget({ ...info, window: null, source: 'unknown' }, 4000, true), 1000);
  });
});

describe('estimates', () => {
  test('text costs a quarter token per UTF-8 byte, rounded up', () => {
    assert.equal(textTokens(''), 0);
    assert.equal(textTokens('abcd'), 1);
    assert.equal(textTokens('abcde'), 2);
    assert.equal(textTokens('é'), 1);
    assert.equal(textTokens('éééé'), 2);
  });

  test('an image costs by its tiles, whatever its bytes', () => {
    assert.equal(imageTokens(512, 512), 85 + 170 + 20);
    assert.equal(imageTokens(1568, 1568), 85 + 170 * 16 + 20);
    const tiny = inputTokens({ role: 'user', content: [{ type: 'image', hash: 'h', media_type: 'image/png', width: 100, height: 100, data: 'A'.repeat(4_000_000) }] });
    assert.equal(tiny, 12 + imageTokens(100, 100));
  });

  test('the trigger uses exact integer arithmetic, on the calibrated estimate', () => {
    const info = (window: number | null, ratio = 1): WindowInfo => ({ window, source: 'config', triggerPercent: 80, tailPercent: 25, ratio });
    assert.equal(isDue(79, info(100)), false);
    assert.equal(isDue(80, info(100)), true);
    assert.equal(isDue(159_999, info(200_000)), false);
    assert.equal(isDue(160_000, info(200_000)), true);
    // The estimate is calibrated first: 800 estimated tokens at a ratio of 0.1 are 80 of the provider's, 80% of 100.
    assert.equal(isDue(800, info(100, 0.1)), true);
    assert.equal(isDue(790, info(100, 0.1)), false);
    assert.equal(isDue(1_000_000, info(null)), false, 'no known window, no trigger');
  });
});
