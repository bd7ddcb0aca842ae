// An agent's conversation as the proxy section sends it, in each wire's own request shape:
// a history of about the wanted size made from the corpus's real turns (user prompts,
// assistant turns with tool calls, tool results), then, request after request, the upstream's
// short answer sent back the way an agent sends it and one new user message. Every body is
// the whole history, as agents send it.
import type { ToolSpec } from '../../protocol/prepared.ts';
import type { Corpus, TemplateRow } from './corpus.ts';
import { agentPrompt } from './prepare.ts';
import { SHORT_ANSWER } from './proxy-peers.ts';

export const PROXY_WIRES = ['anthropic', 'chat', 'responses'] as const;
export type ProxyWire = (typeof PROXY_WIRES)[number];

type Json = Record<string, unknown>;

/** What the wire's request needs besides its history. */
interface Shape {
  /** The history items one corpus row becomes, in order (a tool result may join the message before it). */
  push(items: Json[], row: TemplateRow, tag: string): void;
  /** The upstream's short answer as the agent sends it back. */
  answer(): Json;
  user(text: string): Json;
  body(items: readonly Json[], prompt: { instructions: string; tools: ToolSpec[] }, model: string): Json;
  /** The path under the wire's base URL (the proxy's and the upstream's alike). */
  path: string;
  headers: Record<string, string>;
}

const callId = (tag: string, ref: number): string => `call_${tag}_${ref}`;

const anthropic: Shape = {
  path: '/v1/messages',
  headers: { 'x-api-key': 'sk-ant-bench', 'anthropic-version': '2023-06-01' },
  push(items, row, tag) {
    const last = items[items.length - 1];
    if (row.kind === 'assistant') {
      const content = row.parts.flatMap((p): Json[] => p.type === 'text' ? [{ type: 'text', text: p.text }] : p.type === 'call' ? [{ type: 'tool_use', id: callId(tag, p.ref), name: p.name, input: p.args }] : []);
      if (content.length === 0) return;
      if (last?.role === 'assistant') (last.content as Json[]).push(...content);
      else items.push({ role: 'assistant', content });
      return;
    }
    const block: Json = row.kind === 'user' ? { type: 'text', text: row.text } : { type: 'tool_result', tool_use_id: callId(tag, row.ref), content: row.text, ...(row.isError ? { is_error: true } : {}) };
    if (last?.role === 'user') (last.content as Json[]).push(block);
    else items.push({ role: 'user', content: [block] });
  },
  answer: () => ({ role: 'assistant', content: [{ type: 'text', text: SHORT_ANSWER }] }),
  user: (text) => ({ role: 'user', content: [{ type: 'text', text }] }),
  body: (items, p, model) => ({
    model,
    max_tokens: 8192,
    stream: true,
    system: [{ type: 'text', text: p.instructions, cache_control: { type: 'ephemeral' } }],
    tools: p.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.input_schema })),
    messages: items,
  }),
};

const chat: Shape = {
  path: '/chat/completions',
  headers: { authorization: 'Bearer sk-bench' },
  push(items, row, tag) {
    if (row.kind === 'user') items.push({ role: 'user', content: row.text });
    else if (row.kind === 'tool_result') items.push({ role: 'tool', tool_call_id: callId(tag, row.ref), content: row.text });
    else {
      const text = row.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n');
      const calls = row.parts.flatMap((p) => (p.type === 'call' ? [{ id: callId(tag, p.ref), type: 'function', function: { name: p.name, arguments: JSON.stringify(p.args) } }] : []));
      if (text === '' && calls.length === 0) return;
      items.push({ role: 'assistant', content: text === '' ? null : text, ...(calls.length > 0 ? { tool_calls: calls } : {}) });
    }
  },
  answer: () => ({ role: 'assistant', content: SHORT_ANSWER }),
  user: (text) => ({ role: 'user', content: text }),
  body: (items, p, model) => ({
    model,
    stream: true,
    stream_options: { include_usage: true },
    max_completion_tokens: 8192,
    tools: p.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } })),
    messages: [{ role: 'system', content: p.instructions }, ...items],
  }),
};

const responses: Shape = {
  path: '/responses',
  headers: { authorization: 'Bearer sk-bench' },
  push(items, row, tag) {
    if (row.kind === 'user') items.push({ type: 'message', role: 'user', content: [{ type: 'input_text', text: row.text }] });
    else if (row.kind === 'tool_result') items.push({ type: 'function_call_output', call_id: callId(tag, row.ref), output: row.text });
    else {
      for (const p of row.parts) {
        if (p.type === 'text') items.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: p.text }] });
        else if (p.type === 'call') items.push({ type: 'function_call', call_id: callId(tag, p.ref), name: p.name, arguments: JSON.stringify(p.args) });
      }
    }
  },
  answer: () => ({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: SHORT_ANSWER }] }),
  user: (text) => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text }] }),
  body: (items, p, model) => ({
    model,
    instructions: p.instructions,
    input: items,
    tools: p.tools.map((t) => ({ type: 'function', name: t.name, description: t.description, parameters: t.input_schema, strict: false })),
    tool_choice: 'auto',
    parallel_tool_calls: false,
    stream: true,
    store: false,
  }),
};

const SHAPES: Record<ProxyWire, Shape> = { anthropic, chat, responses };

/** The model each wire's conversation names: known to the catalog, with a window well above the history. */
const WIRE_MODEL: Record<ProxyWire, string> = { anthropic: 'claude-sonnet-4-5', chat: 'gpt-5', responses: 'gpt-5' };

export class WireConversation {
  private readonly shape: Shape;
  private readonly items: Json[] = [];
  private readonly prompt = agentPrompt();
  private step = 0;
  /** The body the last `next()` gave. */
  last: Buffer = Buffer.alloc(0);

  /**
   * A history of about `historyChars` characters of the corpus's text (a tool call and its
   * result are never split), opening with a prompt that names `tag`, so that each tag is a
   * conversation of its own.
   */
  constructor(
    readonly wire: ProxyWire,
    corpus: Corpus,
    historyChars: number,
    readonly tag: string,
  ) {
    this.shape = SHAPES[wire];
    this.shape.push(this.items, { kind: 'user', text: `[bench conversation ${tag}] Work through the repository as before.` }, tag);
    let chars = 0;
    for (let i = 0;; i++) {
      const row = corpus.rows[i % corpus.rows.length]!;
      // Stop before a prompt, once there is enough: every call before it has its result.
      if (row.kind === 'user' && chars >= historyChars) break;
      // A call's ref is unique within one pass over the corpus.
      this.shape.push(this.items, row, `${tag}_${Math.floor(i / corpus.rows.length)}`);
      chars += row.kind === 'assistant' ? row.parts.reduce((n, p) => n + (p.type === 'call' ? JSON.stringify(p.args).length : p.text.length), 0) : row.text.length;
    }
    this.items.push(this.shape.user('Go on with the next step.'));
  }

  get path(): string {
    return this.shape.path;
  }

  get headers(): Record<string, string> {
    return this.shape.headers;
  }

  get model(): string {
    return WIRE_MODEL[this.wire];
  }

  /** The current request's body (the whole history); also kept in `last`. */
  body(): Buffer {
    this.last = Buffer.from(JSON.stringify(this.shape.body(this.items, this.prompt, this.model)));
    return this.last;
  }

  /** The upstream's short answer sent back and one more user message: the next request's history. */
  advance(): void {
    this.items.push(this.shape.answer(), this.shape.user(`Step ${++this.step}: go on.`));
  }
}
