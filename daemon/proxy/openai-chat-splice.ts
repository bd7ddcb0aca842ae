// One Chat Completions turn in which the proxy answers the model's memory-tool calls itself
// (memory-tools.ts): the rounds arrive one after another and the client gets one stream of
// chunks. Content deltas pass as they come; the memory tools' tool_calls are held back and the
// client's own get consecutive indexes across rounds; every chunk carries the first round's id;
// one finish chunk at the end with the last round's finish_reason, then (when the agent asked)
// one usage chunk with the last round's prompt figures and the completion tokens of all rounds.
// Not streamed: one completion built the same way.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { ChatStreamTee, chatAnswerFromJson } from './openai-chat-stream.ts';
import type { ChatMessage } from './openai-chat-wire.ts';
import type { MemoryCall, RoundOutcome, TurnSplicer } from './wire.ts';
import { isRecord } from '../../protocol/is-record.ts';

function argumentsOf(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text) as unknown;
    return isRecord(v) ? v : {};
  } catch {
    return {};
  }
}

function callsOf(message: ChatMessage, isMemoryTool: (name: string) => boolean): { memoryCalls: MemoryCall[]; clientCalls: boolean } {
  const memoryCalls: MemoryCall[] = [];
  let clientCalls = false;
  for (const c of message.tool_calls ?? []) {
    if (isMemoryTool(c.function.name)) memoryCalls.push({ id: c.id, name: c.function.name, arguments: argumentsOf(c.function.arguments) });
    else clientCalls = true;
  }
  return { memoryCalls, clientCalls };
}

interface RawUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: unknown;
}

function finalUsage(last: RawUsage, completion: number): Record<string, unknown> {
  const prompt = last.prompt_tokens ?? 0;
  return { ...last, prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

class StreamedChatSplicer implements TurnSplicer<ChatMessage> {
  private tee = new ChatStreamTee();
  private readonly visible = new ChatStreamTee();
  private parser = this.newParser();
  private out = '';
  private round = 0;
  /** Client index of each upstream tool_call index of this round; null for a held-back memory call. */
  private indexes = new Map<number, number | null>();
  private nextIndex = 0;
  private id: unknown = undefined;
  private model: unknown = undefined;
  private finishReason: string | null = null;
  private usage: RawUsage = {};
  private completion = 0;
  private failed: string | null = null;

  constructor(
    private readonly isMemoryTool: (name: string) => boolean,
    private readonly wantsUsage: boolean,
  ) {}

  get error(): string | null {
    return this.failed ?? this.tee.error;
  }

  private newParser(): ReturnType<typeof createParser> {
    return createParser({ onEvent: (e) => this.onEvent(e) });
  }

  /** A chunk for the client; `raw` is its data as the upstream wrote it, when unchanged. */
  private emit(data: Record<string, unknown>, raw?: string): void {
    this.out += `data: ${raw ?? JSON.stringify(data)}\n\n`;
    this.visible.take(data);
  }

  chunk(text: string): string {
    this.parser.feed(text);
    const out = this.out;
    this.out = '';
    return out;
  }

  private onEvent(e: EventSourceMessage): void {
    // Parsed once: the round's reader takes it and hands it on.
    const data = this.tee.data(e.data);
    if (data === undefined) return;
    if (data.error !== undefined) {
      this.failed = `the upstream sent an error: ${JSON.stringify(data.error).slice(0, 300)}`;
      this.emit(data);
      return;
    }
    this.id ??= data.id;
    this.model ??= data.model;
    if (isRecord(data.usage)) this.usage = data.usage;
    const choices = Array.isArray(data.choices) ? (data.choices as unknown[]) : [];
    const choice = choices.find((c) => isRecord(c) && (c.index ?? 0) === 0);
    if (!isRecord(choice)) return;
    if (typeof choice.finish_reason === 'string') this.finishReason = choice.finish_reason;
    const delta: Record<string, unknown> = isRecord(choice.delta) ? { ...choice.delta } : {};
    if (this.round > 0) {
      // A later round's opening chunk (its role, an empty content) is not news to the client.
      delete delta.role;
      if (delta.content === '') delete delta.content;
    }
    if (Array.isArray(delta.tool_calls)) {
      const kept: unknown[] = [];
      for (const raw of delta.tool_calls as unknown[]) {
        if (!isRecord(raw) || typeof raw.index !== 'number') continue;
        let mapped = this.indexes.get(raw.index);
        if (mapped === undefined) {
          const fn = isRecord(raw.function) ? raw.function : {};
          mapped = typeof fn.name === 'string' && this.isMemoryTool(fn.name) ? null : this.nextIndex++;
          this.indexes.set(raw.index, mapped);
        }
        if (mapped !== null) kept.push({ ...raw, index: mapped });
      }
      if (kept.length > 0) delta.tool_calls = kept;
      else delete delta.tool_calls;
    }
    if (Object.keys(delta).length === 0) return;
    // Most chunks of a first round reach the client as they came (text deltas): no rewrite.
    const asCame = this.round === 0 && choices.length === 1 && choice.finish_reason == null && data.id === this.id && !Array.isArray(delta.tool_calls);
    if (asCame) this.emit(data, e.data);
    else this.emit({ ...data, id: this.id, choices: [{ ...choice, delta, finish_reason: null }] });
  }

  endRound(): RoundOutcome<ChatMessage> | null {
    const answer = this.tee.finish();
    if (answer === null || this.failed !== null) return null;
    this.completion += this.usage.completion_tokens ?? 0;
    const message = answer.messages[0]!;
    return { messages: [message], usage: answer.usage, ...callsOf(message, this.isMemoryTool) };
  }

  nextRound(): void {
    this.round++;
    this.tee = new ChatStreamTee();
    this.parser = this.newParser();
    this.indexes = new Map();
    this.usage = {};
  }

  finish(): { text: string; visible: ChatMessage[] } {
    const base = { id: this.id, object: 'chat.completion.chunk', model: this.model };
    this.emit({ ...base, choices: [{ index: 0, delta: {}, finish_reason: this.finishReason ?? 'stop' }] });
    if (this.wantsUsage) this.emit({ ...base, choices: [], usage: finalUsage(this.usage, this.completion) });
    this.out += 'data: [DONE]\n\n';
    const text = this.out;
    this.out = '';
    const seen = this.visible.finish();
    return { text, visible: seen === null ? [] : seen.messages };
  }

  fail(message: string): string {
    return `data: ${JSON.stringify({ error: { message, type: 'server_error', code: null } })}\n\n`;
  }
}

class JsonChatSplicer implements TurnSplicer<ChatMessage> {
  private json = '';
  private first: Record<string, unknown> | null = null;
  private texts: string[] = [];
  private calls: NonNullable<ChatMessage['tool_calls']> = [];
  private finishReason: unknown = 'stop';
  private usage: RawUsage = {};
  private completion = 0;
  private failed: string | null = null;

  constructor(private readonly isMemoryTool: (name: string) => boolean) {}

  get error(): string | null {
    return this.failed;
  }

  chunk(text: string): string {
    this.json += text;
    return '';
  }

  endRound(): RoundOutcome<ChatMessage> | null {
    let raw: unknown;
    try {
      raw = JSON.parse(this.json);
    } catch (err) {
      this.failed = `the body is not JSON (${(err as Error).message})`;
      return null;
    }
    const answer = chatAnswerFromJson(raw);
    if (answer === null || !isRecord(raw)) {
      this.failed = 'the body is not a chat completion';
      return null;
    }
    this.first ??= raw;
    const message = answer.messages[0]!;
    const choice = (raw.choices as Array<Record<string, unknown>>)[0]!;
    this.finishReason = choice.finish_reason;
    if (isRecord(raw.usage)) this.usage = raw.usage;
    this.completion += this.usage.completion_tokens ?? 0;
    if (typeof message.content === 'string' && message.content !== '') this.texts.push(message.content);
    this.calls.push(...(message.tool_calls ?? []).filter((c) => !this.isMemoryTool(c.function.name)));
    return { messages: [message], usage: answer.usage, ...callsOf(message, this.isMemoryTool) };
  }

  nextRound(): void {
    this.json = '';
  }

  finish(): { text: string; visible: ChatMessage[] } {
    const message: ChatMessage = { role: 'assistant', content: this.texts.length === 0 ? null : this.texts.join(''), ...(this.calls.length > 0 ? { tool_calls: this.calls } : {}) };
    const firstChoice = isRecord(this.first) && Array.isArray(this.first.choices) && isRecord(this.first.choices[0]) ? this.first.choices[0] : {};
    const body = { ...(this.first ?? {}), choices: [{ ...firstChoice, index: 0, message, finish_reason: this.finishReason }], usage: finalUsage(this.usage, this.completion) };
    return { text: JSON.stringify(body), visible: [message] };
  }

  fail(message: string): string {
    return JSON.stringify({ error: { message, type: 'server_error', code: null } });
  }
}

export function chatSplicer(streamed: boolean, wantsUsage: boolean, isMemoryTool: (name: string) => boolean): TurnSplicer<ChatMessage> {
  return streamed ? new StreamedChatSplicer(isMemoryTool, wantsUsage) : new JsonChatSplicer(isMemoryTool);
}
