// The acceptance replay (issue 6) over a small real-shaped Claude Code transcript: one long
// autonomous turn (a prompt, then 34 tool exchanges), one 60 KB tool output, a tool call that was
// aborted and never got a result, and a few ordinary turns, replayed turn by turn into a real
// daemon with an 8000-token window. The targets are asserted exactly as the issue states them.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { importTranscript, type ImportedTranscript } from '../../cli/import/index.ts';
import { replayTranscript, type ReplayStats } from '../../scripts/replay/replay.ts';
import { startDaemon, tempHome, type DaemonHandle } from './harness.ts';

const WINDOW = 8000;
const SESSION = 'b3f1c2d4-replay';

/** A Claude Code session file, written line by line as Claude Code logs it. */
function transcript(): string {
  const lines: unknown[] = [];
  let n = 0;
  let parent: string | null = null;
  const base = (type: string, extra: Record<string, unknown>): Record<string, unknown> => {
    const uuid = `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`;
    const rec = {
      parentUuid: parent,
      isSidechain: false,
      userType: 'external',
      cwd: '/home/dev/shop',
      sessionId: SESSION,
      version: '2.1.40',
      gitBranch: 'main',
      type,
      uuid,
      timestamp: new Date(Date.UTC(2026, 0, 12, 10, 0, n)).toISOString(),
      ...extra,
    };
    parent = uuid;
    return rec;
  };
  const user = (content: unknown, extra: Record<string, unknown> = {}): void => void lines.push(base('user', { message: { role: 'user', content }, ...extra }));
  let msg = 0;
  const assistant = (blocks: unknown[]): void => {
    const id = `msg_01${String(++msg).padStart(20, '0')}`;
    for (const b of blocks) {
      lines.push(base('assistant', { requestId: `req_${msg}`, message: { id, type: 'message', role: 'assistant', model: 'claude-sonnet-4-5-20250929', content: [b], stop_reason: null, usage: { input_tokens: 3, output_tokens: 40 } } }));
    }
  };
  let call = 0;
  const toolUse = (name: string, input: Record<string, unknown>): { type: string; id: string; name: string; input: Record<string, unknown> } => ({ type: 'tool_use', id: `toolu_01${String(++call).padStart(20, '0')}`, name, input });
  const result = (id: string, content: string, isError = false): void => user([{ tool_use_id: id, type: 'tool_result', content, ...(isError ? { is_error: true } : {}) }], { sourceToolAssistantUUID: parent });
  const source = (file: string, lines: number): string =>
    Array.from(
      { length: lines },
      (_, i) =>
        `${String(i + 1).padStart(6)}\t${
          i % 7 === 0 ? `export function ${file.replace(/\W/g, '_')}_${i}(items: Item[]): number {` : i % 7 === 6 ? '}' : `  const v${i} = items.filter((x) => x.qty > ${i % 5}).reduce((s, x) => s + x.price * x.qty, 0);`
        }`,
    ).join('\n');

  // Two ordinary turns.
  lines.push({ type: 'file-history-snapshot', messageId: 'x', snapshot: { trackedFileBackups: {} }, isSnapshotUpdate: false });
  user('What does src/cart.ts export?');
  const r1 = toolUse('Read', { file_path: '/home/dev/shop/src/cart.ts' });
  assistant([{ type: 'text', text: 'Let me read it.' }, r1]);
  result(r1.id, source('cart', 30));
  assistant([{ type: 'text', text: 'It exports total(), subtotal() and applyDiscount(); total() ignores per-item discounts.' }]);
  user('Does the checkout page use total()?');
  const g1 = toolUse('Grep', { pattern: 'total\\(', path: 'src' });
  assistant([g1]);
  result(g1.id, 'src/pages/checkout.tsx:41:  const sum = total(cart.items);\nsrc/api/order.ts:18:  amount: total(items),');
  assistant([{ type: 'text', text: 'Yes: checkout.tsx line 41 and the order API both call it.' }]);

  // One long autonomous turn: a prompt, then 34 exchanges without the user.
  user('Make every price computation discount-aware, update the tests, and get the whole suite green. Work through it without asking me.');
  const steps: Array<[string, Record<string, unknown>, () => string]> = [];
  for (let i = 0; i < 34; i++) {
    const file = `src/pricing/part${i % 9}.ts`;
    if (i === 17) {
      steps.push([
        'Bash',
        { command: 'npm test -- --reporter=verbose', description: 'Run the whole suite' },
        () => Array.from({ length: 1400 }, (_, k) => `  ${k % 13 === 0 ? '✗' : '✓'} pricing › case ${k}: discount ${k % 40}% on ${k % 9 + 1} items (${(k % 17) + 2} ms)`).join('\n').slice(0, 60_000),
      ]);
    } else if (i % 3 === 0) steps.push(['Read', { file_path: `/home/dev/shop/${file}` }, () => source(file, 25)]);
    else if (i % 3 === 1) {
      steps.push([
        'Edit',
        { file_path: `/home/dev/shop/${file}`, old_string: 'x.price * x.qty', new_string: 'x.price * x.qty * (1 - (x.discount ?? 0))' },
        () => `The file /home/dev/shop/${file} has been updated. Here's the result of running \`cat -n\` on a snippet:\n${source(file, 8)}`,
      ]);
    } else {steps.push(['Bash', { command: `npx vitest run test/pricing/part${i % 9}.test.ts` }, () =>
        ` ✓ test/pricing/part${i % 9}.test.ts (${4 + (i % 5)} tests) ${20 + i} ms\n\n Test Files  1 passed (1)\n      Tests  ${4 + (i % 5)} passed`]);}
  }
  steps.forEach(([name, input, out], i) => {
    const c = toolUse(name, input);
    assistant(i % 4 === 0 ? [{ type: 'thinking', thinking: `Step ${i}: next is ${String(input.file_path ?? input.command)}.`, signature: `sig${i}` }, { type: 'text', text: `Working on step ${i}.` }, c] : [c]);
    result(c.id, out(), i === 17);
  });
  assistant([{ type: 'text', text: 'All price computations now apply discounts; the suite is green except the 70 cases that relied on the old rounding, which I updated.' }]);

  // A tool call the user aborted: it never gets a result.
  user('Now deploy it to staging.');
  const aborted = toolUse('Bash', { command: 'npm run deploy -- --env staging', description: 'Deploy to staging' });
  assistant([{ type: 'text', text: 'Deploying to staging.' }, aborted]);
  user([{ type: 'text', text: '[Request interrupted by user for tool use]' }]);
  user('Wait, do not deploy. Just write the changelog entry.');
  const w = toolUse('Edit', { file_path: '/home/dev/shop/CHANGELOG.md', old_string: '## Unreleased', new_string: '## Unreleased\n- Prices apply per-item discounts everywhere.' });
  assistant([w]);
  result(w.id, 'The file /home/dev/shop/CHANGELOG.md has been updated.');
  assistant([{ type: 'text', text: 'Added the changelog entry under Unreleased.' }]);

  // A few more ordinary turns.
  for (let t = 0; t < 3; t++) {
    user(`Question ${t + 1}: which module rounds the totals?`);
    const c = toolUse('Grep', { pattern: 'Math.round', path: 'src' });
    assistant([c]);
    result(c.id, `src/pricing/round.ts:${10 + t}:  return Math.round(v * 100) / 100;`);
    assistant([{ type: 'text', text: `src/pricing/round.ts rounds to cents (answer ${t + 1}).` }]);
  }
  return `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
}

describe('replay of a real-shaped agent session at an 8000-token window (issue 6 acceptance)', () => {
  let d: DaemonHandle;
  let imported: ImportedTranscript;
  let stats: ReplayStats;

  before(async () => {
    imported = importTranscript(transcript());
    const home = tempHome();
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: WINDOW } }));
    d = await startDaemon({ home });
    const client = await d.connect();
    stats = await replayTranscript(client, 'replay', imported, { window: WINDOW });
  });
  after(async () => {
    await d?.stop();
    if (d !== undefined) fs.rmSync(d.home, { recursive: true, force: true });
  });

  test('the transcript has the shape the acceptance needs', () => {
    const bigResult = imported.rows.some((r) => r.kind === 'tool_result' && r.content.some((p) => p.type === 'text' && p.text.length >= 50_000));
    assert.ok(bigResult, 'one tool output far larger than 10% of the window');
    assert.ok(stats.prepares >= 40, `prepares: ${stats.prepares}`);
    assert.ok(stats.first_due !== null, 'a compaction becomes due');
  });

  test('every row is accepted', () => {
    assert.deepEqual(stats.rows, { total: imported.rows.length, accepted: imported.rows.length, rejected: 0, rejected_by_code: {} });
  });

  test('every prepare from the first due one on is within the window by calibrated tokens', () => {
    const over = stats.records.slice(stats.first_due ?? 0).filter((r) => r.calibrated > WINDOW);
    assert.equal(over.length, 0, `${over.length} of ${stats.prepares_after_due} prepares over the window; largest ${stats.max_calibrated_ratio.toFixed(2)}x (${over.slice(0, 5).map((r) => r.calibrated).join(', ')} ...)`);
  });

  test('no prepared request has a call without its result', () => {
    assert.equal(stats.calls_without_results, 0, `${stats.calls_without_results} unanswered calls over ${stats.prepares_with_unanswered_calls} requests`);
    assert.equal(stats.results_without_calls, 0);
  });

  test('no prepare is latched', () => {
    assert.equal(stats.latched, 0, `${stats.latched} latched prepares`);
  });

  test('the request prefix is stable between compactions', () => {
    const breaks = stats.records.flatMap((r, i) => (r.prefix_stable === false ? [i] : []));
    assert.equal(stats.prefix_breaks, 0, `${stats.prefix_breaks} of ${stats.prefix_checks} checks broke the prefix, at prepares ${breaks.join(', ')}`);
  });
});
