// The real agent CLIs (Claude Code 2.1.332, pi 0.73.1) run straight against the scripted upstream,
// mounted under a path prefix like the proxy's URLs, through the 30-file acceptance scenario; and
// the upstream's own wire behaviour. No proxy is involved: this proves the harness the proxy uses.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { ensureAgents, runClaude, runPi, type AgentRun } from '../support/agents.ts';
import { fileReadScenario, isInstructionTurn, type FileReadScenario } from '../support/file-read-scenario.ts';
import { answer, blocksOf, startScriptedUpstream, type ScriptedUpstream, type ScriptRequest } from '../support/scripted-upstream.ts';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-agents-'));
after(() => fs.rmSync(scratch, { recursive: true, force: true }));

const upstreams: ScriptedUpstream[] = [];
after(async () => {
  for (const up of upstreams) await up.close();
});

async function upstream(opts: Parameters<typeof startScriptedUpstream>[0]): Promise<ScriptedUpstream> {
  const up = await startScriptedUpstream(opts);
  upstreams.push(up);
  return up;
}

function dir(name: string): string {
  const d = path.join(scratch, name);
  fs.mkdirSync(d, { recursive: true });
  return d;
}

/** Every tool_use an assistant turn of the request carries is answered by a tool_result after it. */
function assertToolPairs(req: ScriptRequest): void {
  const open = new Set<string>();
  for (const m of req.body.messages ?? []) {
    for (const b of blocksOf(m)) {
      if (b.type === 'tool_use' && typeof b.id === 'string') open.add(b.id);
      if (b.type === 'tool_result' && typeof b.tool_use_id === 'string') {
        assert.ok(open.delete(b.tool_use_id), `request ${req.seq}: tool_result ${b.tool_use_id} without its tool_use`);
      }
    }
  }
  assert.deepEqual([...open], [], `request ${req.seq}: tool_use without tool_result`);
}

/** The scenario's checks on a finished run; returns the request counts for the log. */
function assertScenario(up: ScriptedUpstream, sc: FileReadScenario, run: AgentRun, finalOut: string): Record<string, number> {
  assert.equal(run.timedOut, false, `timed out; stderr: ${run.stderr.slice(-2000)}`);
  assert.equal(run.code, 0, `exit ${run.code}; stderr: ${run.stderr.slice(-2000)}`);
  const outside = up.requests.filter((r) => r.path === null).map((r) => r.url);
  assert.deepEqual(outside, [], 'requests outside the base URL prefix');
  const conversation = up.messages({ conversation: true });
  assert.ok(conversation.length >= sc.files.length + 1, `${conversation.length} conversation requests`);
  for (const req of conversation) assertToolPairs(req);
  assert.ok(finalOut.includes(sc.finalText), `final text not in stdout: ${finalOut.slice(-500)}`);
  const seen = new Set<string>();
  for (const req of up.messages()) for (const m of sc.markersInToolResults(req.body)) seen.add(m);
  assert.deepEqual(
    sc.files.map((f) => f.marker).filter((m) => !seen.has(m)),
    [],
    'markers that never reached the upstream in a tool_result',
  );
  return {
    conversation: conversation.length,
    side: up.messages({ conversation: false }).length,
    countTokens: up.requests.filter((r) => r.kind === 'count_tokens').length,
    other: up.requests.filter((r) => r.kind === 'other').length,
  };
}

describe('scripted upstream wire', () => {
  const body = { model: 'claude-sonnet-4-5', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
  const headers = { 'content-type': 'application/json', 'x-api-key': 'k', 'anthropic-version': '2023-06-01' };

  test('non-streaming answers one JSON message; count_tokens estimates', async () => {
    const up = await upstream({ script: () => answer.tool('Bash', { command: 'ls' }, 'Listing.') });
    const res = await fetch(`${up.baseUrl}/v1/messages`, { method: 'POST', headers, body: JSON.stringify(body) });
    assert.equal(res.status, 200);
    const msg = (await res.json()) as { type: string; content: { type: string }[]; stop_reason: string; usage: { input_tokens: number } };
    assert.equal(msg.type, 'message');
    assert.deepEqual(
      msg.content.map((b) => b.type),
      ['text', 'tool_use'],
    );
    assert.equal(msg.stop_reason, 'tool_use');
    assert.ok(msg.usage.input_tokens > 0);
    const count = await fetch(`${up.baseUrl}/v1/messages/count_tokens?beta=true`, { method: 'POST', headers, body: JSON.stringify(body) });
    assert.deepEqual(await count.json(), { input_tokens: Math.ceil(JSON.stringify(body).length / 4) });
    assert.equal(up.requests[0]?.headers['x-api-key'], 'k');
    assert.equal(up.requests[0]?.conversation, false);
    assert.equal(up.requests[1]?.kind, 'count_tokens');
  });

  test('streams the event sequence the agents accept, with the JSON of a tool_use in pieces', async () => {
    const input = { command: 'cat ' + 'x'.repeat(200) };
    const up = await upstream({ script: () => answer.tool('Bash', input, 'Reading.'), chunkSize: 16 });
    const res = await fetch(`${up.baseUrl}/v1/messages?beta=true`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ ...body, stream: true, tools: [{ name: 'Bash' }] }),
    });
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = (await res.text())
      .split('\n\n')
      .filter(Boolean)
      .map((e) => JSON.parse(e.split('\n')[1]?.slice('data: '.length) ?? 'null') as { type: string; delta?: { partial_json?: string } });
    const kinds = events.map((e) => e.type).filter((t) => t !== 'ping' && t !== 'content_block_delta');
    assert.deepEqual(kinds, [
      'message_start',
      'content_block_start',
      'content_block_stop',
      'content_block_start',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const json = events.map((e) => e.delta?.partial_json ?? '').join('');
    assert.deepEqual(JSON.parse(json), input);
    assert.equal(up.requests[0]?.conversation, true);
  });

  test('injects HTTP errors and mid-stream error events', async () => {
    const up = await upstream({ script: (req) => (req.index === 0 ? answer.overloaded() : answer.streamError('api_error', 'boom', [{ type: 'text', text: 'par' }])) });
    const first = await fetch(`${up.baseUrl}/v1/messages`, { method: 'POST', headers, body: JSON.stringify(body) });
    assert.equal(first.status, 529);
    assert.deepEqual(await first.json(), { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    const second = await fetch(`${up.baseUrl}/v1/messages`, { method: 'POST', headers, body: JSON.stringify({ ...body, stream: true }) });
    const text = await second.text();
    assert.match(text, /event: content_block_delta\n.*"text":"par"/);
    assert.match(text, /event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"boom"\}\}\n\n$/);
    assert.doesNotMatch(text, /message_stop/);
  });

  test('reads gzip and br request bodies; answers 404 outside its prefix', async () => {
    const up = await upstream({ prefix: '/tok/anthropic' });
    for (
      const [coding, pack] of [
        ['gzip', zlib.gzipSync],
        ['br', zlib.brotliCompressSync],
      ] as const
    ) {
      const res = await fetch(`${up.baseUrl}/v1/messages`, {
        method: 'POST',
        headers: { ...headers, 'content-encoding': coding },
        body: pack(Buffer.from(JSON.stringify(body))),
      });
      assert.equal(res.status, 200, coding);
    }
    assert.deepEqual(up.requests[1]?.body, body);
    const outside = await fetch(`http://127.0.0.1:${up.port}/v1/messages`, { method: 'POST', headers, body: JSON.stringify(body) });
    assert.equal(outside.status, 404);
    assert.equal(up.requests[2]?.path, null);
  });
});

describe('real agents straight against the scripted upstream (30 reads of 6 KB files)', { timeout: 10 * 60_000 }, () => {
  before(async () => {
    const start = Date.now();
    const res = await ensureAgents();
    console.log(`ensureAgents: ${res.installed ? `installed in ${res.installMs} ms` : `cached (${Date.now() - start} ms)`}`);
  });

  const prefix = (): string => `/${randomBytes(6).toString('hex')}/anthropic`;

  test('Claude Code', { timeout: 5 * 60_000 }, async () => {
    const work = dir('claude-work');
    const sc = fileReadScenario({ dir: work, toolName: 'Bash' });
    const up = await upstream({ script: sc.script, prefix: prefix() });
    const run = await runClaude({ baseUrl: up.baseUrl, apiKey: 'sk-ant-test', home: dir('claude-home'), cwd: work, prompt: sc.prompt });
    const out = JSON.parse(run.stdout || '{}') as { result?: unknown };
    const counts = assertScenario(up, sc, run, typeof out.result === 'string' ? out.result : run.stdout);
    console.log(`claude: ${run.ms} ms, requests ${JSON.stringify(counts)}`);
    assert.ok(up.messages().every((r) => r.url.endsWith('/v1/messages?beta=true')));
  });

  test('Claude Code compacting on its own (CLAUDE_CODE_AUTO_COMPACT_WINDOW=40000)', { timeout: 5 * 60_000 }, async () => {
    const work = dir('claude-compact-work');
    const sc = fileReadScenario({ dir: work, toolName: 'Bash' });
    const up = await upstream({ script: sc.script, prefix: prefix() });
    const run = await runClaude({
      baseUrl: up.baseUrl,
      apiKey: 'sk-ant-test',
      home: dir('claude-compact-home'),
      cwd: work,
      prompt: sc.prompt,
      model: 'claude-sonnet-4-5',
      env: { CLAUDE_CODE_AUTO_COMPACT_WINDOW: '40000' },
    });
    const out = JSON.parse(run.stdout || '{}') as { result?: unknown };
    const counts = assertScenario(up, sc, run, typeof out.result === 'string' ? out.result : run.stdout);
    // Its compaction request keeps the tools and the whole history, and appends the instruction
    // as a text block after the last tool_result; the next request starts from the summary.
    const compactions = up.messages({ conversation: true }).filter((r) => isInstructionTurn(r.body));
    assert.ok(compactions.length >= 1, 'no compaction request');
    const firstCompaction = compactions[0];
    assert.ok(firstCompaction !== undefined);
    const last = firstCompaction.body.messages?.at(-1);
    assert.ok(last !== undefined);
    assert.deepEqual(
      blocksOf(last).map((b) => b.type),
      ['tool_result', 'text'],
    );
    const after = up.messages({ conversation: true }).find((r) => r.seq > firstCompaction.seq);
    assert.ok(after !== undefined && (after.body.messages?.length ?? 0) < (firstCompaction.body.messages?.length ?? 0));
    console.log(`claude (own compaction): ${run.ms} ms, requests ${JSON.stringify(counts)}, compactions ${compactions.length}`);
  });

  test('pi', { timeout: 5 * 60_000 }, async () => {
    const work = dir('pi-work');
    const sc = fileReadScenario({ dir: work, toolName: 'bash' });
    const up = await upstream({ script: sc.script, prefix: prefix() });
    const run = await runPi({
      baseUrl: up.baseUrl,
      apiKey: 'sk-ant-test',
      home: dir('pi-home'),
      cwd: work,
      prompt: sc.prompt,
      model: 'claude-sonnet-4-5',
    });
    const counts = assertScenario(up, sc, run, run.stdout);
    console.log(`pi: ${run.ms} ms, requests ${JSON.stringify(counts)}`);
    assert.ok(up.messages().every((r) => r.url.endsWith('/v1/messages')));
  });
});
