// One Responses turn in which the proxy answers the model's memory-tool calls itself
// (memory-tools.ts): the rounds arrive one after another and the client gets one response. Its
// first round's `response.created`; every output item the client may see with its output_index
// renumbered to follow the items before it; the memory tools' function_call items and all their
// events held back; sequence numbers consecutive; one `response.completed` at the end with the
// visible items, the last round's input figures and the output tokens of all rounds. Not
// streamed: one response body built the same way.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { responseAnswer, ResponsesStreamTee } from './openai-responses-stream.ts';
import type { Item } from './openai-responses-wire.ts';
import type { MemoryCall, RoundOutcome, TurnSplicer } from './wire.ts';
import { isRecord } from '../../protocol/is-record.ts';

function isMemoryItem(item: unknown, isMemoryTool: (name: string) => boolean): boolean {
  return isRecord(item) && item.type === 'function_call' && typeof item.name === 'string' && isMemoryTool(item.name);
}

/** Items that call a tool the client runs (hosted tools such as web_search_call run at the provider). */
const CLIENT_CALLS = new Set(['function_call', 'custom_tool_call', 'local_shell_call', 'shell_call', 'apply_patch_call', 'computer_call']);

function callsOf(items: readonly Item[], isMemoryTool: (name: string) => boolean): { memoryCalls: MemoryCall[]; clientCalls: boolean } {
  const memoryCalls: MemoryCall[] = [];
  let clientCalls = false;
  for (const it of items) {
    if (isMemoryItem(it, isMemoryTool)) {
      let args: unknown = {};
      try {
        args = JSON.parse(String(it.arguments));
      } catch {
        args = {};
      }
      memoryCalls.push({ id: String(it.call_id), name: String(it.name), arguments: isRecord(args) ? args : {} });
    } else if (typeof it.type === 'string' && CLIENT_CALLS.has(it.type)) clientCalls = true;
  }
  return { memoryCalls, clientCalls };
}

type RawUsage = Record<string, unknown> & { input_tokens?: number; output_tokens?: number };

function finalUsage(last: RawUsage, output: number): RawUsage {
  const input = typeof last.input_tokens === 'number' ? last.input_tokens : 0;
  return { ...last, input_tokens: input, output_tokens: output, total_tokens: input + output };
}

class StreamedResponsesSplicer implements TurnSplicer<Item> {
  private tee = new ResponsesStreamTee();
  private parser = this.newParser();
  private out = '';
  private round = 0;
  private seq = 0;
  /** Client output_index of each upstream one of this round; null for a held-back memory call. */
  private indexes = new Map<number, number | null>();
  private nextIndex = 0;
  private readonly visible: Item[] = [];
  private response: Record<string, unknown> = {};
  private usage: RawUsage = {};
  private output = 0;
  private failed: string | null = null;

  constructor(private readonly isMemoryTool: (name: string) => boolean) {}

  get error(): string | null {
    return this.failed ?? this.tee.error;
  }

  private newParser(): ReturnType<typeof createParser> {
    return createParser({ onEvent: (e) => this.onEvent(e) });
  }

  /**
   * An event for the client, numbered next. `raw` is its data as the upstream wrote it: sent as
   * it came when nothing in it changes (its type and number already what the client is due).
   */
  private emit(type: string, data: Record<string, unknown>, raw?: string): void {
    if (raw !== undefined && data.type === type && data.sequence_number === this.seq) {
      this.seq++;
      this.out += `event: ${type}\ndata: ${raw}\n\n`;
      return;
    }
    this.out += `event: ${type}\ndata: ${JSON.stringify({ ...data, type, sequence_number: this.seq++ })}\n\n`;
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
    if (read === undefined) return;
    const { data, type } = read;
    switch (type) {
      case 'response.created':
      case 'response.in_progress':
        if (isRecord(data.response) && this.round === 0) this.response = data.response;
        if (this.round === 0) this.emit(type, data, e.data);
        return;
      case 'response.completed':
      case 'response.incomplete': {
        const r = isRecord(data.response) ? data.response : {};
        this.response = { ...this.response, ...r, id: this.response.id ?? r.id };
        if (isRecord(r.usage)) this.usage = r.usage;
        return;
      }
      case 'response.failed':
      case 'error':
        this.failed = `the upstream sent ${type}`;
        this.emit(type, data);
        return;
      default:
        break;
    }
    if (typeof data.output_index !== 'number') {
      this.emit(type, data, e.data);
      return;
    }
    let mapped = this.indexes.get(data.output_index);
    if (mapped === undefined) {
      mapped = isMemoryItem(data.item, this.isMemoryTool) ? null : this.nextIndex++;
      this.indexes.set(data.output_index, mapped);
    }
    if (mapped === null) return;
    if (type === 'response.output_item.done' && isRecord(data.item)) this.visible[mapped] = data.item;
    if (mapped === data.output_index) this.emit(type, data, e.data);
    else this.emit(type, { ...data, output_index: mapped });
  }

  endRound(): RoundOutcome<Item> | null {
    const answer = this.tee.finish();
    if (answer === null || this.failed !== null) return null;
    this.output += typeof this.usage.output_tokens === 'number' ? this.usage.output_tokens : 0;
    return { messages: answer.messages, usage: answer.usage, ...callsOf(answer.messages, this.isMemoryTool) };
  }

  nextRound(): void {
    this.round++;
    this.tee = new ResponsesStreamTee();
    this.parser = this.newParser();
    this.indexes = new Map();
  }

  finish(): { text: string; visible: Item[] } {
    const visible = this.visible.filter((i): i is Item => i !== undefined);
    this.emit('response.completed', { response: { ...this.response, status: 'completed', output: visible, usage: finalUsage(this.usage, this.output) } });
    const text = this.out;
    this.out = '';
    return { text, visible };
  }

  fail(message: string): string {
    this.emit('error', { code: 'server_error', message, param: null });
    const text = this.out;
    this.out = '';
    return text;
  }
}

class JsonResponsesSplicer implements TurnSplicer<Item> {
  private json = '';
  private first: Record<string, unknown> | null = null;
  private readonly items: Item[] = [];
  private last: Record<string, unknown> = {};
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

  endRound(): RoundOutcome<Item> | null {
    let raw: unknown;
    try {
      raw = JSON.parse(this.json);
    } catch (err) {
      this.failed = `the body is not JSON (${(err as Error).message})`;
      return null;
    }
    const answer = responseAnswer(raw);
    if (answer === null || !isRecord(raw)) {
      this.failed = 'the body is not a completed response';
      return null;
    }
    this.first ??= raw;
    this.last = raw;
    const usage = isRecord(raw.usage) ? (raw.usage as RawUsage) : {};
    this.output += typeof usage.output_tokens === 'number' ? usage.output_tokens : 0;
    this.items.push(...answer.messages.filter((i) => !isMemoryItem(i, this.isMemoryTool)));
    return { messages: answer.messages, usage: answer.usage, ...callsOf(answer.messages, this.isMemoryTool) };
  }

  nextRound(): void {
    this.json = '';
  }

  finish(): { text: string; visible: Item[] } {
    const usage = isRecord(this.last.usage) ? (this.last.usage as RawUsage) : {};
    const body = { ...(this.first ?? {}), status: this.last.status ?? 'completed', output: this.items, usage: finalUsage(usage, this.output) };
    return { text: JSON.stringify(body), visible: this.items };
  }

  fail(message: string): string {
    return JSON.stringify({ error: { message, type: 'server_error', code: null } });
  }
}

export function responsesSplicer(streamed: boolean, isMemoryTool: (name: string) => boolean): TurnSplicer<Item> {
  return streamed ? new StreamedResponsesSplicer(isMemoryTool) : new JsonResponsesSplicer(isMemoryTool);
}
