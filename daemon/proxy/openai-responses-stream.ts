// Builds the answer's output items from an OpenAI Responses answer while it streams to the
// client: each `response.output_item.done` item in output_index order, with the usage of
// `response.completed`; or one response body. A failed response or an error event is not an
// answer to record.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { z } from 'zod';
import type { Item } from './openai-responses-wire.ts';
import type { Answer, AnswerReader, AnswerUsage } from './wire.ts';
import { isRecord } from '../../protocol/is-record.ts';

const Usage = z.looseObject({
  input_tokens: z.number().int().nonnegative(),
  output_tokens: z.number().int().nonnegative().optional(),
  input_tokens_details: z.looseObject({ cached_tokens: z.number().int().nonnegative().nullish() }).nullish(),
});

function usageOf(u: unknown): AnswerUsage | null {
  const parsed = Usage.safeParse(u);
  if (!parsed.success) return null;
  return { inputTokens: parsed.data.input_tokens, cachedTokens: parsed.data.input_tokens_details?.cached_tokens ?? 0, outputTokens: parsed.data.output_tokens ?? 0 };
}

const Response = z.looseObject({ status: z.string().optional(), output: z.array(z.looseObject({ type: z.string() })), usage: z.unknown().optional() });

/** A response body's items and usage; null when it is not a response or it failed. */
export function responseAnswer(body: unknown): Answer<Item> | null {
  const r = Response.safeParse(body);
  if (!r.success || r.data.status === 'failed' || r.data.status === 'cancelled') return null;
  return { messages: r.data.output, usage: usageOf(r.data.usage) };
}

export class ResponsesStreamTee {
  private readonly items: Array<Item | undefined> = [];
  private usage: AnswerUsage | null = null;
  private completed = false;
  private failed: string | null = null;
  private readonly parser = createParser({ onEvent: (e) => this.onEvent(e) });

  feed(text: string): void {
    this.parser.feed(text);
  }

  get error(): string | null {
    return this.failed;
  }

  private onEvent(e: EventSourceMessage): void {
    this.event(e);
  }

  /**
   * One event read into the answer. Answers its parsed data and type, so that a caller reading
   * the same stream (the splicer) need not parse it again; undefined for data that is not a
   * JSON object.
   */
  event(e: EventSourceMessage): { data: Record<string, unknown>; type: string } | undefined {
    let data: unknown;
    try {
      data = JSON.parse(e.data);
    } catch {
      this.failed ??= `an event that is not JSON (${e.event ?? 'message'})`;
      return undefined;
    }
    if (!isRecord(data)) return undefined;
    const type = typeof data.type === 'string' ? data.type : (e.event ?? '');
    if (this.failed === null) this.take(data, type);
    return { data, type };
  }

  private take(data: Record<string, unknown>, type: string): void {
    switch (type) {
      case 'response.output_item.done': {
        const index = typeof data.output_index === 'number' ? data.output_index : this.items.length;
        if (isRecord(data.item)) this.items[index] = data.item;
        break;
      }
      case 'response.completed':
      case 'response.incomplete': {
        const response = isRecord(data.response) ? data.response : {};
        this.usage = usageOf(response.usage);
        this.completed = true;
        break;
      }
      case 'response.failed':
      case 'error':
        this.failed = `the upstream sent ${type}: ${JSON.stringify(data.response ?? data).slice(0, 300)}`;
        break;
      default:
        break;
    }
  }

  finish(): Answer<Item> | null {
    if (this.failed !== null) return null;
    if (!this.completed) {
      this.failed = 'the stream ended before response.completed';
      return null;
    }
    return { messages: this.items.filter((i): i is Item => i !== undefined), usage: this.usage };
  }
}

export class ResponsesAnswerReader implements AnswerReader<Item> {
  private readonly tee = new ResponsesStreamTee();
  private json = '';
  private why: string | null = null;

  constructor(private readonly streamed: boolean) {}

  chunk(text: string): void {
    if (this.streamed) this.tee.feed(text);
    else this.json += text;
  }

  finish(): Answer<Item> | null {
    if (this.streamed) return this.tee.finish();
    try {
      const a = responseAnswer(JSON.parse(this.json));
      if (a === null) this.why = 'the body is not a completed response';
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
