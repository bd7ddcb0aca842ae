// Memory tools run by the proxy on the OpenAI wires (Chat Completions and Responses), each
// streamed and not: the model's transcript_grep is answered by the proxy, the agent gets one
// message with consecutive indexes and the usage rule (last round's input, output summed), and
// the message it sends back reconciles without a fork.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, test } from 'node:test';
import type { AlbedoClient } from '../../protocol/client.ts';
import { historyOf } from '../support/openai-file-read.ts';
import { openaiAnswer, startOpenAIUpstream, type OpenAIAnswer, type OpenAIRequest, type OpenAIUpstream, type OpenAIWire } from '../support/openai-upstream.ts';
import { startEach } from './harness.ts';

const start = startEach();
const upstreams: OpenAIUpstream[] = [];
after(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
});

const FACT = 'the deploy key is ZEBRA-4242';

function post(url: string, body: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-mem-openai', 'session-id': 'mem-1' } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** The grep's outputs in the request: the texts of outputs answering a transcript_grep call. */
function grepOutputs(req: OpenAIRequest): string[] {
  const h = historyOf(req);
  const grepIds = new Set<string>();
  if (req.wire === 'chat') {
    for (const m of req.body.messages as Array<{ tool_calls?: Array<{ id: string; function: { name: string } }> }>) for (const c of m.tool_calls ?? []) if (c.function.name === 'transcript_grep') grepIds.add(c.id);
  } else {
    for (const it of req.body.input as Array<{ type?: string; name?: string; call_id?: string }>) if (it.type === 'function_call' && it.name === 'transcript_grep' && it.call_id !== undefined) grepIds.add(it.call_id);
  }
  return [...h.outputs].filter(([id]) => grepIds.has(id)).map(([, text]) => text);
}

function quoting(req: OpenAIRequest): OpenAIAnswer {
  const found = grepOutputs(req);
  if (found.length === 0) return { kind: 'message', text: 'let me look', calls: [{ name: 'transcript_grep', arguments: { pattern: 'ZEBRA' } }], usage: { input: 1000, output: 11 } };
  return { kind: 'message', text: `the key is ${/ZEBRA-\d+/.exec(found.join('\n'))?.[0] ?? 'nothing'}`, usage: { input: 1300, output: 7 } };
}

function history(wire: OpenAIWire): unknown[] {
  if (wire === 'chat') return [{ role: 'system', content: 'test agent' }, { role: 'user', content: `remember: ${FACT}` }, { role: 'assistant', content: 'noted' }, { role: 'user', content: 'what is the deploy key?' }];
  const msg = (role: string, text: string): unknown => ({ type: 'message', role, content: [{ type: role === 'assistant' ? 'output_text' : 'input_text', text }] });
  return [msg('developer', 'test agent'), msg('user', `remember: ${FACT}`), msg('assistant', 'noted'), msg('user', 'what is the deploy key?')];
}

function request(wire: OpenAIWire, input: unknown[], stream: boolean): Record<string, unknown> {
  if (wire === 'chat') return { model: 'gpt-5.5', messages: input, stream, tools: [{ type: 'function', function: { name: 'bash', parameters: { type: 'object' } } }] };
  return { model: 'gpt-5.5', input, stream, store: false, tools: [{ type: 'function', name: 'exec_command', parameters: { type: 'object' } }] };
}

interface Seen {
  texts: string[];
  usage: Record<string, number>;
  /** The message as the agent would send it back. */
  echo: unknown[];
}

/** What the agent got, read the way a client reads each wire, checking indexes as it goes. */
function read(wire: OpenAIWire, stream: boolean, text: string): Seen {
  if (!stream) {
    const body = JSON.parse(text) as Record<string, unknown>;
    if (wire === 'chat') {
      const choice = (body.choices as Array<{ message: { content: string | null } }>)[0]!;
      return { texts: [choice.message.content ?? ''], usage: body.usage as Record<string, number>, echo: [{ role: 'assistant', content: choice.message.content }] };
    }
    const output = body.output as Array<{ type: string; content?: Array<{ text: string }> }>;
    return { texts: output.flatMap((o) => (o.content ?? []).map((c) => c.text)), usage: body.usage as Record<string, number>, echo: output };
  }
  const datas = text
    .split('\n\n')
    .map((f) => /^data: (.*)$/m.exec(f)?.[1])
    .filter((d): d is string => d !== undefined);
  if (wire === 'chat') {
    assert.equal(datas.at(-1), '[DONE]');
    assert.equal(datas.filter((d) => d === '[DONE]').length, 1, 'one end');
    const chunks = datas.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as { id: string; choices: Array<{ delta: { content?: string; tool_calls?: unknown[] }; finish_reason: string | null }>; usage?: Record<string, number> });
    assert.equal(new Set(chunks.map((c) => c.id)).size, 1, 'one message id');
    assert.equal(chunks.filter((c) => c.choices.some((x) => x.finish_reason !== null)).length, 1, 'one finish chunk');
    const content = chunks.flatMap((c) => c.choices.map((x) => x.delta.content ?? '')).join('');
    assert.ok(!chunks.some((c) => c.choices.some((x) => (x.delta.tool_calls ?? []).length > 0)), 'no tool call reaches the agent');
    return { texts: [content], usage: chunks.find((c) => c.usage !== undefined)?.usage ?? {}, echo: [{ role: 'assistant', content }] };
  }
  const events = datas.map((d) =>
    JSON.parse(d) as { type: string; sequence_number: number; output_index?: number; item?: { type: string; content?: Array<{ text: string }> }; response?: { usage: Record<string, number>; output: unknown[] } }
  );
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i), 'sequence numbers consecutive');
  assert.equal(events.filter((e) => e.type === 'response.created').length, 1);
  assert.equal(events.filter((e) => e.type === 'response.completed').length, 1);
  const done = events.filter((e) => e.type === 'response.output_item.done');
  assert.deepEqual(done.map((e) => e.output_index), done.map((_, i) => i), 'output indexes consecutive');
  assert.ok(!done.some((e) => e.item?.type === 'function_call'), 'no memory call reaches the agent');
  const completed = events.find((e) => e.type === 'response.completed')!.response!;
  return { texts: done.flatMap((e) => (e.item?.content ?? []).map((c) => c.text)), usage: completed.usage, echo: done.map((e) => e.item) };
}

async function sessionCount(client: AlbedoClient): Promise<number> {
  return (await client.call('session.list', {})).sessions.length;
}

for (const wire of ['chat', 'responses'] as const) {
  for (const stream of [true, false]) {
    test(`${wire}, ${stream ? 'streamed' : 'not streamed'}: a memory-tool call is answered by the proxy, spliced into one message with the usage rule, and sent back without a fork`, async () => {
      const up = await startOpenAIUpstream({ script: quoting, chunkSize: 4 });
      upstreams.push(up);
      const daemon = await start({ env: { ALBEDO_OPENAI_UPSTREAM: up.baseUrl } });
      const client = await daemon.connect();
      const base = (await client.call('daemon.status', {})).proxy.openai_base_url!;
      const path = wire === 'chat' ? '/chat/completions' : '/responses';
      const r = await post(`${base}${path}`, request(wire, history(wire), stream));
      assert.equal(r.status, 200, r.text.slice(0, 300));
      const seen = read(wire, stream, r.text);
      assert.equal(seen.texts.join(''), 'let me lookthe key is ZEBRA-4242');
      assert.ok(!r.text.includes('transcript_grep'), 'the agent never sees the memory tool');
      const sent = up.of(wire, { conversation: true });
      assert.equal(sent.length, 2, 'one follow-up');
      assert.equal(sent[1]!.headers.authorization, 'Bearer sk-mem-openai');
      assert.match(grepOutputs(sent[1]!).join('\n'), /ZEBRA-4242/);
      if (wire === 'chat') {
        if (stream) assert.deepEqual(seen.usage, {}, 'no usage chunk for an agent that did not ask');
        else assert.deepEqual([seen.usage.prompt_tokens, seen.usage.completion_tokens], [1300, 18]);
      } else assert.deepEqual([seen.usage.input_tokens, seen.usage.output_tokens], [1300, 18]);
      assert.equal(await sessionCount(client), 1);
      // The agent sends back what it saw and asks on: no fork; upstream gets the stored rounds.
      const more = wire === 'chat' ? { role: 'user', content: 'thanks' } : { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'thanks' }] };
      await post(`${base}${path}`, request(wire, [...history(wire), ...seen.echo, more], stream));
      assert.equal(await sessionCount(client), 1, 'the spliced message reconciled');
      assert.ok(up.of(wire, { conversation: true })[2]!.rawBody.includes('transcript_grep'), 'the stored memory round goes upstream');
    });
  }
}

/** How many rounds of the proxy's tools the request's history holds (grep calls answered). */
function grepRounds(req: OpenAIRequest): number {
  return grepOutputs(req).length;
}

/** The names of the tools in a request, in order. */
function toolNames(req: OpenAIRequest): string[] {
  return (req.body.tools as Array<{ name?: string; function?: { name: string } }>).map((t) => t.name ?? t.function?.name ?? '?');
}

/** The client's own calls in what it received (streamed chunks or events, or a body). */
function clientCallNames(wire: OpenAIWire, text: string): string[] {
  if (wire === 'chat') return [...text.matchAll(/"function":\{"name":"([a-z_]+)"/g)].map((m) => m[1]!);
  const items: Array<{ type?: string; name?: string }> = text.startsWith('{')
    ? ((JSON.parse(text) as { output: Array<{ type?: string; name?: string }> }).output)
    : text
      .split('\n\n')
      .map((f) => /^data: (.*)$/m.exec(f)?.[1])
      .filter((d): d is string => d !== undefined)
      .map((d) => JSON.parse(d) as { type: string; item?: { type?: string; name?: string } })
      .filter((e) => e.type === 'response.output_item.done')
      .map((e) => e.item ?? {});
  return items.filter((i) => i.type === 'function_call').map((i) => i.name ?? '?');
}

for (const wire of ['chat', 'responses'] as const) {
  for (const stream of [true, false]) {
    const label = `${wire}, ${stream ? 'streamed' : 'not streamed'}`;
    const own = wire === 'chat' ? 'bash' : 'exec_command';
    const path = wire === 'chat' ? '/chat/completions' : '/responses';
    const proxy = async (script: (req: OpenAIRequest) => OpenAIAnswer, extensions?: unknown): Promise<{ up: OpenAIUpstream; base: string }> => {
      const up = await startOpenAIUpstream({ script, chunkSize: 4 });
      upstreams.push(up);
      const home = (await import('./harness.ts')).tempHome();
      if (extensions !== undefined) (await import('node:fs')).writeFileSync(`${home}/extensions.json`, JSON.stringify(extensions));
      const daemon = await start({ home, env: { ALBEDO_OPENAI_UPSTREAM: up.baseUrl } });
      const client = await daemon.connect();
      return { up, base: (await client.call('daemon.status', {})).proxy.openai_base_url! };
    };

    test(`${label}: two rounds, then a round beside the agent's own call ends the turn with only that call`, async () => {
      const { up, base } = await proxy((req) => {
        const n = grepRounds(req);
        if (n === 0) return { kind: 'message', calls: [{ name: 'transcript_grep', arguments: { pattern: 'deploy' } }] };
        if (n === 1) return { kind: 'message', calls: [{ name: 'transcript_grep', arguments: { pattern: 'ZEBRA' } }, { name: own, arguments: { cmd: 'echo hi', command: 'echo hi' } }] };
        return openaiAnswer.text('done');
      });
      const r = await post(`${base}${path}`, request(wire, history(wire), stream));
      assert.equal(r.status, 200, r.text.slice(0, 300));
      assert.deepEqual(clientCallNames(wire, r.text), [own], "only the agent's own call reaches it");
      assert.equal(up.of(wire, { conversation: true }).length, 2, "the turn ended at the round with the agent's call");
    });

    test(`${label}: the ninth round of memory calls is refused and its follow-up allows no tools`, async () => {
      const { up, base } = await proxy((req) => (req.body.tool_choice === 'none' ? openaiAnswer.text('giving up') : { kind: 'message', calls: [{ name: 'transcript_grep', arguments: { pattern: 'ZEBRA' } }] }));
      const r = await post(`${base}${path}`, request(wire, history(wire), stream));
      assert.equal(r.status, 200);
      assert.equal(read(wire, stream, r.text).texts.join(''), 'giving up');
      const sent = up.of(wire, { conversation: true });
      assert.equal(sent.length, 10, 'the answer and nine follow-ups');
      assert.equal(sent[9]!.body.tool_choice, 'none');
      assert.match(grepOutputs(sent[9]!).join('\n'), /at most 8 memory-tool rounds/);
    });

    test(`${label}: memoryTools off, or the tools offered as an MCP server's, adds none`, async () => {
      const off = await proxy(() => openaiAnswer.text('ok'), { proxy: { memoryTools: 'off' } });
      await post(`${off.base}${path}`, request(wire, history(wire), stream));
      assert.deepEqual(toolNames(off.up.of(wire, { conversation: true })[0]!), [own]);
      const mcp = await proxy(() => openaiAnswer.text('ok'));
      const body = request(wire, history(wire), stream);
      const mcpTool = wire === 'chat' ? { type: 'function', function: { name: 'mcp__albedo__transcript_grep', parameters: { type: 'object' } } } : { type: 'function', name: 'mcp__albedo__transcript_grep', parameters: { type: 'object' } };
      await post(`${mcp.base}${path}`, { ...body, tools: [...(body.tools as unknown[]), mcpTool] });
      assert.deepEqual(toolNames(mcp.up.of(wire, { conversation: true })[0]!), [own, 'mcp__albedo__transcript_grep']);
    });
  }
}
