// One Messages turn in which the proxy answers the model's memory-tool calls itself: the rounds'
// answers arrive one after another from the upstream, and the client gets them as one message.
// Streamed: one message_start (the first round's), every block the client may see with its index
// renumbered to follow the blocks before it, the memory-tool blocks held back, and one
// message_delta + message_stop at the end with the last round's stop reason and input figures
// and the output tokens of all rounds. Not streamed: one body built the same way. Each round's
// own answer (its signed thinking with it) is read apart, for the transcript.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { z } from 'zod';
import { AnthropicStreamTee, answerFromJson } from './anthropic-stream.ts';
import type { WireBlock, WireMessage } from './anthropic-wire.ts';
import type { MemoryCall, RoundOutcome, TurnSplicer } from './wire.ts';
import { isRecord } from '../../protocol/is-record.ts';

const RawUsage = z.looseObject({
  input_tokens: z.number().int().nonnegative().optional(),
  cache_read_input_tokens: z.number().int().nonnegative().nullish(),
  cache_creation_input_tokens: z.number().int().nonnegative().nullish(),
  output_tokens: z.number().int().nonnegative().optional(),
});
type RawUsage = z.infer<typeof RawUsage>;

const Body = z.looseObject({ content: z.array(z.looseObject({ type: z.string() })), usage: RawUsage.optional(), stop_reason: z.string().nullish(), stop_sequence: z.string().nullish() });

function sse(type: string, data: unknown): string {
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** The round's calls of the proxy's tools, and whether it also called the client's. */
function callsOf(content: readonly WireBlock[], isMemoryTool: (name: string) => boolean): { memoryCalls: MemoryCall[]; clientCalls: boolean } {
  const memoryCalls: MemoryCall[] = [];
  let clientCalls = false;
  for (const b of content) {
    if (b.type !== 'tool_use' || typeof b.name !== 'string' || typeof b.id !== 'string') continue;
    if (isMemoryTool(b.name)) memoryCalls.push({ id: b.id, name: b.name, arguments: isRecord(b.input) ? b.input : {} });
    else clientCalls = true;
  }
  return { memoryCalls, clientCalls };
}

/** Figures the client sees at the end: the last round's input and cache, output over all rounds. */
function finalUsage(last: RawUsage, output: number): Record<string, number> {
  const out: Record<string, number> = { input_tokens: last.input_tokens ?? 0, output_tokens: output };
  if (typeof last.cache_read_input_tokens === 'number') out.cache_read_input_tokens = last.cache_read_input_tokens;
  if (typeof last.cache_creation_input_tokens === 'number') out.cache_creation_input_tokens = last.cache_creation_input_tokens;
  return out;
}

class StreamedSplicer implements TurnSplicer<WireMessage> {
  private round = 0;
  private tee = new AnthropicStreamTee();
  /** What the client was sent, read back: the message it will send with its next request. */
  private readonly visible = new AnthropicStreamTee();
  private parser = this.newParser();
  private out = '';
  /** Client index of each upstream block index of this round; null for a held-back block. */
  private indexes = new Map<number, number | null>();
  private nextIndex = 0;
  private usage: RawUsage = {};
  private output = 0;
  private stop: { stop_reason: string | null; stop_sequence: string | null } = { stop_reason: null, stop_sequence: null };
  private failed: string | null = null;

  constructor(private readonly isMemoryTool: (name: string) => boolean) {}

  get error(): string | null {
    return this.failed ?? this.tee.error;
  }

  private newParser(): ReturnType<typeof createParser> {
    return createParser({ onEvent: (e) => this.onEvent(e) });
  }

  /**
   * An event for the client, also read into what it was sent. `raw` is its data as the upstream
   * wrote it: sent as it came when the event is unchanged and names its own type.
   */
  private emit(type: string, data: Record<string, unknown>, raw?: string): void {
    this.out += raw !== undefined && data.type === type ? `event: ${type}\ndata: ${raw}\n\n` : sse(type, data);
    this.visible.take(data, type);
  }

  chunk(text: string): string {
    this.parser.feed(text);
    const out = this.out;
    this.out = '';
    return out;
  }

  private onEvent(e: EventSourceMessage): void {
    // Parsed once: the round's reader takes it and hands it on.
    const read = this.tee.event(e);
    if (read === undefined) {
      // A ping or anything else that is not a JSON object reaches the client as it came.
      this.out += `${e.event === undefined ? '' : `event: ${e.event}\n`}data: ${e.data}\n\n`;
      this.visible.event(e);
      return;
    }
    const { data, type } = read;
    switch (type) {
      case 'message_start': {
        const u = isRecord(data.message) ? RawUsage.safeParse(data.message.usage) : undefined;
        if (u?.success === true) this.usage = { ...u.data };
        if (this.round === 0) this.emit(type, data, e.data);
        return;
      }
      case 'content_block_start': {
        const index = typeof data.index === 'number' ? data.index : -1;
        const block = isRecord(data.content_block) ? data.content_block : {};
        const held = block.type === 'tool_use' && typeof block.name === 'string' && this.isMemoryTool(block.name);
        const mapped = held ? null : this.nextIndex++;
        this.indexes.set(index, mapped);
        if (mapped === index) this.emit(type, data, e.data);
        else if (mapped !== null) this.emit(type, { ...data, index: mapped });
        return;
      }
      case 'content_block_delta':
      case 'content_block_stop': {
        const mapped = typeof data.index === 'number' ? this.indexes.get(data.index) : undefined;
        if (mapped === null) return;
        if (mapped === undefined || mapped === data.index) this.emit(type, data, e.data);
        else this.emit(type, { ...data, index: mapped });
        return;
      }
      case 'message_delta': {
        const delta = isRecord(data.delta) ? data.delta : {};
        this.stop = { stop_reason: typeof delta.stop_reason === 'string' ? delta.stop_reason : null, stop_sequence: typeof delta.stop_sequence === 'string' ? delta.stop_sequence : null };
        const u = RawUsage.safeParse(data.usage);
        if (u.success) this.usage = { ...this.usage, ...u.data };
        return;
      }
      case 'message_stop':
        return;
      case 'error':
        this.failed = `the upstream sent an error event: ${JSON.stringify(data.error ?? data).slice(0, 300)}`;
        this.emit(type, data);
        return;
      default:
        this.emit(type, data, e.data);
    }
  }

  endRound(): RoundOutcome<WireMessage> | null {
    const answer = this.tee.finish();
    if (answer === null || this.failed !== null) return null;
    this.output += this.usage.output_tokens ?? 0;
    const content = typeof answer.message.content === 'string' ? [] : answer.message.content;
    return { messages: [answer.message], usage: answer.usage, ...callsOf(content, this.isMemoryTool) };
  }

  nextRound(): void {
    this.round++;
    this.tee = new AnthropicStreamTee();
    this.parser = this.newParser();
    this.indexes = new Map();
    this.usage = {};
  }

  finish(): { text: string; visible: WireMessage[] } {
    this.emit('message_delta', { type: 'message_delta', delta: this.stop, usage: finalUsage(this.usage, this.output) });
    this.emit('message_stop', { type: 'message_stop' });
    const text = this.out;
    this.out = '';
    const seen = this.visible.finish();
    return { text, visible: seen === null ? [] : [seen.message] };
  }

  fail(message: string): string {
    return sse('error', { type: 'error', error: { type: 'api_error', message } });
  }
}

class JsonSplicer implements TurnSplicer<WireMessage> {
  private json = '';
  private first: Record<string, unknown> | null = null;
  private readonly content: WireBlock[] = [];
  private last: z.infer<typeof Body> | null = null;
  private output = 0;
  private failed: string | null = null;

  constructor(private readonly isMemoryTool: (name: string) => boolean) {}

  get error(): string | null {
    return this.failed;
  }

  chunk(text: string): string {
    this.json += text;
    return '';
  }

  endRound(): RoundOutcome<WireMessage> | null {
    let raw: unknown;
    try {
      raw = JSON.parse(this.json);
    } catch (err) {
      this.failed = `the body is not JSON (${(err as Error).message})`;
      return null;
    }
    const body = Body.safeParse(raw);
    const answer = answerFromJson(raw);
    if (!body.success || answer === null || !isRecord(raw)) {
      this.failed = 'the body is not a Messages result';
      return null;
    }
    this.first ??= raw;
    this.last = body.data;
    this.output += body.data.usage?.output_tokens ?? 0;
    const calls = callsOf(body.data.content, this.isMemoryTool);
    this.content.push(...body.data.content.filter((b) => !(b.type === 'tool_use' && typeof b.name === 'string' && this.isMemoryTool(b.name))));
    return { messages: [answer.message], usage: answer.usage, ...calls };
  }

  nextRound(): void {
    this.json = '';
  }

  finish(): { text: string; visible: WireMessage[] } {
    const last = this.last;
    const usage = finalUsage(last?.usage ?? {}, this.output);
    const body = { ...(this.first ?? {}), content: this.content, stop_reason: last?.stop_reason ?? null, stop_sequence: last?.stop_sequence ?? null, usage: { ...(isRecord(this.first?.usage) ? this.first.usage : {}), ...usage } };
    return { text: JSON.stringify(body), visible: [{ role: 'assistant', content: this.content }] };
  }

  fail(message: string): string {
    return JSON.stringify({ type: 'error', error: { type: 'api_error', message } });
  }
}

export function messagesSplicer(streamed: boolean, isMemoryTool: (name: string) => boolean): TurnSplicer<WireMessage> {
  return streamed ? new StreamedSplicer(isMemoryTool) : new JsonSplicer(isMemoryTool);
}
