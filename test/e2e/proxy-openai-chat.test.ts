// The Chat Completions wire through the proxy: a real daemon, its proxy on 127.0.0.1, and a
// scripted upstream (test/support/openai-upstream.ts). Streaming and not, parallel tool calls
// assembled from interleaved fragments, the usage chunk asked for on the agent's behalf and
// hidden from it, parts the daemon does not model kept as sent, images, errors, retries.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, test } from 'node:test';
import type { AlbedoClient } from '../../protocol/client.ts';
import { openaiAnswer, startOpenAIUpstream, type OpenAIScript, type OpenAIUpstream } from '../support/openai-upstream.ts';
import { pngBytes } from '../storage/factories.ts';
import { startEach, type DaemonHandle } from './harness.ts';

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
}

async function proxyWith(script: OpenAIScript): Promise<Proxy> {
  const up = await startOpenAIUpstream({ script, chunkSize: 5 });
  upstreams.push(up);
  const daemon = await start({ env: { ALBEDO_OPENAI_UPSTREAM: up.baseUrl } });
  const client = await daemon.connect();
  const status = await client.call('daemon.status', {});
  return { daemon, client, up, base: status.proxy.openai_base_url! };
}

function post(url: string, body: unknown): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const data = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-chat-test' } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

const TOOLS = [{ type: 'function', function: { name: 'bash', description: 'run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }];

function request(messages: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'gpt-5.5', messages: [{ role: 'system', content: 'You are a test agent.' }, ...messages], tools: TOOLS, stream: true, ...extra };
}

/** The data payloads of a streamed answer, `[DONE]` included. */
function dataOf(text: string): string[] {
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
}

/** The message a client assembles from the chunks. */
function assemble(text: string): { content: string; calls: Array<{ id: string; name: string; arguments: string }> } {
  let content = '';
  const calls: Array<{ id: string; name: string; arguments: string }> = [];
  for (const d of dataOf(text)) {
    if (d === '[DONE]') continue;
    const chunk = JSON.parse(d) as { choices: Array<{ delta: { content?: string; tool_calls?: Array<{ index: number; id?: string; function?: { name?: string; arguments?: string } }> } }> };
    for (const c of chunk.choices) {
      content += c.delta.content ?? '';
      for (const t of c.delta.tool_calls ?? []) {
        const call = (calls[t.index] ??= { id: '', name: '', arguments: '' });
        call.id ||= t.id ?? '';
        call.name += t.function?.name ?? '';
        call.arguments += t.function?.arguments ?? '';
      }
    }
  }
  return { content, calls };
}

async function rows(client: AlbedoClient): Promise<Array<{ kind: string; body: string }>> {
  const { sessions } = await client.call('session.list', {});
  assert.equal(sessions.length, 1, JSON.stringify(sessions));
  const page = await client.call('transcript.rows', { session: sessions[0]!.session, after: 0, limit: 1000 });
  return page.rows.map((r) => ({ kind: r.body.kind, body: JSON.stringify(r.body) }));
}

test('a streamed turn with two parallel tool calls reaches the agent as sent and is stored assembled; usage the agent did not ask for is hidden from it', async () => {
  const p = await proxyWith(() => ({
    kind: 'message',
    text: 'two at once',
    calls: [{ name: 'bash', arguments: { command: 'ls -la /tmp' } }, { name: 'bash', arguments: { command: 'cat /etc/hostname' } }],
    usage: { input: 321, cached: 100, output: 12 },
  }));
  const r = await post(`${p.base}/chat/completions`, request([{ role: 'user', content: 'look around' }]));
  assert.equal(r.status, 200);
  const got = assemble(r.text);
  assert.equal(got.content, 'two at once');
  assert.deepEqual(got.calls.map((c) => JSON.parse(c.arguments) as unknown), [{ command: 'ls -la /tmp' }, { command: 'cat /etc/hostname' }]);
  assert.equal(dataOf(r.text).at(-1), '[DONE]');
  assert.ok(!dataOf(r.text).some((d) => d !== '[DONE]' && (JSON.parse(d) as { choices: unknown[] }).choices.length === 0), 'the usage-only chunk is not shown to an agent that did not ask');
  const up = p.up.of('chat', { conversation: true })[0]!;
  assert.deepEqual(up.body.stream_options, { include_usage: true }, 'the proxy asked for usage upstream');
  assert.equal(up.headers.authorization, 'Bearer sk-chat-test');
  const stored = await rows(p.client);
  assert.deepEqual(stored.map((x) => x.kind), ['user', 'assistant']);
  assert.match(stored[1]!.body, /"name":"bash".*ls -la \/tmp.*"name":"bash".*cat \/etc\/hostname/);
  const { sessions } = await p.client.call('session.list', {});
  const ctx = await p.client.call('context', { session: sessions[0]!.session });
  assert.equal(ctx.observation.provider_input_tokens, 321, 'the usage reached /context');
});

test('an agent that asks for usage gets its chunk; a non-streamed answer is recorded; the tool results of the next request pair with the stored calls', async () => {
  const p = await proxyWith((req) => (req.body.stream === true ? openaiAnswer.call('bash', { command: 'echo hi' }) : openaiAnswer.text('plain answer')));
  const r = await post(`${p.base}/chat/completions`, request([{ role: 'user', content: 'go' }], { stream_options: { include_usage: true } }));
  assert.ok(dataOf(r.text).some((d) => d !== '[DONE]' && (JSON.parse(d) as { choices: unknown[]; usage?: unknown }).choices.length === 0), 'the agent asked and sees the usage chunk');
  const call = assemble(r.text).calls[0]!;
  const next = await post(
    `${p.base}/chat/completions`,
    request([{ role: 'user', content: 'go' }, { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: { name: 'bash', arguments: call.arguments } }] }, {
      role: 'tool',
      tool_call_id: call.id,
      content: 'hi',
    }], { stream: false }),
  );
  assert.equal(next.status, 200);
  assert.equal((JSON.parse(next.text) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content, 'plain answer');
  assert.deepEqual((await rows(p.client)).map((x) => x.kind), ['user', 'assistant', 'tool_result', 'assistant'], 'the recorded call was matched, not stored twice');
  const second = p.up.of('chat', { conversation: true })[1]!;
  const msgs = second.body.messages as Array<{ role: string; content: unknown; tool_calls?: Array<{ id: string }>; tool_call_id?: string }>;
  // The agent's system message as sent, then the daemon's own (its extension note), then the history.
  assert.deepEqual(msgs.map((m) => m.role), ['system', 'system', 'user', 'assistant', 'tool']);
  assert.equal(msgs[0]!.content, 'You are a test agent.');
  assert.match(String(msgs[1]!.content), /^Context management \(albedo-compactd\)/);
  assert.equal(msgs[3]!.tool_calls![0]!.id, msgs[4]!.tool_call_id);
  assert.equal(second.body.stream_options, undefined, 'not streamed: nothing added');
});

test('parts the daemon does not model go back byte for byte; a data-URL image is stored as a payload and sent back; a retry stores nothing twice', async () => {
  const p = await proxyWith(() => openaiAnswer.text('seen'));
  const png = (await pngBytes(8, 8)).toString('base64');
  const audio = { type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } };
  const remote = { type: 'image_url', image_url: { url: 'https://example.com/cat.png', detail: 'low' } };
  const history = [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } }, audio, remote] }];
  await post(`${p.base}/chat/completions`, request(history));
  await post(`${p.base}/chat/completions`, request(history));
  const stored = await rows(p.client);
  assert.deepEqual(stored.map((x) => x.kind), ['user', 'assistant'], 'the retried request and its same answer are stored once');
  assert.match(stored[0]!.body, /"type":"image","hash"/, 'the image is a payload');
  const sent = p.up.of('chat', { conversation: true })[0]!;
  const user = (sent.body.messages as Array<{ role: string; content: unknown }>)[2]!;
  assert.deepEqual(user.content, [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } }, audio, remote]);
});

test('an upstream 500 reaches the agent with its status and body; a body that is not a Chat request gets an OpenAI-shaped 400', async () => {
  const p = await proxyWith(() => openaiAnswer.error(500, 'the upstream broke'));
  const r = await post(`${p.base}/chat/completions`, request([{ role: 'user', content: 'go' }]));
  assert.equal(r.status, 500);
  assert.deepEqual(JSON.parse(r.text), { error: { message: 'the upstream broke', type: 'server_error', code: null } });
  assert.deepEqual((await rows(p.client)).map((x) => x.kind), ['user'], 'no turn recorded');
  const bad = await post(`${p.base}/chat/completions`, { model: 'gpt-5.5', messages: 'not a list' });
  assert.equal(bad.status, 400);
  const err = JSON.parse(bad.text) as { error: { message: string; type: string } };
  assert.equal(err.error.type, 'invalid_request_error');
  assert.match(err.error.message, /not a Chat Completions request: messages/);
  const notJson = await post(`${p.base}/chat/completions`, '{"model":');
  assert.equal(notJson.status, 400);
  assert.match(notJson.text, /"error":\{"message":"albedo proxy: the request body is not JSON/);
});
