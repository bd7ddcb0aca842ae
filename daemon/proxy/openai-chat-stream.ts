// Builds the assistant turn from a Chat Completions answer while it streams to the client:
// `chat.completion.chunk` deltas (text, tool-call argument fragments by index, other fields such
// as a compatible server's reasoning_content) until `data: [DONE]`, or one JSON body. Also the
// filter that hides from the client the usage chunk the proxy asked for on its behalf.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { z } from 'zod';
import type { ChatMessage } from './openai-chat-wire.ts';
import type { Answer, AnswerReader, AnswerUsage, ClientFilter } from './wire.ts';
import { isRecord } from '../../protocol/is-record.ts';

const Usage = z.looseObject({
  prompt_tokens: z.number().int().nonnegative().optional(),
  completion_tokens: z.number().int().nonnegative().optional(),
  prompt_tokens_details: z.looseObject({ cached_tokens: z.number().int().nonnegative().nullish() }).nullish(),
});

function usageOf(u: unknown): AnswerUsage | null {
  const parsed = Usage.safeParse(u);
  if (!parsed.success || parsed.data.prompt_tokens === undefined) return null;
  return { inputTokens: parsed.data.prompt_tokens, cachedTokens: parsed.data.prompt_tokens_details?.cached_tokens ?? 0, outputTokens: parsed.data.completion_tokens ?? 0 };
}

const Completion = z.looseObject({ choices: z.array(z.looseObject({ message: z.looseObject({ role: z.string().optional() }) })).min(1), usage: z.unknown().optional() });

/** A non-streamed answer: its first choice's message. Null when it is not a chat completion. */
export function chatAnswerFromJson(body: unknown): Answer<ChatMessage> | null {
  const c = Completion.safeParse(body);
  if (!c.success) return null;
  const message = { ...c.data.choices[0]!.message, role: 'assistant' } as ChatMessage;
  return { messages: [message], usage: usageOf(c.data.usage) };
}

interface OpenCall {
  id: string;
  type: string;
  name: string;
  arguments: string;
}

/** Reads a Chat Completions event stream into the assistant message; see AnswerReader. */
export class ChatStreamTee {
  private content = '';
  private sawContent = false;
  private readonly calls: OpenCall[] = [];
  /** Other string delta fields (reasoning_content, refusal), concatenated. */
  private readonly extra = new Map<string, string>();
  private usage: AnswerUsage | null = null;
  private finished = false;
  private done = false;
  private failed: string | null = null;
  private readonly parser = createParser({ onEvent: (e) => this.onEvent(e) });

  feed(text: string): void {
    this.parser.feed(text);
  }

  get error(): string | null {
    return this.failed;
  }

  private onEvent(e: EventSourceMessage): void {
    this.data(e.data);
  }

  /**
   * One event's data as the SSE parser gave it, read into the message. Answers the chunk it
   * parsed, so that a caller reading the same stream (the splicer) need not parse it again;
   * undefined for `[DONE]` and for data that is not a JSON object.
   */
  data(raw: string): Record<string, unknown> | undefined {
    if (raw.trim() === '[DONE]') {
      this.done = true;
      return undefined;
    }
    let data: unknown;
    try {
      data = JSON.parse(raw);
    } catch {
      this.failed ??= 'a chunk that is not JSON';
      return undefined;
    }
    if (!isRecord(data)) return undefined;
    this.take(data);
    return data;
  }

  /** One parsed chunk read into the message. */
  take(data: Record<string, unknown>): void {
    if (this.failed !== null) return;
    if (data.error !== undefined) {
      this.failed = `the upstream sent an error: ${JSON.stringify(data.error).slice(0, 300)}`;
      return;
    }
    const u = usageOf(data.usage);
    if (u !== null) this.usage = u;
    const choice = Array.isArray(data.choices) ? (data.choices as unknown[]).find((c) => isRecord(c) && (c.index ?? 0) === 0) : undefined;
    if (!isRecord(choice)) return;
    if (typeof choice.finish_reason === 'string') this.finished = true;
    const delta = isRecord(choice.delta) ? choice.delta : {};
    for (const [k, v] of Object.entries(delta)) {
      if (k === 'role') continue;
      if (k === 'content') {
        if (typeof v === 'string') {
          this.content += v;
          this.sawContent = true;
        }
      } else if (k === 'tool_calls' && Array.isArray(v)) {
        for (const raw of v) {
          if (!isRecord(raw)) continue;
          const index = typeof raw.index === 'number' ? raw.index : this.calls.length;
          const fn = isRecord(raw.function) ? raw.function : {};
          const call = (this.calls[index] ??= { id: '', type: 'function', name: '', arguments: '' });
          if (typeof raw.id === 'string') call.id = raw.id;
          if (typeof raw.type === 'string') call.type = raw.type;
          if (typeof fn.name === 'string') call.name += fn.name;
          if (typeof fn.arguments === 'string') call.arguments += fn.arguments;
        }
      } else if (typeof v === 'string') this.extra.set(k, (this.extra.get(k) ?? '') + v);
    }
  }

  /** The assistant turn once the stream finished; null for one cut short or carrying an error. */
  finish(): Answer<ChatMessage> | null {
    if (this.failed !== null) return null;
    if (!this.finished && !this.done) {
      this.failed = 'the stream ended before a finish_reason';
      return null;
    }
    const calls = this.calls.filter((c) => c !== undefined);
    if (calls.some((c) => c.id === '' || c.name === '')) {
      this.failed = 'a streamed tool call without an id or a name';
      return null;
    }
    const message: ChatMessage = {
      role: 'assistant',
      content: this.sawContent ? this.content : null,
      ...(calls.length > 0 ? { tool_calls: calls.map((c) => ({ id: c.id, type: c.type, function: { name: c.name, arguments: c.arguments } })) } : {}),
      ...Object.fromEntries([...this.extra].filter(([, v]) => v !== '')),
    };
    return { messages: [message], usage: this.usage };
  }
}

export class ChatAnswerReader implements AnswerReader<ChatMessage> {
  private readonly tee = new ChatStreamTee();
  private json = '';
  private why: string | null = null;

  constructor(private readonly streamed: boolean) {}

  chunk(text: string): void {
    if (this.streamed) this.tee.feed(text);
    else this.json += text;
  }

  finish(): Answer<ChatMessage> | null {
    if (this.streamed) return this.tee.finish();
    try {
      const a = chatAnswerFromJson(JSON.parse(this.json));
      if (a === null) this.why = 'the body is not a chat completion';
      return a;
    } catch (err) {
      this.why = `the body is not JSON (${(err as Error).message})`;
      return null;
    }
  }

  get error(): string | null {
    return this.streamed ? this.tee.error : this.why;
  }
}

/**
 * Leaves out of the client's stream the usage-only chunk (empty `choices`, a `usage`) that the
 * proxy asked the upstream for; every other event goes through as it came, in order.
 */
export class UsageChunkFilter implements ClientFilter {
  private buffer = '';

  chunk(text: string): string {
    this.buffer += text.replace(/\r\n/g, '\n');
    let out = '';
    for (let end = this.buffer.indexOf('\n\n'); end !== -1; end = this.buffer.indexOf('\n\n')) {
      const event = this.buffer.slice(0, end + 2);
      this.buffer = this.buffer.slice(end + 2);
      if (!isUsageOnly(event)) out += event;
    }
    return out;
  }

  end(): string {
    const rest = this.buffer;
    this.buffer = '';
    return isUsageOnly(rest) ? '' : rest;
  }
}

function isUsageOnly(event: string): boolean {
  const data = event
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trimStart())
    .join('\n');
  if (data === '' || data === '[DONE]') return false;
  try {
    const v = JSON.parse(data) as unknown;
    return isRecord(v) && Array.isArray(v.choices) && v.choices.length === 0 && v.usage !== undefined && v.usage !== null;
  } catch {
    return false;
  }
}
