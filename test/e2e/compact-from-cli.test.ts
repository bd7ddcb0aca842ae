// /compact from a connection that cannot summarize (a CLI): the daemon asks the session's agent
// connection, the last one that prepared it and declared `summarize`, while it is open, and
// otherwise says in the reply and in /context which backend ran and why.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Result } from '../../protocol/methods.ts';
import type { SummarizeParams } from '../../protocol/client.ts';
import { startDaemon, tempHome, type DaemonHandle } from './harness.ts';

const SESSION = 'cli-compact';
let d: DaemonHandle;

before(async () => {
  const home = tempHome();
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: 6000 } }));
  d = await startDaemon({ home });
});
after(async () => {
  await d.stop();
});

/** `n` turns of about 150 tokens each, numbered from `from`. */
function turns(from: number, n: number) {
  return Array.from({ length: n }, (_, k) => {
    const i = from + k;
    return [
      { kind: 'user' as const, content: [{ type: 'text' as const, text: `step ${i}: update src/feature${i}.ts so that test ${i} passes. `.repeat(4) }] },
      { kind: 'assistant' as const, content: [{ type: 'text' as const, text: `Updated src/feature${i}.ts; test ${i} passes now. `.repeat(4) }] },
    ];
  }).flat();
}

test('a CLI /compact is summarized by the agent connection, and falls back with a reason once it is gone', async () => {
  const asked: SummarizeParams[] = [];
  const agent = await d.connect({
    client: { name: 'agent', version: '2' },
    summarize: async (params) => {
      asked.push(params);
      return { text: `Summary ${asked.length}: steps so far are done.` };
    },
  });
  const cli = await d.connect({ client: { name: 'cli', version: '1' } });
  await agent.call('session.open', { session: SESSION });
  await agent.call('transcript.append', { session: SESSION, rows: turns(0, 20) });
  const first = await agent.call('prepare', { session: SESSION, model: 'm', instructions: 'Work in /repo.' });
  assert.equal(first.compacted, false, 'not due yet');

  const viaCommand = (await cli.call('command', { session: SESSION, line: '/compact' })).result as Result<'compact'>;
  assert.equal(viaCommand.compacted, true);
  assert.ok(asked.length >= 1, 'the agent wrote the summary');
  assert.equal(asked[0]?.session, SESSION);
  assert.equal(viaCommand.observation.last_compaction?.backend, 'client');
  assert.ok(viaCommand.observation.notes.some((n) => /summarizer client: written by connection \d+ \(agent 2\)/.test(n)), viaCommand.observation.notes.join('; '));

  // The `compact` method takes the same route.
  await cli.call('transcript.append', { session: SESSION, rows: turns(20, 20) });
  const calls = asked.length;
  const viaMethod = await cli.call('compact', { session: SESSION });
  assert.equal(viaMethod.compacted, true);
  assert.ok(asked.length > calls);
  assert.equal(viaMethod.observation.last_compaction?.backend, 'client');

  // Once the agent has gone, the CLI gets the extractive summarizer and is told why.
  await agent.close();
  await cli.call('transcript.append', { session: SESSION, rows: turns(40, 20) });
  const alone = await cli.call('command', { session: SESSION, line: '/compact' });
  const result = alone.result as Result<'compact'>;
  assert.equal(result.compacted, true);
  assert.equal(result.observation.last_compaction?.backend, 'extractive');
  const why = 'summarizer extractive: no connection that answers summarize is open for this session';
  assert.ok(result.observation.notes.includes(why), result.observation.notes.join('; '));
  assert.ok(alone.text.includes(why));
  const context = await cli.call('context', { session: SESSION, format: 'text' });
  assert.ok(context.text?.includes(why), context.text ?? '');
  // The note explains a summary: a request that summarized nothing does not carry it.
  const quiet = await cli.call('prepare', { session: SESSION, model: 'm', instructions: 'Work in /repo.' });
  assert.equal(quiet.compacted, false);
  assert.ok(!quiet.observation.notes.includes(why), quiet.observation.notes.join('; '));
});

test('a connection that cannot summarize does not displace the agent connection by preparing', async () => {
  const session = 'cli-prepares';
  let asked = 0;
  const agent = await d.connect({
    summarize: async () => {
      asked += 1;
      return { text: 'Agent summary.' };
    },
  });
  const cli = await d.connect();
  await agent.call('session.open', { session });
  await agent.call('transcript.append', { session, rows: turns(0, 20) });
  await agent.call('prepare', { session, model: 'm', instructions: 'Work.' });
  await cli.call('prepare', { session, model: 'm', instructions: 'Work.' });
  const r = await cli.call('compact', { session });
  assert.equal(r.observation.last_compaction?.backend, 'client');
  assert.ok(asked > 0);
  await agent.close();
});
