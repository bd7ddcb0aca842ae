// The eval's probes (scripts/eval/probes.ts) on hand-made rows: which probes are in force at a
// request, and when a request's text keeps each kind.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RowIn } from '../../../protocol/rows.ts';
import { KEY_CHARS, kept, mentions, normalise, ProbeSet, type Probe } from '../../../scripts/eval/probes.ts';

const user = (text: string): RowIn => ({ kind: 'user', origin: 'user', content: [{ type: 'text', text }] });
const said = (text: string): RowIn => ({ kind: 'assistant', content: [{ type: 'text', text }] });
const call = (id: string, name: string, args: Record<string, unknown>): RowIn => ({ kind: 'assistant', content: [{ type: 'tool_call', id, name, arguments: args }] });
const result = (id: string, text: string): RowIn => ({ kind: 'tool_result', call_id: id, is_error: false, content: [{ type: 'text', text }] });

const rows: RowIn[] = [
  /* 0 */ user('Fix the totals in src/cart/total.ts. Never touch the generated schema.ts file. Thanks.'),
  /* 1 */ call('c1', 'Read', { file_path: '/repo/src/cart/total.ts' }),
  /* 2 */ result('c1', 'export const computeTotalsOnce = 1; // ERR_TOTAL_4711 and src/cart/total.ts'),
  /* 3 */ call('c2', 'Edit', { file_path: '/repo/src/cart/total.ts', old_string: 'a', new_string: 'b' }),
  /* 4 */ result('c2', 'Edited.'),
  /* 5 */ call('c3', 'TodoWrite', { todos: [{ content: 'Fix totals', status: 'completed' }, { content: 'Add a test for coupons', status: 'in_progress' }, { content: 'Run the linter', status: 'pending' }] }),
  /* 6 */ call('c4', 'apply_patch', { input: '*** Begin Patch\n*** Add File: /repo/src/api/orders.ts\n+x\n*** End Patch' }),
  /* 7 */ said('Totals fixed. Shall I also add the orders endpoint?'),
  /* 8 */ user('Yes, do that, but always keep the old route working.'),
  /* 9 */ said('Working on it.'),
];

const byKind = (ps: readonly Probe[], kind: Probe['kind']): string[] => ps.filter((p) => p.kind === kind).map((p) => p.key);

test('recall probes: identifiers of one row only, from tool outputs and user messages, once that row left', () => {
  const set = new ProbeSet(rows);
  assert.deepEqual(byKind(set.at(10, new Set()), 'recall'), [], 'nothing evicted, nothing to recall');
  const recall = byKind(set.at(10, new Set([0, 1, 2])), 'recall');
  assert.ok(recall.includes('computeTotalsOnce') && recall.includes('ERR_TOTAL_4711'), recall.join(', '));
  // src/cart/total.ts occurs in several rows (and in the calls): not a recall probe.
  assert.ok(!recall.includes('src/cart/total.ts'));
  assert.ok(recall.includes('schema.ts'), 'an identifier of the user message counts');
});

test('decision probes: the constraint sentences of user messages that left', () => {
  const set = new ProbeSet(rows);
  assert.deepEqual(byKind(set.at(10, new Set([0])), 'decision'), ['Never touch the generated schema.ts file.']);
  assert.deepEqual(byKind(set.at(10, new Set([1])), 'decision'), [], 'a decision still in the request is not probed');
});

test('artifact probes: every file modified so far, by the ledger parser of each agent tool', () => {
  const set = new ProbeSet(rows);
  assert.deepEqual(byKind(set.at(3, new Set([0])), 'artifact'), [], 'a read is not a modification');
  assert.deepEqual(byKind(set.at(10, new Set([0])), 'artifact'), ['/repo/src/cart/total.ts', '/repo/src/api/orders.ts']);
  assert.equal(set.modifiedRoot(10), '/repo/src/');
});

test('continuation probes: the latest user message, the assistant text before it, the open plan items', () => {
  const set = new ProbeSet(rows);
  assert.deepEqual(byKind(set.at(10, new Set([0])), 'continuation'), ['Yes, do that, but always keep the old route working.', 'Totals fixed. Shall I also add the orders endpoint?', 'Add a test for coupons', 'Run the linter']);
  // Before the second user message: the first one, and no assistant text before it.
  assert.deepEqual(byKind(set.at(5, new Set([0])), 'continuation'), ['Fix the totals in src/cart/total.ts. Never touch the generated schema.ts file. Thanks.'.slice(0, KEY_CHARS).trim()]);
});

test('a file is kept when named whole, relative to a directory the text names, or by a directory below the shared root', () => {
  const probe: Probe = { kind: 'artifact', row: 3, key: '/repo/src/cart/total.ts', path: true, grep: '/repo/src/cart/total.ts' };
  const keeps = (text: string, root = '/repo/src/'): boolean => kept(probe, text, normalise(text), root);
  assert.ok(keeps('Changed: /repo/src/cart/total.ts (2 changes)'));
  assert.ok(keeps('Paths below are under /repo/src/\nChanged: cart/total.ts (1 change; #3)'));
  assert.ok(keeps('Paths below are under /repo/\nChanged: src/cart/ (3 files changed, last #9)'), 'a collapsed directory below the root');
  assert.ok(!keeps('Paths below are under /repo/src/\nChanged: api/orders.ts'), 'the shared root alone names no file');
  assert.ok(!keeps('Changed: /repo/src/cart/total.tsx and /other/repo/src/cart/total.ts'), 'a longer path is another file');
  assert.ok(!keeps('nothing here'));
  const text: Probe = { kind: 'continuation', row: 7, key: 'Totals fixed. Shall I also add the orders endpoint?', grep: 'Totals fixed.' };
  assert.ok(kept(text, '', normalise('wrote: "Totals   fixed.\nShall I also add the orders endpoint?"'), ''), 'whitespace does not matter');
});

test('mentions: a name standing on its own, not inside a longer path or name', () => {
  assert.ok(mentions('see src/a.ts.', 'src/a.ts'));
  assert.ok(mentions('(src/a.ts)', 'src/a.ts'));
  assert.ok(!mentions('lib/src/a.ts', 'src/a.ts'));
  assert.ok(!mentions('src/a.tsx', 'src/a.ts'));
  assert.ok(!mentions('src/a.ts.bak', 'src/a.ts'));
  assert.ok(mentions('under src/ are', 'src/'));
});
