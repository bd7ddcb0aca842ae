// The Responses wire through the proxy: a real daemon, its proxy on 127.0.0.1, and a scripted
// upstream (test/support/openai-upstream.ts). Streaming and not, parallel calls, encrypted
// reasoning going back only to the upstream that wrote it, previous_response_id passed through,
// item types the daemon does not model kept byte for byte, errors, Codex's own compaction, and
// the requests real Codex sent replayed through it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { AlbedoClient } from '../../protocol/client.ts';
import { openaiAnswer, startOpenAIUpstream, type OpenAIScript, type OpenAIUpstream } from '../support/openai-upstream.ts';
import { startEach, tempHome, type DaemonHandle } from './harness.ts';

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../shared/fixtures/proxy');
const start = startEach();
const upstreams: OpenAIUpstream[] = [];
after(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
});

interface Proxy {
  daemon: DaemonHandle;
  client: AlbedoClient;
  up: OpenAIUpstream;
  base: string;
  home: string;
}

async function upstream(script: OpenAIScript): Promise<OpenAIUpstream> {
  const up = await startOpenAIUpstream({ script, chunkSize: 6 });
  upstreams.push(up);
  return up;
}

async function proxyOn(up: OpenAIUpstream, home = tempHome()): Promise<Proxy> {
  const daemon = await start({ home, env: { ALBEDO_OPENAI_UPSTREAM: up.baseUrl } });
  const client = await daemon.connect();
  const status = await client.call('daemon.status', {});
  return { daemon, client, up, base: status.proxy.openai_base_url!, home };
}

function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const data = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-resp-test', 'session-id': 'sess-0001', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

const TOOLS = [{ type: 'function', name: 'exec_command', description: 'run a command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } }];
const DEV = { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex in a test.' }] };
const user = (text: string): Record<string, unknown> => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text }] });

function request(input: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'gpt-5.5', instructions: '', input: [DEV, ...input], tools: TOOLS, stream: true, store: false, include: ['reasoning.encrypted_content'], prompt_cache_key: 'sess-0001', ...extra };
}

/** The output items a streamed answer's `response.output_item.done` events carry, in order. */
function itemsOf(text: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const frame of text.split('\n\n')) {
    const data = /^data: (.*)$/m.exec(frame)?.[1];
    if (data === undefined) continue;
    const ev = JSON.parse(data) as { type: string; item?: Record<string, unknown> };
    if (ev.type === 'response.output_item.done' && ev.item !== undefined) out.push(ev.item);
  }
  return out;
}

async function rows(client: AlbedoClient): Promise<Array<{ kind: string; body: string }>> {
  const { sessions } = await client.call('session.list', {});
  assert.equal(sessions.length, 1, `one session: ${JSON.stringify(sessions)}`);
  const page = await client.call('transcript.rows', { session: sessions[0]!.session, after: 0, limit: 1000 });
  return page.rows.map((r) => ({ kind: r.body.kind, body: JSON.stringify(r.body) }));
}

function inputOf(body: Record<string, unknown>): Array<Record<string, unknown>> {
  return body.input as Array<Record<string, unknown>>;
}

test('a streamed turn with parallel calls streams back in order and is stored; the items Codex sends back match the chain', async () => {
  const up = await upstream((
    req,
  ) => (inputOf(req.body).some((i) => i.type === 'function_call_output')
    ? openaiAnswer.text('both done', { input: 777, cached: 500 })
    : { kind: 'message', text: 'two calls', calls: [{ name: 'exec_command', arguments: { cmd: 'ls' } }, { name: 'exec_command', arguments: { cmd: 'pwd' } }] })
  );
  const p = await proxyOn(up);
  const r = await post(`${p.base}/responses`, request([user('look around')]));
  assert.equal(r.status, 200);
  const items = itemsOf(r.text);
  assert.deepEqual(items.map((i) => i.type), ['message', 'function_call', 'function_call']);
  const seqs = [...r.text.matchAll(/"sequence_number":(\d+)/g)].map((m) => Number(m[1]));
  assert.deepEqual(seqs, seqs.map((_, i) => i), 'events reach the client in order as sent');
  // Codex sends the items back as they came, with their outputs.
  const outputs = items.filter((i) => i.type === 'function_call').map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: `ran ${String((JSON.parse(String(c.arguments)) as { cmd: string }).cmd)}` }));
  const next = await post(`${p.base}/responses`, request([user('look around'), ...items, ...outputs], { stream: false }));
  assert.equal(next.status, 200);
  assert.equal((JSON.parse(next.text) as { output: Array<{ content?: Array<{ text: string }> }> }).output[0]!.content![0]!.text, 'both done');
  const kinds = (await rows(p.client)).map((x) => x.kind);
  assert.deepEqual([...kinds].sort(), ['assistant', 'assistant', 'assistant', 'assistant', 'tool_result', 'tool_result', 'user'], `each item stored once: ${kinds.join(', ')}`);
  const second = up.of('responses', { conversation: true })[1]!;
  const shapes = inputOf(second.body).map((i) => `${String(i.type)}${typeof i.role === 'string' ? `:${i.role}` : ''}`);
  assert.deepEqual(shapes.slice(0, 4), ['message:developer', 'message:developer', 'message:user', 'message:assistant'], "the agent's prompt, the daemon's note, then the history");
  assert.deepEqual([...shapes.slice(4)].sort(), ['function_call', 'function_call', 'function_call_output', 'function_call_output']);
  assert.deepEqual(inputOf(second.body)[0], DEV, "the agent's developer message leads as sent");
  const { sessions } = await p.client.call('session.list', {});
  const ctx = await p.client.call('context', { session: sessions[0]!.session });
  assert.equal(ctx.observation.provider_input_tokens, 777);
});

test('encrypted reasoning goes back to the upstream that wrote it; after a switch of upstream it is left out and its summary stays stored', async () => {
  let turns = 0;
  const first = await upstream(() => (turns++ > 0 ? openaiAnswer.text('second') : { kind: 'message', reasoning: { summary: 'I should list files.', encrypted: 'gAAAA-secret-blob' }, text: 'first' }));
  const p = await proxyOn(first);
  const r = await post(`${p.base}/responses`, request([user('hi')]));
  const items = itemsOf(r.text);
  assert.equal(items[0]!.type, 'reasoning');
  await post(`${p.base}/responses`, request([user('hi'), ...items, user('and then?')]));
  const back = inputOf(first.of('responses', { conversation: true })[1]!.body).find((i) => i.type === 'reasoning');
  assert.ok(back !== undefined, 'the reasoning item went back');
  assert.equal(back.encrypted_content, 'gAAAA-secret-blob');
  assert.equal(back.id, items[0]!.id, 'with its id');

  await p.daemon.stop();
  const other = await upstream(() => openaiAnswer.text('third'));
  const q = await proxyOn(other, p.home);
  await post(`${q.base}/responses`, request([user('hi'), ...items, user('and then?'), { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'second', annotations: [] }] }, user('more')]));
  const sent = other.of('responses', { conversation: true })[0]!;
  assert.ok(!sent.rawBody.includes('gAAAA-secret-blob'), 'another upstream never gets the blob');
  assert.ok(!inputOf(sent.body).some((i) => i.type === 'reasoning'));
  const stored = await rows(q.client);
  assert.ok(stored.some((x) => x.body.includes('I should list files.')), 'the readable summary stays in the transcript');
});

test('previous_response_id goes up untouched and /context says so; an unknown item type goes back byte for byte', async () => {
  const up = await upstream(() => openaiAnswer.text('ok'));
  const p = await proxyOn(up);
  const unknown = { type: 'hologram_call', id: 'hg_1', payload: { nested: [1, 2, { deep: 'x' }] }, status: 'completed' };
  await post(`${p.base}/responses`, request([user('start'), unknown, { type: 'hologram_call_output', call_id: 'hg_1', output: 'done' }]));
  const sent = up.of('responses', { conversation: true })[0]!;
  const back = inputOf(sent.body);
  assert.deepEqual(back.find((i) => i.type === 'hologram_call'), unknown);
  assert.ok(sent.rawBody.includes(JSON.stringify(unknown)), 'byte for byte');
  assert.deepEqual(back.find((i) => i.type === 'hologram_call_output'), { type: 'hologram_call_output', call_id: 'hg_1', output: 'done' });

  const chained = JSON.stringify(request([user('next')], { previous_response_id: 'resp_abc', input: [user('next')] }));
  await post(`${p.base}/responses`, chained);
  const passed = up.of('responses', { conversation: true })[1]!;
  assert.equal(passed.rawBody, chained, 'forwarded exactly as sent');
  const { sessions } = await p.client.call('session.list', {});
  const ctx = await p.client.call('context', { session: sessions[0]!.session });
  assert.match(ctx.observation.notes.join('\n'), /1 request\(s\) forwarded uncompacted \(previous_response_id/);
});

test('a 500 reaches the agent with its status and body; a body that is not a Responses request gets an OpenAI-shaped 400', async () => {
  const up = await upstream(() => openaiAnswer.error(500, 'upstream fell over'));
  const p = await proxyOn(up);
  const r = await post(`${p.base}/responses`, request([user('go')]));
  assert.equal(r.status, 500);
  assert.deepEqual(JSON.parse(r.text), { error: { message: 'upstream fell over', type: 'server_error', code: null } });
  assert.deepEqual((await rows(p.client)).map((x) => x.kind), ['user'], 'no turn recorded');
  const bad = await post(`${p.base}/responses`, { model: 'gpt-5.5', input: 42 });
  assert.equal(bad.status, 400);
  assert.match((JSON.parse(bad.text) as { error: { message: string } }).error.message, /not a Responses request: input/);
});

test("Codex's own compaction is reconciled, forwarded as it came, and its returned items are stored and counted", async () => {
  const up = await upstream(() => openaiAnswer.text('ok'));
  const p = await proxyOn(up);
  await post(`${p.base}/responses`, request([user('work')]));
  const compaction = { type: 'compaction', encrypted_content: 'ENC-COMPACTED' };
  up.setScript(() => ({ kind: 'message', items: [compaction] }));
  const body = JSON.stringify(request([user('work'), { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'ok', annotations: [] }] }], { stream: false }));
  const r = await post(`${p.base}/responses/compact`, body);
  assert.equal(r.status, 200);
  const forwarded = up.requests.find((q) => q.path === '/responses/compact');
  assert.equal(forwarded?.rawBody, body, 'forwarded as it came');
  const stored = await rows(p.client);
  assert.ok(stored.some((x) => x.body.includes('ENC-COMPACTED')), 'the compaction item is stored');
  const { sessions } = await p.client.call('session.list', {});
  const ctx = await p.client.call('context', { session: sessions[0]!.session });
  assert.match(ctx.observation.notes.join('\n'), /the agent ran its own compaction 1 time\(s\)/);
});

test('the requests Codex sent are accepted, reconciled and forwarded with every field but the history unchanged', { skip: !fs.existsSync(FIXTURES) && 'shared fixtures absent' }, async () => {
  const up = await upstream(() => openaiAnswer.text('ok'));
  const p = await proxyOn(up);
  const recorded = fs.readFileSync(path.join(FIXTURES, 'codex-0.171.0-responses.requests.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { path: string; headers: Record<string, string>; body: Record<string, unknown> });
  for (const r of recorded) {
    const headers = Object.fromEntries(Object.entries(r.headers).filter(([k]) => !['content-length', 'accept-encoding', 'connection', 'host', 'authorization'].includes(k.toLowerCase())));
    const reply = await post(`${p.base}${r.path.replace(/^\/v1/, '')}`, r.body, headers);
    assert.equal(reply.status, 200, reply.text.slice(0, 300));
  }
  const sent = up.of('responses', { conversation: true });
  assert.equal(sent.length, recorded.length);
  sent.forEach((s, i) => {
    const { input: _i, tools: own, ...rest } = recorded[i]!.body;
    const { input: _o, tools, ...forwarded } = s.body;
    assert.deepEqual(forwarded, rest, `#${i}: fields other than the history pass through`);
    const mine = own as unknown[];
    assert.deepEqual((tools as unknown[]).slice(0, mine.length), mine, "Codex's tools pass through, the proxy's memory tools after them");
    assert.ok((tools as Array<{ name?: string }>).slice(mine.length).some((t) => t.name === 'transcript_grep'));
    const devs = inputOf(recorded[i]!.body).filter((it) => it.role === 'developer');
    assert.deepEqual(inputOf(s.body).slice(0, devs.length), devs, "Codex's developer messages lead, as sent");
  });
  const { sessions } = await p.client.call('session.list', {});
  assert.equal(sessions.length, 1, JSON.stringify(sessions));
});
