// Builds the assistant turn from an Anthropic Messages answer while it streams to the client:
// server-sent events fed in as they arrive (decoded bytes), or one JSON body. The tee never
// changes what the client receives; it only reads a copy. What is stored is reconcile.ts's.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { z } from 'zod';
import type { WireBlock, WireMessage } from './anthropic-wire.ts';
import type { AnswerUsage } from './wire.ts';

/** One Messages answer: its assistant message and usage (input counts every cache part, cached = read). */
export interface MessagesAnswer {
  message: WireMessage;
  usage: AnswerUsage | null;
  stopReason: string | null;
}

const Usage = z.looseObject({
  input_tokens: z.number().int().nonnegative().optional(),
  cache_read_input_tokens: z.number().int().nonnegative().nullish(),
  cache_creation_input_tokens: z.number().int().nonnegative().nullish(),
  output_tokens: z.number().int().nonnegative().optional(),
});
type Usage = z.infer<typeof Usage>;

const ContentBlock = z.looseObject({ type: z.string() });

const Message = z.looseObject({
  role: z.literal('assistant').optional(),
  content: z.array(z.looseObject({ type: z.string() })).default([]),
  stop_reason: z.string().nullish(),
  usage: Usage.optional(),
});

function usageOf(start: Usage | undefined, end: Usage | undefined): AnswerUsage | null {
  if (start === undefined && end === undefined) return null;
  // message_delta's usage repeats or updates message_start's; the later figure wins.
  const pick = (k: keyof Usage): number => (end?.[k] ?? start?.[k] ?? 0) as number;
  return {
    inputTokens: pick('input_tokens') + pick('cache_read_input_tokens') + pick('cache_creation_input_tokens'),
    cachedTokens: pick('cache_read_input_tokens'),
    outputTokens: pick('output_tokens'),
  };
}

/** A non-streamed answer's body. Null when it is not a Messages result. */
export function answerFromJson(body: unknown): MessagesAnswer | null {
  const m = Message.safeParse(body);
  if (!m.success) return null;
  return { message: { role: 'assistant', content: m.data.content }, usage: usageOf(m.data.usage, undefined), stopReason: m.data.stop_reason ?? null };
}

interface OpenBlock {
  block: WireBlock;
  /** input_json_delta pieces of a tool_use block, parsed at its stop. */
  json: string;
}

/**
 * Reads a Messages event stream. `feed` takes decoded text as it comes; `finish` answers the
 * assistant turn once `message_stop` was seen, or null for a stream that ended early, carried
 * an `error` event, or was not a Messages stream: such a turn is never recorded.
 */
export class AnthropicStreamTee {
  private readonly blocks: Array<OpenBlock | undefined> = [];
  private startUsage: Usage | undefined;
  private endUsage: Usage | undefined;
  private stopReason: string | null = null;
  private stopped = false;
  private failed: string | null = null;
  private readonly parser = createParser({ onEvent: (e) => this.onEvent(e) });

  feed(text: string): void {
    this.parser.feed(text);
  }

  /** Why the stream will not be recorded, once known. */
  get error(): string | null {
    return this.failed;
  }

  private onEvent(e: EventSourceMessage): void {
    this.event(e);
  }

  /**
   * One event read into the message. Answers its parsed data and type, so that a caller reading
   * the same stream (the splicer) need not parse it again; undefined for data that is not a
   * JSON object.
   */
  event(e: EventSourceMessage): { data: Record<string, unknown>; type: string } | undefined {
    let data: unknown;
    try {
      data = JSON.parse(e.data);
    } catch {
      if (e.event !== 'ping') this.failed ??= `an event that is not JSON (${e.event ?? 'message'})`;
      return undefined;
    }
    if (typeof data !== 'object' || data === null || Array.isArray(data)) return undefined;
    const ev = data as Record<string, unknown>;
    const type = typeof ev.type === 'string' ? ev.type : (e.event ?? '');
    this.take(ev, type);
    return { data: ev, type };
  }

  /** One parsed event read into the message. */
  take(ev: Record<string, unknown>, type: string): void {
    if (this.failed !== null) return;
    switch (type) {
      case 'message_start': {
        const m = Message.safeParse(ev.message);
        if (m.success) this.startUsage = m.data.usage;
        break;
      }
      case 'content_block_start': {
        const index = typeof ev.index === 'number' ? ev.index : this.blocks.length;
        const block = ContentBlock.safeParse(ev.content_block);
        if (block.success) this.blocks[index] = { block: { ...block.data }, json: '' };
        break;
      }
      case 'content_block_delta': {
        const open = typeof ev.index === 'number' ? this.blocks[ev.index] : undefined;
        const delta = ev.delta as Record<string, unknown> | undefined;
        if (open === undefined || delta === undefined) break;
        const b = open.block;
        if (delta.type === 'text_delta' && typeof delta.text === 'string') b.text = `${typeof b.text === 'string' ? b.text : ''}${delta.text}`;
        else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') open.json += delta.partial_json;
        else if (delta.type === 'thinking_delta' && typeof delta.thinking === 'string') b.thinking = `${typeof b.thinking === 'string' ? b.thinking : ''}${delta.thinking}`;
        else if (delta.type === 'signature_delta' && typeof delta.signature === 'string') b.signature = `${typeof b.signature === 'string' ? b.signature : ''}${delta.signature}`;
        else if (delta.type === 'citations_delta' && delta.citation !== undefined) b.citations = [...(Array.isArray(b.citations) ? (b.citations as unknown[]) : []), delta.citation];
        break;
      }
      case 'content_block_stop': {
        const open = typeof ev.index === 'number' ? this.blocks[ev.index] : undefined;
        if (open !== undefined && open.json !== '') {
          try {
            open.block.input = JSON.parse(open.json) as unknown;
          } catch {
            this.failed = 'a tool call whose streamed input is not JSON';
          }
        }
        break;
      }
      case 'message_delta': {
        const delta = ev.delta as Record<string, unknown> | undefined;
        if (typeof delta?.stop_reason === 'string') this.stopReason = delta.stop_reason;
        const u = Usage.safeParse(ev.usage);
        if (u.success) this.endUsage = { ...this.endUsage, ...u.data };
        break;
      }
      case 'message_stop':
        this.stopped = true;
        break;
      case 'error':
        this.failed = `the upstream sent an error event: ${JSON.stringify(ev.error ?? ev).slice(0, 300)}`;
        break;
      default:
        break;
    }
  }

  finish(): MessagesAnswer | null {
    if (this.failed !== null) return null;
    if (!this.stopped) {
      this.failed = 'the stream ended before message_stop';
      return null;
    }
    const content = this.blocks.filter((b): b is OpenBlock => b !== undefined).map((b) => b.block);
    return { message: { role: 'assistant', content }, usage: usageOf(this.startUsage, this.endUsage), stopReason: this.stopReason };
  }
}
