// `albedo mcp` as a real stdio MCP server, driven by the MCP SDK's own client: it lists the
// session's memory tools and greps a planted fact out of a compacted session; under `albedo
// run` (ALBEDO_RUN) it finds the run's proxy session by itself; without a session it refuses
// and names the recent proxy sessions.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { answer, startScriptedUpstream } from '../support/scripted-upstream.ts';
import { startEach, type DaemonHandle } from './harness.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const entry = path.join(root, 'cli/main.ts');
const start = startEach();
const FACT = 'the deploy key is ZEBRA-4242';

function env(d: DaemonHandle, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', ALBEDO_HOME: d.home, ALBEDO_SOCKET: d.socket, NO_COLOR: '1', ...extra };
}

async function mcpClient(d: DaemonHandle, args: string[], extra: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'albedo-test', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: ['--import', 'tsx', entry, 'mcp', ...args], env: env(d, extra), cwd: root, stderr: 'pipe' }));
  return client;
}

function textOf(result: Awaited<ReturnType<Client['callTool']>>): string {
  const content = result.content as Array<{ type: string; text?: string }>;
  return content.map((c) => c.text ?? '').join('\n');
}

test('albedo mcp lists the memory tools and greps a planted fact out of a compacted session', async () => {
  const d = await start({});
  const c = await d.connect();
  const text = (t: string): [{ type: 'text'; text: string }] => [{ type: 'text', text: t }];
  const rows = [
    { kind: 'user' as const, content: text(`remember: ${FACT}`) },
    ...Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? { kind: 'user' as const, content: text(`filler ${i} ${'lorem ipsum '.repeat(200)}`) } : { kind: 'assistant' as const, content: text(`filler ${i} ${'lorem ipsum '.repeat(200)}`) })),
  ];
  await c.call('session.open', { session: 'mcp' });
  await c.call('transcript.append', { session: 'mcp', rows });
  await c.call('prepare', { session: 'mcp', model: 'claude-sonnet-4-5', instructions: 'test', tools: [] });
  const compacted = await c.call('compact', { session: 'mcp' });
  assert.equal(compacted.compacted, true, 'the fact is evicted from the request');
  const client = await mcpClient(d, ['--session', 'mcp']);
  try {
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'transcript_grep'), tools.map((t) => t.name).join(', '));
    const grep = tools.find((t) => t.name === 'transcript_grep')!;
    assert.equal(grep.inputSchema.type, 'object');
    const found = await client.callTool({ name: 'transcript_grep', arguments: { pattern: 'ZEBRA' } });
    assert.notEqual(found.isError, true, textOf(found));
    assert.match(textOf(found), /ZEBRA-4242/);
    const bad = await client.callTool({ name: 'transcript_grep', arguments: { pattern: 42 } });
    assert.equal(bad.isError, true, 'invalid arguments come back as a tool error');
  } finally {
    await client.close();
  }
});

test("under albedo run (ALBEDO_RUN) the server finds the run's proxy session; without a session it names the recent ones", async () => {
  const up = await startScriptedUpstream({ script: () => answer.text('ok') });
  try {
    const d = await start({ env: { ALBEDO_ANTHROPIC_UPSTREAM: up.baseUrl } });
    const c = await d.connect();
    const base = (await c.call('daemon.status', {})).proxy.anthropic_base_url!;
    const runUrl = base.replace(/\/anthropic$/, '/run/run42abc/anthropic');
    const body = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 100, tools: [{ name: 'Bash', input_schema: { type: 'object' } }], messages: [{ role: 'user', content: `remember: ${FACT}` }] });
    await new Promise<void>((resolve, reject) => {
      const req = http.request(`${runUrl}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'sk-run', 'user-agent': 'claude-cli/2.1.332' } }, (res) => {
        res.resume();
        res.on('end', () => resolve());
      });
      req.on('error', reject);
      req.end(body);
    });
    const { sessions } = await c.call('session.list', {});
    assert.equal(sessions[0]!.run, 'run42abc', `the session is bound to its run: ${JSON.stringify(sessions)} ${d.stderr().slice(-3000)}`);

    const client = await mcpClient(d, [], { ALBEDO_RUN: 'run42abc' });
    try {
      const found = await client.callTool({ name: 'transcript_grep', arguments: { pattern: 'ZEBRA' } });
      assert.match(textOf(found), /ZEBRA-4242/);
    } finally {
      await client.close();
    }

    const refused = spawnSync(process.execPath, ['--import', 'tsx', entry, 'mcp'], { cwd: root, env: env(d), encoding: 'utf8', input: '' });
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /albedo mcp needs a session: recent proxy sessions: claude-[0-9a-f]+ \(claude-cli\/2\.1\.332\)/);
  } finally {
    await up.close();
  }
});

test('requests already read when the client closes stdin are still answered before albedo mcp exits', async () => {
  const d = await start({});
  const lines = [
    { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 2, method: 'tools/list' },
  ];
  // stdin holds the three requests and is closed at once, as a one-shot pipe does.
  const out = spawnSync(process.execPath, ['--import', 'tsx', entry, 'mcp'], { cwd: root, env: env(d, { ALBEDO_RUN: 'not-started' }), encoding: 'utf8', timeout: 30_000, input: lines.map((l) => JSON.stringify(l)).join('\n') + '\n' });
  assert.equal(out.status, 0, out.stderr);
  const answers = out.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: number; result?: { tools?: Array<{ name: string }> } });
  const list = answers.find((a) => a.id === 2);
  assert.ok(list?.result?.tools?.some((t) => t.name === 'transcript_grep'), `tools/list was answered: ${out.stdout}`);
});
