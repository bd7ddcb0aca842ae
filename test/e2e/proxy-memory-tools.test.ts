// Memory tools run by the proxy, on the Anthropic Messages wire: a real daemon, its proxy, and a
// scripted upstream whose model calls transcript_grep. The agent must see one message with only
// its own tools' calls, in order, with the usage rule (last round's input, output summed); the
// stored transcript keeps every round; the agent's copy of the spliced message reconciles.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, test } from 'node:test';
import type { AlbedoClient } from '../../protocol/client.ts';
import { blocksOf, startScriptedUpstream, toolResultText, type Answer, type MessageAnswer, type ScriptedUpstream, type ScriptRequest, type WireBlock } from '../support/scripted-upstream.ts';
import { startEach, tempHome, type DaemonHandle } from './harness.ts';

const start = startEach();
const upstreams: ScriptedUpstream[] = [];
after(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
});

const FACT = 'the deploy key is ZEBRA-4242';
const TOOLS = [{ name: 'Bash', description: 'run a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } }];

interface Proxy {
  daemon: DaemonHandle;
  client: AlbedoClient;
  up: ScriptedUpstream;
  base: string;
}

async function proxyWith(script: (req: ScriptRequest) => Answer, extensions?: unknown, env: Record<string, string> = {}): Promise<Proxy> {
  const up = await startScriptedUpstream({ script, chunkSize: 7 });
  upstreams.push(up);
  const home = tempHome();
  if (extensions !== undefined) fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify(extensions));
  const daemon = await start({ home, env: { ALBEDO_ANTHROPIC_UPSTREAM: up.baseUrl, ...env } });
  const client = await daemon.connect();
  const status = await client.call('daemon.status', {});
  return { daemon, client, up, base: status.proxy.anthropic_base_url! };
}

function post(url: string, body: unknown): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-memory', 'anthropic-version': '2023-06-01' } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

function request(messages: unknown[], stream: boolean, tools: unknown[] = TOOLS): Record<string, unknown> {
  return { model: 'claude-sonnet-4-5', max_tokens: 4096, system: 'You are a test agent.', tools, stream, messages };
}

/** The opening of a session whose first message holds the fact. */
const HISTORY = [
  { role: 'user', content: `remember: ${FACT}` },
  { role: 'assistant', content: [{ type: 'text', text: 'noted' }] },
  { role: 'user', content: 'what is the deploy key?' },
];

/** The results of the proxy's tools in the request's newest user message. */
function grepResults(req: ScriptRequest): string[] {
  const last = req.body.messages?.at(-1);
  if (last === undefined || last.role !== 'user') return [];
  return blocksOf(last)
    .filter((b) => b.type === 'tool_result')
    .map(toolResultText);
}

function grep(pattern: string, usage: { input_tokens: number; output_tokens: number }, preamble?: string, extra: MessageAnswer['content'] = []): MessageAnswer {
  return { kind: 'message', content: [...(preamble === undefined ? [] : [{ type: 'text' as const, text: preamble }]), { type: 'tool_use', name: 'transcript_grep', input: { pattern } }, ...extra], stopReason: 'tool_use', usage };
}

/** The model: greps for ZEBRA, then quotes what the grep found. */
function quoting(req: ScriptRequest): Answer {
  const results = grepResults(req);
  if (results.length === 0) return grep('ZEBRA', { input_tokens: 1000, output_tokens: 11 }, 'let me look');
  const found = /ZEBRA-\d+/.exec(results.join('\n'))?.[0] ?? 'nothing';
  return { kind: 'message', content: [{ type: 'text', text: `the key is ${found}` }], stopReason: 'end_turn', usage: { input_tokens: 1300, output_tokens: 7 } };
}

interface Event {
  event: string;
  data: Record<string, unknown>;
}

function events(text: string): Event[] {
  return text
    .split('\n\n')
    .filter((f) => f.trim() !== '')
    .map((f) => {
      const event = /^event: (.*)$/m.exec(f)?.[1] ?? '';
      const data = JSON.parse(/^data: (.*)$/m.exec(f)?.[1] ?? '{}') as Record<string, unknown>;
      return { event, data };
    });
}

/** The message the client assembled from a stream: its blocks, stop reason and final usage. */
function assembled(evs: Event[]): { blocks: WireBlock[]; stop: unknown; usage: Record<string, unknown> } {
  const blocks: WireBlock[] = [];
  let stop: unknown = null;
  let usage: Record<string, unknown> = {};
  for (const e of evs) {
    if (e.event === 'content_block_start') {
      assert.equal(e.data.index, blocks.length, 'block indexes are consecutive');
      blocks.push({ ...(e.data.content_block as WireBlock) });
    } else if (e.event === 'content_block_delta') {
      const b = blocks[e.data.index as number];
      assert.ok(b !== undefined, 'a delta of a block the client was shown');
      const d = e.data.delta as Record<string, unknown>;
      if (d.type === 'text_delta') b.text = `${typeof b.text === 'string' ? b.text : ''}${typeof d.text === 'string' ? d.text : ''}`;
      if (d.type === 'thinking_delta') b.thinking = `${typeof b.thinking === 'string' ? b.thinking : ''}${typeof d.thinking === 'string' ? d.thinking : ''}`;
      if (d.type === 'signature_delta') b.signature = d.signature;
    } else if (e.event === 'content_block_stop') {
      assert.ok(blocks[e.data.index as number] !== undefined, 'no orphan content_block_stop');
    } else if (e.event === 'message_delta') {
      stop = (e.data.delta as Record<string, unknown>).stop_reason;
      usage = e.data.usage as Record<string, unknown>;
    }
  }
  return { blocks, stop, usage };
}

async function rowKinds(client: AlbedoClient, session: string): Promise<string[]> {
  const page = await client.call('transcript.rows', { session, after: 0, limit: 1000 });
  return page.rows.map((r) => (r.body.kind === 'assistant' ? `assistant:${r.body.content.map((p) => (p.type === 'tool_call' ? p.name : p.type)).join('+')}` : r.body.kind));
}

async function onlySession(client: AlbedoClient): Promise<string> {
  const { sessions } = await client.call('session.list', {});
  assert.equal(sessions.length, 1, `one session, no fork: ${JSON.stringify(sessions)}`);
  return sessions[0]!.session;
}

test('a streamed memory-tool call is answered by the proxy and spliced into one message; the agent sends it back without a fork', async () => {
  const p = await proxyWith(quoting);
  const r = await post(`${p.base}/v1/messages`, request(HISTORY, true));
  assert.equal(r.status, 200);
  const evs = events(r.text);
  assert.equal(evs.filter((e) => e.event === 'message_start').length, 1, 'one message_start');
  assert.equal(evs.filter((e) => e.event === 'message_stop').length, 1, 'one message_stop');
  assert.equal(evs.filter((e) => e.event === 'message_delta').length, 1, 'one message_delta');
  const msg = assembled(evs);
  assert.deepEqual(msg.blocks.map((b) => [b.type, b.text]), [['text', 'let me look'], ['text', 'the key is ZEBRA-4242']]);
  assert.equal(msg.stop, 'end_turn');
  assert.equal(msg.usage.input_tokens, 1300, "the last round's input");
  assert.equal(msg.usage.output_tokens, 18, 'output over both rounds');
  assert.ok(!r.text.includes('transcript_grep'), 'the agent never sees the memory tool');

  const sent = p.up.messages({ conversation: true });
  assert.equal(sent.length, 2, 'one follow-up went upstream');
  const added = (sent[0]!.body.tools as Array<{ name: string; description: string; input_schema: { properties?: Record<string, unknown> } }>).find((t) => t.name === 'transcript_grep');
  assert.ok(added !== undefined, 'the memory tools went upstream');
  assert.match(added.description, /full transcript, including history that compaction/, 'it says what it reaches');
  assert.ok(!('session' in (added.input_schema.properties ?? {})), 'the proxy knows the session; the model is not asked for it');
  assert.equal(sent[1]!.headers['x-api-key'], 'sk-ant-memory', "the follow-up carries the agent's credentials");
  assert.match(grepResults(sent[1]!).join('\n'), /ZEBRA-4242/, 'the grep found the fact in the transcript');

  const session = await onlySession(p.client);
  assert.deepEqual(await rowKinds(p.client, session), ['user', 'assistant:text', 'user', 'assistant:text+transcript_grep', 'tool_result', 'assistant:text']);
  const ctx = await p.client.call('context', { session });
  const notes = ctx.observation.notes.join('\n');
  assert.match(notes, /memory tools run by the proxy in the last turn that used them: 1 round\(s\), 1 call\(s\), ~1000 input and 11 output tokens/);
  assert.match(notes, /last memory-tool calls, newest first: transcript_grep\("ZEBRA"\)/);

  // The agent sends back what it saw, and asks on: the same session, the stored rounds go up.
  const seen = { role: 'assistant', content: msg.blocks };
  const next = await post(`${p.base}/v1/messages`, request([...HISTORY, seen, { role: 'user', content: 'thanks' }], true));
  assert.equal(next.status, 200);
  await onlySession(p.client);
  const third = p.up.messages({ conversation: true })[2]!;
  const upTools = (third.body.messages ?? []).flatMap((m) => blocksOf(m)).filter((b) => b.type === 'tool_use').map((b) => b.name);
  assert.deepEqual(upTools, ['transcript_grep'], 'upstream gets the stored rounds, not the spliced message');
});

test('the agent has its whole answer before the proxy stores it; its next request, sent while the store is held, waits for it and reconciles without a fork', { timeout: 60_000 }, async () => {
  // The staged fault holds the store of each turn's answer (and the session's queue) until the
  // home has a file release-store. An answer ended only after its store would never arrive.
  let n = 0;
  const p = await proxyWith(() => ({ kind: 'message', content: [{ type: 'text', text: `answer ${++n}` }], stopReason: 'end_turn', usage: { input_tokens: 500, output_tokens: 3 } }), undefined, { ALBEDO_FAULT: 'proxy-store-held' });
  const first = await post(`${p.base}/v1/messages`, request(HISTORY, true));
  assert.equal(first.status, 200);
  const msg = assembled(events(first.text));
  assert.deepEqual([msg.blocks.map((b) => b.text), msg.stop], [['answer 1'], 'end_turn']);

  let nextDone = false;
  const nextP = post(`${p.base}/v1/messages`, request([...HISTORY, { role: 'assistant', content: msg.blocks }, { role: 'user', content: 'go on' }], true)).finally(() => (nextDone = true));
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(nextDone, false, 'the next request waits for the store in the session queue');
  fs.writeFileSync(path.join(p.daemon.home, 'release-store'), '');
  const next = await nextP;
  assert.equal(next.status, 200);
  assert.deepEqual(assembled(events(next.text)).blocks.map((b) => b.text), ['answer 2']);
  const session = await onlySession(p.client);
  // transcript.rows waits in the same queue: both answers are stored, each once.
  assert.deepEqual(await rowKinds(p.client, session), ['user', 'assistant:text', 'user', 'assistant:text', 'user', 'assistant:text']);
  const ctx = await p.client.call('context', { session });
  assert.equal(ctx.observation.provider_input_tokens, 500, "the answer's usage reached /context");
});

test("each round's signed thinking stays with its round: the agent sees both, upstream gets each in the round that wrote it", async () => {
  const p = await proxyWith((req) =>
    grepResults(req).length === 0
      ? { kind: 'message', content: [{ type: 'thinking', thinking: 'search the transcript', signature: 'sig-round-one' }, { type: 'tool_use', name: 'transcript_grep', input: { pattern: 'ZEBRA' } }], stopReason: 'tool_use' }
      : { kind: 'message', content: [{ type: 'thinking', thinking: 'found it', signature: 'sig-round-two' }, { type: 'text', text: 'the key is ZEBRA-4242' }], stopReason: 'end_turn' }
  );
  const r = await post(`${p.base}/v1/messages`, request(HISTORY, true));
  const msg = assembled(events(r.text));
  assert.deepEqual(
    msg.blocks.map((b) => [b.type, b.thinking ?? b.text, b.signature ?? null]),
    [
      ['thinking', 'search the transcript', 'sig-round-one'],
      ['thinking', 'found it', 'sig-round-two'],
      ['text', 'the key is ZEBRA-4242', null],
    ],
  );

  // The agent sends the spliced message back: no fork, and upstream gets the two rounds apart.
  p.up.setScript(() => ({ kind: 'message', content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn' }));
  await post(`${p.base}/v1/messages`, request([...HISTORY, { role: 'assistant', content: msg.blocks }, { role: 'user', content: 'thanks' }], true));
  await onlySession(p.client);
  const sent = p.up.messages({ conversation: true }).at(-1)!;
  const rounds = (sent.body.messages ?? []).filter((m) => m.role === 'assistant').map((m) =>
    blocksOf(m).map((b) => (b.type === 'thinking' ? `thinking:${String(b.signature)}` : b.type === 'tool_use' ? `tool_use:${String(b.name)}` : b.type))
  );
  assert.deepEqual(rounds.slice(-2), [
    ['thinking:sig-round-one', 'tool_use:transcript_grep'],
    ['thinking:sig-round-two', 'text'],
  ]);
});

test('a memory-tool turn not streamed answers one body with only the client-visible blocks and the usage rule', async () => {
  const p = await proxyWith(quoting);
  const r = await post(`${p.base}/v1/messages`, request(HISTORY, false));
  assert.equal(r.status, 200);
  const body = JSON.parse(r.text) as { content: WireBlock[]; stop_reason: string; usage: { input_tokens: number; output_tokens: number } };
  assert.deepEqual(body.content.map((b) => b.text), ['let me look', 'the key is ZEBRA-4242']);
  assert.equal(body.stop_reason, 'end_turn');
  assert.deepEqual([body.usage.input_tokens, body.usage.output_tokens], [1300, 18]);
  assert.equal(r.headers['content-length'], String(Buffer.byteLength(r.text)));
});

/** What the agent got, streamed or not: its blocks and stop reason. */
function visible(text: string, stream: boolean): { blocks: WireBlock[]; stop: unknown } {
  if (stream) return assembled(events(text));
  const body = JSON.parse(text) as { content: WireBlock[]; stop_reason: string };
  return { blocks: body.content, stop: body.stop_reason };
}

for (const stream of [true, false]) {
  test(`${stream ? 'streamed' : 'not streamed'}: two rounds in one turn, and a memory call beside a client tool call ends the turn with only the client call`, async () => {
    let calls = 0;
    const p = await proxyWith((req) => {
      const results = grepResults(req);
      const joined = results.join('\n');
      if (results.length === 0 && calls === 0) {
        calls++;
        return grep('deploy', { input_tokens: 100, output_tokens: 1 });
      }
      if (calls === 1 && !joined.includes('[bash]')) {
        calls++;
        // Second round: another grep and the agent's own Bash at once.
        return grep('ZEBRA', { input_tokens: 200, output_tokens: 2 }, 'two things', [{ type: 'tool_use', name: 'Bash', input: { command: 'echo hi' } }]);
      }
      return { kind: 'message', content: [{ type: 'text', text: 'done' }], stopReason: 'end_turn', usage: { input_tokens: 300, output_tokens: 3 } };
    });
    const r = await post(`${p.base}/v1/messages`, request(HISTORY, stream));
    const msg = visible(r.text, stream);
    assert.deepEqual(msg.blocks.map((b) => b.type === 'tool_use' ? `tool_use:${String(b.name)}` : b.type), ['text', 'tool_use:Bash']);
    assert.equal(msg.stop, 'tool_use', "the stop reason names the agent's own tool");
    assert.equal(p.up.messages({ conversation: true }).length, 2, 'the turn ended at the round with the client call');
    const session = await onlySession(p.client);
    assert.deepEqual((await rowKinds(p.client, session)).slice(3), ['assistant:transcript_grep', 'tool_result', 'assistant:text+transcript_grep+Bash', 'tool_result']);

    // The agent runs Bash and sends its result: the memory exchange stays, every call is paired.
    const bash = msg.blocks[1]!;
    await post(`${p.base}/v1/messages`, request([...HISTORY, { role: 'assistant', content: msg.blocks }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: bash.id, content: '[bash] hi' }] }], true));
    await onlySession(p.client);
    const last = p.up.messages({ conversation: true }).at(-1)!;
    const blocks = (last.body.messages ?? []).flatMap((m) => blocksOf(m));
    const uses = blocks.filter((b) => b.type === 'tool_use').map((b) => b.id);
    const results = blocks.filter((b) => b.type === 'tool_result').map((b) => b.tool_use_id);
    assert.deepEqual([...results].sort(), [...uses].sort(), 'every call upstream has its result');
  });

  test(`${stream ? 'streamed' : 'not streamed'}: the ninth round of memory calls is refused and its follow-up allows no tools`, async () => {
    const p = await proxyWith((req) => (req.body.tool_choice !== undefined ? { kind: 'message', content: [{ type: 'text', text: 'giving up' }], stopReason: 'end_turn' } : grep('ZEBRA', { input_tokens: 10, output_tokens: 1 })));
    const r = await post(`${p.base}/v1/messages`, request(HISTORY, stream));
    assert.deepEqual(visible(r.text, stream).blocks.map((b) => b.text), ['giving up']);
    const sent = p.up.messages({ conversation: true });
    assert.equal(sent.length, 10, 'the answer and nine follow-ups');
    assert.deepEqual(sent[9]!.body.tool_choice, { type: 'none' });
    assert.equal(sent.slice(0, 9).filter((s) => s.body.tool_choice !== undefined).length, 0);
    assert.match(grepResults(sent[9]!).join('\n'), /at most 8 memory-tool rounds/);
    assert.doesNotMatch(grepResults(sent[8]!).join('\n'), /at most 8/, 'the eighth round still ran');
    // /context (and so `albedo context`) names the newest five calls of the nine, and the refused one.
    const notes = (await p.client.call('context', { session: await onlySession(p.client) })).observation.notes.join('\n');
    assert.match(notes, /9 round\(s\), 9 call\(s\) \(1 answered with an error\)/);
    const newest = /last memory-tool calls, newest first: (.*)/.exec(notes)?.[1] ?? '';
    assert.equal(newest, Array.from({ length: 5 }, () => 'transcript_grep("ZEBRA")').join(', '));
  });
}

test('memoryTools off, or the tools already offered by the agent as an MCP server, adds nothing', async () => {
  const off = await proxyWith(() => ({ kind: 'message', content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn' }), { proxy: { memoryTools: 'off' } });
  await post(`${off.base}/v1/messages`, request(HISTORY, true));
  assert.deepEqual((off.up.messages({ conversation: true })[0]!.body.tools as Array<{ name: string }>).map((t) => t.name), ['Bash']);

  const mcp = await proxyWith(() => ({ kind: 'message', content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn' }));
  const own = [...TOOLS, { name: 'mcp__albedo__transcript_grep', description: 'grep', input_schema: { type: 'object' } }];
  await post(`${mcp.base}/v1/messages`, request(HISTORY, true, own));
  assert.deepEqual((mcp.up.messages({ conversation: true })[0]!.body.tools as Array<{ name: string }>).map((t) => t.name), ['Bash', 'mcp__albedo__transcript_grep']);

  const some = await proxyWith(() => ({ kind: 'message', content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn' }), { proxy: { memoryTools: ['transcript_grep'] } });
  await post(`${some.base}/v1/messages`, request(HISTORY, true));
  assert.deepEqual((some.up.messages({ conversation: true })[0]!.body.tools as Array<{ name: string }>).map((t) => t.name), ['Bash', 'transcript_grep']);
});
