// Adding an extension as docs/compaction.md says, end to end over the real socket: the test's
// `verbatim` strategy (test/fixtures/extensions/verbatim/, one module value and nothing else)
// is added the way strategies/index.ts lists a shipped one, and the daemon then knows it
// everywhere: `albedo extensions`, its checked section of extensions.json, the prepare path,
// and its memory tool in tools.list and tools.call.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { failsWith, startEach, tempHome } from './harness.ts';

const start = startEach();
const ENTRY = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/extensions/daemon-entry.ts');

test('an extension module added in one line is listed, configured, run and offers its tool', async () => {
  const home = tempHome();
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ extensions: { enable: ['verbatim'] }, verbatim: { contextWindowTokens: 50_000, marker: '[whole history]' } }));
  const d = await start({ home, entry: ENTRY });
  const c = await d.connect();
  await c.call('session.open', { session: 's' });

  const list = await c.call('extensions.list', { session: 's' });
  assert.equal(list.strategy, 'verbatim');
  const entry = list.extensions.find((e) => e.name === 'verbatim');
  assert.deepEqual([entry?.kind, entry?.enabled, entry?.chosen_by, entry?.description], ['strategy', true, 'global', 'the whole history, never compacted (a test fixture)']);
  assert.deepEqual((await c.call('daemon.status', {})).config_errors, [], 'its section is part of the checked schema');

  await c.call('transcript.append', {
    session: 's',
    rows: [
      { kind: 'user', content: [{ type: 'text', text: 'List the files.' }] },
      { kind: 'assistant', content: [{ type: 'tool_call', id: 'c1', name: 'bash', arguments: { command: 'ls' } }] },
      { kind: 'tool_result', call_id: 'c1', content: [{ type: 'text', text: 'a.ts b.ts' }] },
      { kind: 'assistant', content: [{ type: 'text', text: 'Two files.' }] },
    ],
  });
  const p = await c.call('prepare', { session: 's', model: 'claude-sonnet-4-5', instructions: 'You are a coding agent.' });
  assert.equal(p.observation.strategy, 'verbatim');
  const first = p.inputs[0]?.content[0];
  assert.deepEqual(first, { type: 'text', text: '[whole history]' }, 'its own setting, read from its section');
  assert.ok(p.tools.some((t) => t.name === 'verbatim_count'), 'its tool goes out with the request');

  const tools = await c.call('tools.list', { session: 's' });
  assert.ok(tools.tools.some((t) => t.name === 'verbatim_count' && t.description.startsWith('Count this session')));
  const counted = await c.call('tools.call', { session: 's', name: 'verbatim_count', arguments: { kind: 'assistant' } });
  assert.deepEqual(counted.result, { kind: 'assistant', rows: 2 });
  await failsWith(c.call('tools.call', { session: 's', name: 'verbatim_count', arguments: { kind: 'notice' } }), 'invalid_tool_arguments');
  await c.close();
});

test("a bad value in the added extension's section is refused like a shipped one's", async () => {
  const home = tempHome();
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ extensions: { enable: ['verbatim'] }, verbatim: { marker: '' } }));
  const d = await start({ home, entry: ENTRY });
  const c = await d.connect();
  const status = await c.call('daemon.status', {});
  // Its own field named: the section is checked with its schema, not refused as an unknown key.
  assert.ok(status.config_errors.some((e) => e.file === 'extensions.json' && /verbatim\.marker/.test(e.message)), JSON.stringify(status.config_errors));
  await c.close();
});

test("an added extension's table comes from its own migrations, is written by its compaction and read by its tool", async () => {
  const home = tempHome();
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ extensions: { enable: ['verbatim'] } }));
  let d = await start({ home, entry: ENTRY });
  let c = await d.connect();
  await c.call('session.open', { session: 's' });
  await c.call('transcript.append', { session: 's', rows: [{ kind: 'user', content: [{ type: 'text', text: 'Keep everything.' }] }] });
  const done = await c.call('compact', { session: 's', focus: 'the plan' });
  assert.equal(done.compacted, true, 'a forced /compact commits its mark');
  assert.deepEqual((await c.call('tools.call', { session: 's', name: 'verbatim_marks', arguments: {} })).result, { marks: [{ head: 1, focus: 'the plan' }] });
  const status = await c.call('daemon.status', { storage_parts: true });
  assert.ok((status.storage.parts?.strategy_state ?? 0) > 0, 'its table counts as strategy state');
  await c.close();
  await d.stop();

  // Started again on the same file: the table is at its version already and keeps its rows.
  d = await start({ home, entry: ENTRY });
  c = await d.connect();
  assert.deepEqual((await c.call('tools.call', { session: 's', name: 'verbatim_marks', arguments: {} })).result, { marks: [{ head: 1, focus: 'the plan' }] });
  await c.close();
});
