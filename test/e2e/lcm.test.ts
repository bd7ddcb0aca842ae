// lcm over the real socket, driven as an agent CLI drives it: a client that answers the daemon's
// summarize requests appends turns and prepares before each model call. The tree stays within
// the window, survives a restart unchanged, forks with its session, and a switch to rolling and
// back never summarizes a summary twice.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { AlbedoClient } from '../../protocol/client.ts';
import type { ParamsIn, Result } from '../../protocol/methods.ts';
import { runCli } from '../../cli/program.ts';
import { parseSummaryPrompt } from '../../strategies/summarizer/prompt-format.ts';
import { assertCallsPaired } from '../strategies/engine-fixtures.ts';
import { startDaemon, tempHome, type DaemonHandle } from './harness.ts';

const WINDOW = 6000;
const INSTRUCTIONS = 'You are a careful coding agent working in /repo.';
const TOOLS = [{ name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } }];

type Prepared = Result<'prepare'>;
type Rows = ParamsIn<'transcript.append'>['rows'];

function wire(p: Prepared): string {
  return JSON.stringify({ system: p.system, tools: p.tools, inputs: p.inputs });
}

/** One turn with a planted fact (an identifier the model would need later). */
function turn(i: number): Rows {
  return [
    { kind: 'user', key: `u${i}`, content: [{ type: 'text', text: `step ${i}: fix the failing check in src/area${i % 7}.ts` }] },
    { kind: 'assistant', key: `a${i}`, content: [{ type: 'text', text: `Reading src/area${i % 7}.ts.` }, { type: 'tool_call', id: `call_${i}`, name: 'read_file', arguments: { path: `src/area${i % 7}.ts` } }] },
    { kind: 'tool_result', key: `r${i}`, call_id: `call_${i}`, content: [{ type: 'text', text: `// fact-${i}: checksum 0x${(i * 7919).toString(16)}\n${'export const value = 1;\n'.repeat(6)}` }] },
    { kind: 'assistant', key: `b${i}`, content: [{ type: 'text', text: `Fixed step ${i}.` }] },
  ];
}

describe('lcm over the socket', () => {
  let d: DaemonHandle;
  let client: AlbedoClient;
  const calls: Array<{ purpose: string; prompt: string }> = [];

  async function connect(): Promise<AlbedoClient> {
    return d.connect({
      summarize: async (params) => {
        calls.push(params);
        const parts = parseSummaryPrompt(params.prompt);
        const steps = [...parts.transcript.matchAll(/step (\d+)/g)].map((m) => m[1]);
        return { text: `${params.purpose}: steps ${steps[0] ?? '?'}-${steps.at(-1) ?? '?'} done.` };
      },
    });
  }

  before(async () => {
    const home = tempHome();
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ lcm: { contextWindowTokens: WINDOW }, rolling: { contextWindowTokens: WINDOW }, extensions: { enable: ['lcm'] } }));
    d = await startDaemon({ home });
    client = await connect();
  });
  after(async () => {
    await d.stop();
  });

  const prepare = (session: string) => client.call('prepare', { session, model: 'claude-sonnet-4-5', instructions: INSTRUCTIONS, tools: TOOLS });

  test('a long session stays within its window on every prepare, and a restart changes nothing it sends', async () => {
    const session = 'long';
    await client.call('session.open', { session });
    let compactions = 0;
    for (let i = 0; i < 120; i++) {
      await client.call('transcript.append', { session, rows: turn(i) });
      if (i === 90) {
        const beforeRestart = await prepare(session);
        await d.stop();
        d = await startDaemon({ home: d.home });
        client = await connect();
        assert.equal(wire(await prepare(session)), wire(beforeRestart), 'a restart changes nothing the next prepare sends');
        continue;
      }
      const p = await prepare(session);
      assert.equal(p.observation.strategy, 'lcm');
      if (p.compacted) compactions += 1;
      assert.ok(p.observation.estimated_input_tokens <= WINDOW, `turn ${i}: ~${p.observation.estimated_input_tokens} tokens`);
      assertCallsPaired(p.inputs);
    }
    assert.ok(compactions >= 3, `${compactions} compactions`);
    // The strategy's summaries, and the notes layer's rewrite after each compaction.
    assert.ok(calls.some((c) => c.purpose === 'lcm') && calls.every((c) => c.purpose === 'lcm' || c.purpose === 'notes'));
    // /context names the frontier nodes, their ranges and depth, and the cursor.
    const ctx = await client.call('command', { session, line: '/context' });
    assert.match(ctx.text ?? '', /lcm frontier: node \d+ #\d+-#\d+ depth \d+/);
    assert.match(ctx.text ?? '', /covered through #\d+/);
  });

  test('twenty facts planted in turns the tree covers are found with lcm_grep and read back exactly with lcm_expand', async () => {
    const covered = (await client.call('lcm_list', { session: 'long', limit: 1 })).total;
    assert.ok(covered > 0);
    for (let i = 0; i < 20; i++) {
      const fact = `// fact-${i}: checksum 0x${(i * 7919).toString(16)}`;
      const g = await client.call('lcm_grep', { session: 'long', pattern: `FACT-${i}: CHECKSUM` });
      assert.equal(g.source.total, 1, fact);
      const node = g.source.matches[0]!.node;
      assert.ok(node !== null, `${fact} lies in a covered row`);
      const d = await client.call('lcm_describe', { session: 'long', node });
      assert.ok(d.first_seq <= g.source.matches[0]!.seq && g.source.matches[0]!.seq <= d.last_seq);
      const text = (await client.call('lcm_expand', { session: 'long', node, limit: 100_000 })).text;
      assert.ok(text.includes(`${fact}\n`), `${fact} read back from node ${node}`);
    }
  });

  test('albedo lcm list, describe, expand and grep show the tree to an operator', async () => {
    const cli = async (args: string[]) => {
      let stdout = '';
      let stderr = '';
      const code = await runCli(args, { stdout: { write: (x: string) => (stdout += x) }, stderr: { write: (x: string) => (stderr += x) }, env: { ALBEDO_HOME: d.home, ALBEDO_SOCKET: d.socket } });
      return { code, stdout, stderr };
    };
    const list = await cli(['lcm', 'list', 'long']);
    assert.equal(list.code, 0, list.stderr);
    const first = /^node (\d+) {2}#(\d+)-#(\d+) {2}depth (\d+) {2}(frontier|below)/m.exec(list.stdout);
    assert.ok(first !== null, list.stdout);
    const node = first[1]!;
    const described = JSON.parse((await cli(['lcm', 'describe', node, 'long', '--json'])).stdout) as { first_seq: number; summary: string };
    assert.equal(described.first_seq, Number(first[2]));
    const expanded = await cli(['lcm', 'expand', node, 'long', '--limit', '200']);
    assert.match(expanded.stdout, new RegExp(`^#${first[2]} user`));
    const grep = await cli(['lcm', 'grep', 'fact-1: checksum', 'long']);
    assert.match(grep.stdout, /^1 matching row\(s\)/);
    assert.equal((await cli(['lcm', 'describe', '999999', 'long'])).code, 1, 'an unknown node is the daemon saying no');
  });

  test('a fork keeps the tree of what it copied and prepares from it without a model call', async () => {
    const before = calls.length;
    const fork = await client.call('session.fork', { session: 'long', branch: 'long-branch' });
    const p = await prepare(fork.session);
    assert.match(p.inputs[0]!.content[0]!.type === 'text' ? p.inputs[0]!.content[0]!.text : '', /^\[lcm node \d+ · rows #\d+-#\d+/);
    assert.equal(calls.length, before, 'the branch reuses the copied nodes');
  });

  test('lcm -> rolling -> lcm: rolling reads the nodes as folds, lcm never summarizes the rolling summary', async () => {
    const session = 'switch';
    await client.call('session.open', { session });
    for (let i = 0; i < 40; i++) await client.call('transcript.append', { session, rows: turn(i) });
    await prepare(session);
    // History after lcm's compaction, for rolling to evict beside the nodes it folds.
    for (let i = 40; i < 50; i++) await client.call('transcript.append', { session, rows: turn(i) });
    const r1 = await client.call('compact', { session, strategy: 'rolling' });
    assert.equal(r1.strategy, 'rolling');
    assert.equal(r1.compacted, true);
    const viaRolling = await prepare(session);
    assert.equal(viaRolling.observation.strategy, 'rolling');
    const rollingCalls = calls.filter((c) => c.purpose === 'rolling');
    assert.ok(rollingCalls.length > 0 && rollingCalls.some((c) => c.prompt.includes('[stored summary from lcm-memory')), 'rolling folded the lcm nodes');
    for (let i = 50; i < 60; i++) await client.call('transcript.append', { session, rows: turn(i) });
    const lcmBefore = calls.filter((c) => c.purpose === 'lcm').length;
    const r2 = await client.call('command', { session, line: '/compact lcm' });
    assert.equal(r2.command, 'compact');
    const back = await prepare(session);
    assert.equal(back.observation.strategy, 'lcm');
    const lcmCalls = calls.filter((c) => c.purpose === 'lcm').slice(lcmBefore);
    assert.ok(lcmCalls.length > 0);
    assert.ok(lcmCalls.every((c) => !c.prompt.includes('rolling: steps')), 'lcm reads rows, never the rolling summary');
  });
});

// Issue 30, items 3-5, as the acceptance run drove them: an 8,000-token window, the default
// extensions (the notes layer on), a client summarizer, no usage reports.
describe('lcm at an 8,000-token window over the socket (issue 30)', () => {
  let d: DaemonHandle;
  /** What the client answers; set per test. */
  let answer: (params: { purpose: string; max_output_tokens: number }) => string = () => 'a summary.';
  const asked: Array<{ purpose: string; max_output_tokens: number }> = [];
  let client: AlbedoClient;

  before(async () => {
    const home = tempHome();
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ lcm: { contextWindowTokens: 8000 }, extensions: { enable: ['lcm'] } }));
    d = await startDaemon({ home });
    client = await d.connect({
      summarize: async (params) => {
        asked.push(params);
        return { text: answer(params) };
      },
    });
  });
  after(async () => {
    await d.stop();
  });

  const prepare = (session: string, force = false) => client.call('prepare', { session, model: 'claude-sonnet-4-5', instructions: INSTRUCTIONS, tools: TOOLS, force });
  /** One unit of about `tokens` estimated tokens, in four tool results under the output cap. */
  const unit = (i: number, tokens: number): Rows => [
    { kind: 'user', key: `u${i}`, content: [{ type: 'text', text: `step ${i}: go on` }] },
    ...[0, 1, 2, 3].flatMap((k): Rows => [
      { kind: 'assistant', key: `a${i}-${k}`, content: [{ type: 'tool_call', id: `c${i}-${k}`, name: 'read_file', arguments: { path: `src/f${k}.ts` } }] },
      { kind: 'tool_result', key: `r${i}-${k}`, call_id: `c${i}-${k}`, content: [{ type: 'text', text: `file ${k} of step ${i}: ${'word '.repeat(Math.floor((tokens * 4) / 20))}` }] },
    ]),
  ];

  test('a switch to lcm on 300 units of ~2,400 tokens goes out within the window, as a balanced tree', async () => {
    answer = (p) => `${p.purpose}: ${'what happened in these steps. '.repeat(20)}`;
    const session = 'switched';
    await client.call('session.open', { session });
    for (let i = 0; i < 300; i += 50) await client.call('transcript.append', { session, rows: Array.from({ length: 50 }, (_, k) => unit(i + k, 2400)).flat() });
    const p = await prepare(session);
    assert.equal(p.compacted, true);
    assert.ok(p.observation.estimated_input_tokens <= 8000, `~${p.observation.estimated_input_tokens} tokens; ${p.observation.notes.join('; ')}`);
    const list = await client.call('lcm_list', { session, limit: 500 });
    assert.ok(Math.max(...list.nodes.map((n) => n.depth)) <= 4, `no chain: ${list.total} nodes, depths ${list.nodes.map((n) => n.depth).join(',')}; ~${p.observation.estimated_input_tokens} tokens`);
  });

  test('a request the notes carry to the trigger waits one turn and says so; the next compacts', async () => {
    answer = (p) => (p.purpose === 'notes' ? `- keep: ${'src/module.ts is exact; '.repeat(140)}` : 'a short summary.');
    const session = 'trigger';
    await client.call('session.open', { session });
    let previousSat = false;
    let sat = 0;
    for (let i = 0; i < 80; i++) {
      await client.call('transcript.append', { session, rows: unit(i, 340) });
      const o = (await prepare(session)).observation;
      const sitting = !o.compacted && o.estimated_input_tokens * 100 >= 8000 * 80;
      assert.ok(!(sitting && previousSat), `turn ${i}: ~${o.estimated_input_tokens} at the trigger a second turn`);
      if (sitting) {
        sat += 1;
        assert.match(o.notes.join('; '), /automatic compaction waits one turn: /);
      }
      previousSat = sitting;
    }
    assert.ok(sat > 0, 'the notes held some request at the trigger');
  });

  test('a summarizer that always answers oversized: the retry asks for a third, and a pointer node is stored', async () => {
    answer = (p) => (p.purpose === 'lcm' ? 'far too long '.repeat(5000) : 'notes.');
    const session = 'oversized';
    await client.call('session.open', { session });
    await client.call('transcript.append', { session, rows: Array.from({ length: 12 }, (_, i) => unit(i, 300)).flat() });
    const from = asked.length;
    const p = await prepare(session, true);
    assert.equal(p.compacted, true, p.observation.failure ?? '');
    const limits = asked.slice(from).filter((a) => a.purpose === 'lcm').map((a) => a.max_output_tokens);
    assert.deepEqual(limits.slice(0, 2), [limits[0], Math.max(32, Math.floor(limits[0]! / 3))]);
    const list = await client.call('lcm_list', { session });
    assert.ok(list.total > 0);
    const node = await client.call('lcm_describe', { session, node: list.nodes[0]!.node });
    assert.match(node.summary, /lcm_expand/);
    assert.match(node.summary, new RegExp(`rows #${node.first_seq}-#${node.last_seq}`));
  });
});
