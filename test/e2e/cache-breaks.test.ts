// Cache-break attribution over the real socket: a session's requests are prepared turn after
// turn, and /context says which part broke the prefix the provider had cached, and when: the
// client's instructions, a compaction, a model switch, rows settled in place, and the provider
// itself (cached tokens far below what stayed identical).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { ParamsIn } from '../../protocol/methods.ts';
import { startEach, tempHome } from './harness.ts';

const start = startEach();
type Rows = ParamsIn<'transcript.append'>['rows'];

function turn(i: number): Rows {
  return [
    { kind: 'user', content: [{ type: 'text', text: `step ${i}: make test ${i} pass in src/part${i}.ts` }] },
    { kind: 'assistant', content: [{ type: 'text', text: `Test ${i} passes now; ${'details '.repeat(20)}` }] },
  ];
}

test('/context names the part of the request that broke the cached prefix', async () => {
  const home = tempHome();
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: 8000 }, extensions: { disable: ['notes'] } }));
  const d = await start({ home });
  const c = await d.connect();
  await c.call('session.open', { session: 's' });
  await c.call('transcript.append', { session: 's', rows: Array.from({ length: 30 }, (_, k) => turn(100 + k)).flat() });
  const breaks = async () => (await c.call('context', { session: 's' })).observation.cache_breaks.map((b) => b.part);
  const prepare = (instructions = 'You are a coding agent.', model = 'claude-sonnet-4-5') => c.call('prepare', { session: 's', model, instructions });

  for (let i = 0; i < 3; i++) {
    await c.call('transcript.append', { session: 's', rows: turn(i) });
    const p = await prepare();
    await c.call('usage.report', { session: 's', prepared_id: p.prepared_id, input_tokens: p.observation.estimated_input_tokens, cached_tokens: Math.floor(p.observation.estimated_input_tokens * 0.9) });
  }
  assert.deepEqual(await breaks(), [], 'ordinary turns keep the prefix');

  await prepare('You are a coding agent. Be brief.');
  assert.deepEqual(await breaks(), ['system']);

  const compacted = await c.call('compact', { session: 's' });
  assert.equal(compacted.compacted, true, compacted.reason ?? '');
  assert.deepEqual(await breaks(), ['system', 'compaction']);

  await prepare('You are a coding agent. Be brief.', 'gpt-5');
  assert.deepEqual(await breaks(), ['system', 'compaction', 'model']);

  // The prefix stayed, yet the provider reports almost nothing cached: its own doing.
  await c.call('transcript.append', { session: 's', rows: turn(3) });
  const p = await prepare('You are a coding agent. Be brief.', 'gpt-5');
  await c.call('usage.report', { session: 's', prepared_id: p.prepared_id, input_tokens: p.observation.estimated_input_tokens, cached_tokens: 0 });
  const ctx = await c.call('context', { session: 's', format: 'text' });
  assert.deepEqual(ctx.observation.cache_breaks.map((b) => b.part), ['system', 'compaction', 'model', 'provider']);
  assert.match(ctx.text ?? '', /cache break .* \(provider\): the provider reported 0 cached tokens/);

  // A late tool result settles beside its call, inside rows already sent.
  await c.call('transcript.append', { session: 's', rows: [{ kind: 'assistant', content: [{ type: 'tool_call', id: 'late', name: 'bash', arguments: { cmd: 'make' } }] }, ...turn(4)] });
  await prepare('You are a coding agent. Be brief.', 'gpt-5');
  await c.call('transcript.append', { session: 's', rows: [{ kind: 'tool_result', call_id: 'late', content: [{ type: 'text', text: 'built' }] }] });
  await prepare('You are a coding agent. Be brief.', 'gpt-5');
  assert.deepEqual((await breaks()).slice(-1), ['history']);
});
