// The Anthropic Messages proxy end to end: a real daemon, its proxy on 127.0.0.1, and a
// scripted upstream (test/support/scripted-upstream.ts). Streaming and not, retries after a
// 529, forks after an edit, opaque parts, a client that goes away, count_tokens, the token, a
// taken port, and the recorded requests of real agents replayed through it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import type { AlbedoClient } from '../../protocol/client.ts';
import { user } from '../storage/factories.ts';
import { answer, startScriptedUpstream, type Answer, type ScriptedUpstream, type ScriptRequest } from '../support/scripted-upstream.ts';
import { startEach, tempHome, type DaemonHandle } from './harness.ts';

const start = startEach();
const upstreams: ScriptedUpstream[] = [];
after(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
});

interface Proxy {
  daemon: DaemonHandle;
  client: AlbedoClient;
  up: ScriptedUpstream;
  /** The proxy's Anthropic base URL (with the token). */
  base: string;
}

async function proxyWith(script: (req: ScriptRequest) => Answer | Promise<Answer>, extensions?: unknown, env: Record<string, string> = {}): Promise<Proxy> {
  const up = await startScriptedUpstream({ script });
  upstreams.push(up);
  const home = tempHome();
  if (extensions !== undefined) fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify(extensions));
  const daemon = await start({ home, env: { ALBEDO_ANTHROPIC_UPSTREAM: up.baseUrl, ...env } });
  const client = await daemon.connect();
  const status = await client.call('daemon.status', {});
  assert.equal(status.proxy.listening, true, status.proxy.error ?? '');
  return { daemon, client, up, base: status.proxy.anthropic_base_url! };
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const data = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-test', 'anthropic-version': '2023-06-01', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

const TOOLS = [{ name: 'Bash', description: 'run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } }];

function request(messages: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model: 'claude-sonnet-4-5', max_tokens: 4096, system: [{ type: 'text', text: 'You are a test agent.', cache_control: { type: 'ephemeral' } }], tools: TOOLS, stream: true, messages, ...extra };
}

/** The text of a streamed or plain answer. */
function answerText(r: Reply): string {
  if (r.headers['content-type']?.startsWith('application/json') === true) {
    const m = JSON.parse(r.text) as { content: Array<{ type: string; text?: string }> };
    return m.content.map((b) => b.text ?? '').join('');
  }
  return [...r.text.matchAll(/"text_delta","text":"((?:[^"\\]|\\.)*)"/g)].map((m) => JSON.parse(`"${m[1]!}"`) as string).join('');
}

async function rowsOf(client: AlbedoClient, session: string): Promise<Array<{ kind: string; text: string }>> {
  const page = await client.call('transcript.rows', { session, after: 0, limit: 1000 });
  return page.rows.map((r) => ({ kind: r.body.kind, text: JSON.stringify(r.body) }));
}

async function onlySession(client: AlbedoClient): Promise<string> {
  const { sessions } = await client.call('session.list', {});
  assert.equal(sessions.length, 1, JSON.stringify(sessions));
  return sessions[0]!.session;
}

test('a streamed turn goes upstream with the agent headers, streams back unchanged, and is recorded with its usage', async () => {
  const p = await proxyWith((req) => (req.index === 0 ? answer.tool('Bash', { command: 'ls' }, 'listing') : answer.text('two files', { input_tokens: 900, cache_read_input_tokens: 600, cache_creation_input_tokens: 100 })));
  const first = await post(`${p.base}/v1/messages?beta=true`, request([{ role: 'user', content: 'list the dir' }]), { 'anthropic-beta': 'interleaved-thinking-2025-05-14', 'user-agent': 'test-agent/1.0' });
  assert.equal(first.status, 200);
  assert.match(first.text, /event: message_start[\s\S]*event: message_stop/);
  const up0 = p.up.messages({ conversation: true })[0]!;
  assert.equal(up0.headers['anthropic-beta'], 'interleaved-thinking-2025-05-14');
  assert.equal(up0.headers['x-api-key'], 'sk-ant-test');
  assert.equal(up0.query, 'beta=true');
  const call = /"id":"(toolu_[0-9a-f]+)"/.exec(first.text)![1]!;
  const second = await post(
    `${p.base}/v1/messages`,
    request([
      { role: 'user', content: 'list the dir' },
      { role: 'assistant', content: [{ type: 'text', text: 'listing' }, { type: 'tool_use', id: call, name: 'Bash', input: { command: 'ls' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call, content: 'a.ts\nb.ts', cache_control: { type: 'ephemeral' } }] },
    ]),
  );
  assert.equal(answerText(second), 'two files');
  const session = await onlySession(p.client);
  const rows = await rowsOf(p.client, session);
  assert.deepEqual(rows.map((r) => r.kind), ['user', 'assistant', 'tool_result', 'assistant']);
  assert.match(rows[3]!.text, /two files/);
  const ctx = await p.client.call('context', { session });
  assert.equal(ctx.observation.provider_input_tokens, 1600, 'input + cache read + cache creation');
  assert.equal(ctx.observation.provider_cached_tokens, 600);
  // The system prompt went up as sent, the daemon's block after it; markers within 4.
  const body = p.up.messages({ conversation: true })[1]!.body;
  const system = body.system as Array<{ text: string; cache_control?: unknown }>;
  assert.equal(system[0]!.text, 'You are a test agent.');
  assert.deepEqual(system[0]!.cache_control, { type: 'ephemeral' });
  assert.match(system[system.length - 1]!.text, /albedo-compactd/);
  assert.ok(JSON.stringify(body).split('cache_control').length - 1 <= 4);
});

test('a non-streamed answer is recorded too; a side request (no tools) is forwarded as it came and only counted', async () => {
  const p = await proxyWith(() => answer.text('plain answer'));
  const r = await post(`${p.base}/v1/messages`, request([{ role: 'user', content: 'hello' }], { stream: false }));
  assert.equal(answerText(r), 'plain answer');
  const side = { model: 'claude-haiku-4-5', max_tokens: 50, messages: [{ role: 'user', content: 'a title for: hello' }] };
  const s = await post(`${p.base}/v1/messages`, side);
  assert.equal(s.status, 200);
  assert.deepEqual(p.up.messages({ conversation: false })[0]!.body, side, 'unchanged');
  const session = await onlySession(p.client);
  assert.deepEqual((await rowsOf(p.client, session)).map((x) => x.kind), ['user', 'assistant']);
  const ctx = await p.client.call('context', { session });
  assert.ok(ctx.observation.notes.some((n) => /1 side request/.test(n)), ctx.observation.notes.join('\n'));
});

test('a 529 reaches the agent with its status and body, nothing is recorded, and the retry stores every row once', async () => {
  let failed = false;
  const p = await proxyWith(() => {
    if (!failed) {
      failed = true;
      return answer.overloaded();
    }
    return answer.text('after the retry');
  });
  const body = request([{ role: 'user', content: 'do it' }]);
  const r1 = await post(`${p.base}/v1/messages`, body);
  assert.equal(r1.status, 529);
  assert.deepEqual(JSON.parse(r1.text), { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
  const session = await onlySession(p.client);
  assert.deepEqual((await rowsOf(p.client, session)).map((x) => x.kind), ['user']);
  const r2 = await post(`${p.base}/v1/messages`, body);
  assert.equal(answerText(r2), 'after the retry');
  assert.deepEqual((await rowsOf(p.client, session)).map((x) => x.kind), ['user', 'assistant']);
});

test('an event: error inside a 200 stream reaches the agent and records no turn', async () => {
  const p = await proxyWith(() => answer.streamError('overloaded_error', 'Overloaded', [{ type: 'text', text: 'half' }]));
  const r = await post(`${p.base}/v1/messages`, request([{ role: 'user', content: 'go' }]));
  assert.equal(r.status, 200);
  assert.match(r.text, /event: error/);
  const session = await onlySession(p.client);
  assert.deepEqual((await rowsOf(p.client, session)).map((x) => x.kind), ['user']);
});

test('an earlier prompt edited by the agent continues in a fork; the stored session keeps its rows', async () => {
  const p = await proxyWith(() => answer.text('ok'));
  const history = [
    { role: 'user', content: 'first task' },
    { role: 'assistant', content: [{ type: 'text', text: 'ok' }] },
    { role: 'user', content: 'second task' },
  ];
  await post(`${p.base}/v1/messages`, request(history.slice(0, 1)));
  await post(`${p.base}/v1/messages`, request(history));
  await post(`${p.base}/v1/messages`, request([history[0], history[1], { role: 'user', content: 'second task, rephrased' }]));
  const { sessions } = await p.client.call('session.list', {});
  assert.equal(sessions.length, 2);
  const [orig, fork] = sessions as [(typeof sessions)[0], (typeof sessions)[0]];
  assert.equal(fork.parent, orig.session);
  assert.deepEqual((await rowsOf(p.client, orig.session)).map((r) => r.kind), ['user', 'assistant', 'user', 'assistant']);
  const forkRows = await rowsOf(p.client, fork.session);
  assert.equal(forkRows.length, 4);
  assert.match(forkRows[2]!.text, /rephrased/);
});

test('blocks the daemon does not model go back byte for byte while they are in the tail', async () => {
  const p = await proxyWith(() => answer.text('seen'));
  const doc = { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'the report' }, title: 'report.txt', citations: { enabled: true } };
  const redacted = { type: 'redacted_thinking', data: 'EqQBCkYIAxgCIkBsecret' };
  const server = { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'albedo' } };
  const history = [
    { role: 'user', content: [{ type: 'text', text: 'read this' }, doc] },
    { role: 'assistant', content: [redacted, server, { type: 'text', text: 'reading' }] },
    { role: 'user', content: 'and?' },
  ];
  await post(`${p.base}/v1/messages`, request(history));
  const sent = p.up.messages({ conversation: true })[0]!.body.messages!;
  const blocks = sent.flatMap((m) => (typeof m.content === 'string' ? [] : m.content));
  for (const b of [doc, redacted, server]) assert.ok(blocks.some((x) => JSON.stringify(x) === JSON.stringify(b)), `${b.type} went up unchanged`);
  // Search and summaries see a marker, not the bytes.
  const session = await onlySession(p.client);
  const hits = await p.client.call('transcript_grep', { session, pattern: 'EqQBCkYIAxgCIkBsecret' });
  assert.equal(hits.total, 0);
  const marker = await p.client.call('transcript_grep', { session, pattern: 'redacted_thinking' });
  assert.equal(marker.total, 1);
});

test('an agent that disconnects mid-stream cancels the upstream request, and nothing half-received is stored', async () => {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  const p = await proxyWith(async () => {
    await held;
    return answer.text('too late');
  });
  const url = new URL(`${p.base}/v1/messages`);
  const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-test' } });
  req.on('error', () => undefined);
  req.end(JSON.stringify(request([{ role: 'user', content: 'slow one' }])));
  // Wait until the upstream has the request, then go away.
  for (let i = 0; i < 200 && p.up.messages().length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(p.up.messages().length, 1);
  req.destroy();
  await new Promise((r) => setTimeout(r, 100));
  release();
  await new Promise((r) => setTimeout(r, 200));
  const session = await onlySession(p.client);
  assert.deepEqual((await rowsOf(p.client, session)).map((x) => x.kind), ['user'], 'no assistant turn was recorded');
});

test('idle-time work waits while a proxied request is read, prepared and sent, and runs again once the upstream answers', async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let arrived!: () => void;
  const arrival = new Promise<void>((r) => (arrived = r));
  const p = await proxyWith(async () => {
    arrived();
    await held;
    return answer.text('late');
  });
  const db = new Database(path.join(p.daemon.home, 'albedo.db'), { readonly: true });
  try {
    const indexedThrough = (): number => (db.prepare('SELECT indexed_through FROM search_index_state WHERE id = 1').pluck().get() as number | undefined) ?? 0;
    const head = (): number => (db.prepare('SELECT max(seq) FROM transcript').pluck().get() as number | null) ?? 0;
    const reply = post(`${p.base}/v1/messages`, request([{ role: 'user', content: 'index me later' }]));
    await arrival;
    // Rows appended over the socket meanwhile make the indexer due.
    await p.client.call('session.open', { session: 'beside' });
    await p.client.call('transcript.append', { session: 'beside', rows: Array.from({ length: 20 }, (_, i) => user(`row ${i} beside the proxied request`)) });
    const before = indexedThrough();
    assert.ok(before < head(), 'rows wait for the indexer');
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(indexedThrough(), before, 'nothing is indexed while the proxied request waits for its upstream');
    release();
    assert.equal((await reply).status, 200);
    for (let i = 0; i < 200 && indexedThrough() < head(); i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(indexedThrough(), head(), 'the indexer caught up once the upstream answered');
  } finally {
    db.close();
  }
});

test('count_tokens is answered for the compacted request, writes nothing and runs no summarizer', async () => {
  const big = 'x'.repeat(8000);
  const p = await proxyWith(() => answer.text('noted'), { rolling: { contextWindowTokens: 8000 } });
  const history: unknown[] = [];
  for (let i = 0; i < 8; i++) {
    history.push({ role: 'user', content: `part ${i}: ${big}` });
    await post(`${p.base}/v1/messages`, request(history));
    history.push({ role: 'assistant', content: [{ type: 'text', text: 'noted' }] });
  }
  const session = await onlySession(p.client);
  const rowsBefore = (await rowsOf(p.client, session)).length;
  const summariesBefore = p.up.messages({ conversation: false }).length;
  const counted = await post(`${p.base}/v1/messages/count_tokens`, { model: 'claude-sonnet-4-5', system: 'You are a test agent.', tools: TOOLS, messages: [...history, { role: 'user', content: 'next' }] });
  assert.equal(counted.status, 200);
  const tokens = (JSON.parse(counted.text) as { input_tokens: number }).input_tokens;
  const raw = Math.ceil(JSON.stringify(history).length / 4);
  assert.ok(tokens < raw / 2, `counted ${tokens} for a history of ~${raw} tokens`);
  assert.equal((await rowsOf(p.client, session)).length, rowsBefore, 'no rows written');
  assert.equal(p.up.messages({ conversation: false }).length, summariesBefore, 'no summarizer call');
  const last = p.up.requests[p.up.requests.length - 1]!;
  assert.equal(last.kind, 'count_tokens');
  assert.match(last.rawBody, /next/);
});

test('max_tokens is lowered when input and output would not fit the model window, and /context says so', async () => {
  const p = await proxyWith(() => answer.text('short'));
  // claude-sonnet-4-5 has a 200,000-token window in the catalog.
  await post(`${p.base}/v1/messages`, request([{ role: 'user', content: 'y'.repeat(40_000) }], { max_tokens: 195_000, thinking: { type: 'enabled', budget_tokens: 194_000 } }));
  const sent = p.up.messages({ conversation: true })[0]!.body;
  assert.ok(sent.max_tokens !== undefined && sent.max_tokens < 195_000 && sent.max_tokens > 180_000, String(sent.max_tokens));
  assert.deepEqual(sent.thinking, { type: 'enabled', budget_tokens: sent.max_tokens - 1 }, 'the thinking budget stays below max_tokens');
  const ctx = await p.client.call('context', { session: await onlySession(p.client) });
  assert.ok(ctx.observation.notes.some((n) => /max_tokens lowered from 195000/.test(n)), ctx.observation.notes.join('\n'));
});

test('without the token the proxy answers 404; the token as a header works; a bad body gets the provider error shape', async () => {
  const p = await proxyWith(() => answer.text('ok'));
  const token = new URL(p.base).pathname.split('/')[1]!;
  const origin = new URL(p.base).origin;
  assert.equal((await post(`${origin}/anthropic/v1/messages`, request([{ role: 'user', content: 'hi' }]))).status, 404);
  assert.equal((await post(`${origin}/wrong-token/anthropic/v1/messages`, request([{ role: 'user', content: 'hi' }]))).status, 404);
  const viaHeader = await post(`${origin}/anthropic/v1/messages`, request([{ role: 'user', content: 'hi' }]), { 'x-albedo-token': token });
  assert.equal(viaHeader.status, 200);
  const bad = await post(`${p.base}/v1/messages`, '{"model": ');
  assert.equal(bad.status, 400);
  assert.equal((JSON.parse(bad.text) as { error: { type: string } }).error.type, 'invalid_request_error');
  assert.equal(p.up.requests.length, 1, 'neither the refused nor the bad request reached the upstream');
  assert.equal((fs.statSync(path.join(p.daemon.home, 'proxy.token')).mode & 0o777).toString(8), '600');
});

test('failure is open: a request the daemon cannot prepare goes upstream exactly as the agent sent it', async () => {
  const p = await proxyWith(() => answer.text('answered anyway'), undefined, { ALBEDO_FAULT: 'proxy-prepare-fails' });
  const body = request([{ role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] }]);
  const r = await post(`${p.base}/v1/messages`, body);
  assert.equal(answerText(r), 'answered anyway');
  assert.deepEqual(p.up.messages({ conversation: true })[0]!.body, body, 'the original body, unchanged');
  assert.match(fs.readFileSync(path.join(p.daemon.home, 'albedod.log'), 'utf8'), /could not be prepared; forwarding it unchanged/);
});

test('with memory tools off, a gzip answer reaches the agent as the upstream encoded it while the tee reads a decoded copy; zstd is not asked for', async () => {
  const sse = [
    ['message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], usage: { input_tokens: 50, output_tokens: 1 } } }],
    ['content_block_start', { index: 0, content_block: { type: 'text', text: '' } }],
    ['content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'compressed hello' } }],
    ['content_block_stop', { index: 0 }],
    ['message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } }],
    ['message_stop', {}],
  ].map(([e, d]) => `event: ${e as string}\ndata: ${JSON.stringify({ type: e, ...(d as object) })}\n\n`).join('');
  const seen: string[] = [];
  const gz = http.createServer((req, res) => {
    seen.push(String(req.headers['accept-encoding']));
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
      res.end(zlib.gzipSync(sse));
    });
  });
  await new Promise<void>((resolve) => gz.listen(0, '127.0.0.1', resolve));
  try {
    // With memory tools on, the proxy reads and rewrites the stream (a turn may need splicing);
    // off, the upstream's bytes pass through as they came.
    const home = tempHome();
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ proxy: { memoryTools: 'off' } }));
    const daemon = await start({ home, env: { ALBEDO_ANTHROPIC_UPSTREAM: `http://127.0.0.1:${(gz.address() as net.AddressInfo).port}` } });
    const client = await daemon.connect();
    const base = (await client.call('daemon.status', {})).proxy.anthropic_base_url!;
    const raw = await new Promise<{ encoding: string | undefined; body: Buffer }>((resolve, reject) => {
      const req = http.request(`${base}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'k', 'accept-encoding': 'gzip, deflate, br, zstd' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ encoding: res.headers['content-encoding'], body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      req.end(JSON.stringify(request([{ role: 'user', content: 'hi' }])));
    });
    assert.equal(raw.encoding, 'gzip');
    assert.equal(zlib.gunzipSync(raw.body).toString('utf8'), sse, 'the agent gets the upstream bytes');
    assert.deepEqual(seen, ['gzip, br']);
    const session = await onlySession(client);
    const rows = await rowsOf(client, session);
    assert.deepEqual(rows.map((r) => r.kind), ['user', 'assistant']);
    assert.match(rows[1]!.text, /compressed hello/);
  } finally {
    gz.close();
  }
});

test('a taken port leaves the daemon serving its socket, and daemon.status says why the proxy is not listening', async () => {
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  const port = (blocker.address() as net.AddressInfo).port;
  try {
    const daemon = await start({ env: { ALBEDO_PROXY_PORT: String(port) } });
    const client = await daemon.connect();
    const status = await client.call('daemon.status', {});
    assert.equal(status.proxy.listening, false);
    assert.match(status.proxy.error ?? '', new RegExp(`port ${port}.*taken`));
    assert.equal((await client.call('session.open', { session: 'still-works' })).created, true);
  } finally {
    blocker.close();
  }
});

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../shared/fixtures/proxy');

test('the requests Claude Code and pi sent are accepted, reconciled and forwarded with every field but the history unchanged', { skip: !fs.existsSync(FIXTURES) && 'shared fixtures absent' }, async () => {
  for (const file of ['claude-code-2.1.332.requests.jsonl', 'pi-0.73.1-anthropic-messages.requests.jsonl']) {
    const p = await proxyWith(() => answer.text('ok'));
    const recorded = fs.readFileSync(path.join(FIXTURES, file), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { path: string; headers: Record<string, string>; body: Record<string, unknown> });
    for (const r of recorded) {
      const headers = Object.fromEntries(Object.entries(r.headers).filter(([k]) => !['content-length', 'accept-encoding', 'connection', 'host'].includes(k.toLowerCase())));
      const reply = await post(`${p.base}${r.path}`, r.body, headers);
      assert.equal(reply.status, 200, `${file}: ${reply.text.slice(0, 300)}`);
    }
    const sent = p.up.messages({ conversation: true });
    assert.equal(sent.length, recorded.length);
    sent.forEach((s, i) => {
      const { messages: _m, system: _s, max_tokens: _x, tools: clientTools, ...rest } = recorded[i]!.body;
      const { messages: _m2, system: _s2, max_tokens: _x2, tools, ...forwarded } = s.body;
      assert.deepEqual(forwarded, rest, `${file} #${i}: fields other than the history pass through`);
      // The agent's tools go first, as sent; the proxy's memory tools follow them.
      const own = clientTools as unknown[];
      assert.deepEqual((tools as unknown[]).slice(0, own.length), own, `${file} #${i}: the agent's tools pass through`);
      assert.ok((tools as Array<{ name: string }>).slice(own.length).some((t) => t.name === 'transcript_grep'), 'the proxy adds its memory tools');
      // The agent's system blocks lead, as sent.
      const sys = recorded[i]!.body.system;
      if (Array.isArray(sys)) assert.deepEqual((s.body.system as unknown[]).slice(0, sys.length), sys);
    });
    const { sessions } = await p.client.call('session.list', {});
    assert.equal(sessions.length, 1, `${file}: one session, ${JSON.stringify(sessions)}`);
    await p.daemon.stop();
  }
});
