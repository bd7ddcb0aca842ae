// A scripted Anthropic Messages upstream for tests: a real HTTP server on 127.0.0.1 that answers
// POST /v1/messages (streamed or not) and /v1/messages/count_tokens as a script decides, and
// records every request it receives. What to answer is the script's; it models no real model.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { isRecord } from '../../protocol/is-record.ts';

/** One content block of a scripted answer. `id` of a tool_use defaults to a fresh `toolu_...`. */
export type AnswerBlock =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; name: string; input: Record<string, unknown>; id?: string }
  | { type: 'thinking'; thinking: string; signature: string };

/** Usage numbers to report; anything left out is estimated (input: body bytes / 4). */
export interface AnswerUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

/** A normal assistant message. stop_reason defaults to tool_use when a tool_use is present. */
export interface MessageAnswer {
  kind: 'message';
  content: AnswerBlock[];
  stopReason?: 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'pause_turn' | 'refusal';
  usage?: AnswerUsage;
  /** Defaults to the request's model. */
  model?: string;
}

/** An HTTP error instead of an answer, e.g. 529 with an overloaded_error body. */
export interface ErrorAnswer {
  kind: 'error';
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/**
 * A stream that starts normally (message_start, then `partial` blocks complete) and then sends
 * `event: error` and ends. For a non-streaming request this is answered as a 500 with that error.
 */
export interface StreamErrorAnswer {
  kind: 'stream-error';
  partial?: AnswerBlock[];
  error: { type: string; message: string };
}

export type Answer = MessageAnswer | ErrorAnswer | StreamErrorAnswer;

/** The JSON body of a Messages request, as far as the upstream looks at it. */
export interface MessagesBody {
  model?: string;
  messages?: WireMessage[];
  system?: unknown;
  tools?: unknown[];
  stream?: boolean;
  max_tokens?: number;
  [key: string]: unknown;
}

export interface WireMessage {
  role: string;
  content: string | WireBlock[];
}

export interface WireBlock {
  type: string;
  [key: string]: unknown;
}

export type RequestKind = 'messages' | 'count_tokens' | 'other';

/** One request as the upstream received it. */
export interface RecordedRequest {
  /** 0-based arrival order over every request. */
  seq: number;
  method: string;
  /** The URL path and query as sent, prefix included. */
  url: string;
  /** The path below the prefix, without the query (e.g. `/v1/messages`); null when outside it. */
  path: string | null;
  query: string;
  /** Header names lower-cased; repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** The decompressed body text. */
  rawBody: string;
  /** The parsed JSON body, or null when empty or not JSON. */
  body: unknown;
  kind: RequestKind;
  /** messages only: has a non-empty `tools` array (an agent turn, not a title/quota side call). */
  conversation: boolean;
  /** messages only: 0-based index among messages requests of the same class (conversation or side). */
  index: number | null;
  /** What was answered: the HTTP status, and for messages the scripted answer. */
  status?: number;
  answer?: Answer;
}

/** What a script gets for each POST /v1/messages. */
export interface ScriptRequest extends RecordedRequest {
  kind: 'messages';
  body: MessagesBody;
  index: number;
}

export type Script = (req: ScriptRequest) => Answer | Promise<Answer>;

export interface ScriptedUpstreamOptions {
  /** Decides each answer. Default: conversation -> "ok" text, side -> "ok" text. */
  script?: Script;
  /**
   * A path prefix the upstream is mounted under, e.g. `/tok123/anthropic`; requests outside it
   * get 404 (and are recorded with path null), so a client that drops it shows up.
   */
  prefix?: string;
  /** Characters per text_delta / input_json_delta (default 64), to make clients reassemble. */
  chunkSize?: number;
}

export interface ScriptedUpstream {
  /** `http://127.0.0.1:PORT` plus the prefix: what a client takes as its base URL. */
  readonly baseUrl: string;
  readonly port: number;
  /** Every request received so far, in arrival order (a live array; copy it to keep a snapshot). */
  readonly requests: readonly RecordedRequest[];
  /** The messages requests only. */
  messages(filter?: { conversation?: boolean }): ScriptRequest[];
  /** Replaces the script for the requests that follow. */
  setScript(script: Script): void;
  /** Stops listening and destroys every open connection (streams in flight are cut). */
  close(): Promise<void>;
}

/** Short helpers for scripts. */
export const answer = {
  text(text: string, usage?: AnswerUsage): MessageAnswer {
    return { kind: 'message', content: [{ type: 'text', text }], stopReason: 'end_turn', ...(usage ? { usage } : {}) };
  },
  tool(name: string, input: Record<string, unknown>, preamble?: string): MessageAnswer {
    const content: AnswerBlock[] = preamble ? [{ type: 'text', text: preamble }] : [];
    content.push({ type: 'tool_use', name, input });
    return { kind: 'message', content, stopReason: 'tool_use' };
  },
  /** 529 with the body Anthropic sends when overloaded. */
  overloaded(): ErrorAnswer {
    return {
      kind: 'error',
      status: 529,
      body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
    };
  },
  /** A mid-stream `event: error` after `partial` blocks. */
  streamError(type = 'overloaded_error', message = 'Overloaded', partial?: AnswerBlock[]): StreamErrorAnswer {
    return { kind: 'stream-error', error: { type, message }, ...(partial ? { partial } : {}) };
  },
};

/** True for a messages body that carries a non-empty tools array (an agent's own turn). */
export function isConversation(body: unknown): boolean {
  return isRecord(body) && Array.isArray(body.tools) && body.tools.length > 0;
}

/** The blocks of a message's content, a string content read as one text block. */
export function blocksOf(message: WireMessage): WireBlock[] {
  return typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
}

/** The text a tool_result carries (string content, or its text blocks joined). */
export function toolResultText(block: WireBlock): string {
  const c = block.content;
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  return c
    .map((b: unknown) => (isRecord(b) && b.type === 'text' && typeof b.text === 'string' ? b.text : ''))
    .join('\n');
}

const estimate = (text: string): number => Math.max(1, Math.ceil(Buffer.byteLength(text) / 4));

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function decode(raw: Buffer, encoding: string | undefined): Buffer {
  const codings = (encoding ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s && s !== 'identity');
  let out = raw;
  // Codings are listed in the order they were applied; undo them last first.
  for (const coding of codings.reverse()) {
    if (coding === 'gzip' || coding === 'x-gzip') out = zlib.gunzipSync(out);
    else if (coding === 'br') out = zlib.brotliDecompressSync(out);
    else if (coding === 'deflate') out = zlib.inflateSync(out);
    else throw new UnsupportedEncoding(coding);
  }
  return out;
}

class UnsupportedEncoding extends Error {
  constructor(readonly coding: string) {
    super(`unsupported content-encoding ${coding}`);
  }
}

function lowerHeaders(req: http.IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function chunks(s: string, size: number): string[] {
  if (s.length === 0) return [''];
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

interface ResolvedBlock {
  wire: Record<string, unknown>;
}

function resolveBlocks(blocks: AnswerBlock[]): ResolvedBlock[] {
  return blocks.map((b) =>
    b.type === 'text'
      ? { wire: { type: 'text', text: b.text } }
      : b.type === 'thinking'
      ? { wire: { type: 'thinking', thinking: b.thinking, signature: b.signature } }
      : { wire: { type: 'tool_use', id: b.id ?? `toolu_${randomBytes(12).toString('hex')}`, name: b.name, input: b.input } }
  );
}

/** Starts a scripted upstream on 127.0.0.1 with an OS-chosen port. */
export async function startScriptedUpstream(opts: ScriptedUpstreamOptions = {}): Promise<ScriptedUpstream> {
  const prefix = (opts.prefix ?? '').replace(/\/+$/, '');
  if (prefix && !prefix.startsWith('/')) throw new Error(`prefix must start with /: ${prefix}`);
  const chunkSize = opts.chunkSize ?? 64;
  let script: Script = opts.script ?? (() => answer.text('ok'));
  const requests: RecordedRequest[] = [];
  const counters = { conversation: 0, side: 0 };
  let closing = false;

  const sendJson = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      'request-id': `req_${randomBytes(8).toString('hex')}`,
      ...headers,
    });
    res.end(text);
  };

  const messageJson = (a: MessageAnswer, body: MessagesBody, rawBody: string): Record<string, unknown> => {
    const content = resolveBlocks(a.content).map((b) => b.wire);
    const hasTool = content.some((b) => b.type === 'tool_use');
    return {
      id: `msg_${randomBytes(12).toString('hex')}`,
      type: 'message',
      role: 'assistant',
      model: a.model ?? body.model ?? 'claude-sonnet-4-5',
      content,
      stop_reason: a.stopReason ?? (hasTool ? 'tool_use' : 'end_turn'),
      stop_sequence: null,
      usage: {
        input_tokens: a.usage?.input_tokens ?? estimate(rawBody),
        cache_creation_input_tokens: a.usage?.cache_creation_input_tokens ?? 0,
        cache_read_input_tokens: a.usage?.cache_read_input_tokens ?? 0,
        output_tokens: a.usage?.output_tokens ?? estimate(JSON.stringify(content)),
      },
    };
  };

  const stream = (res: http.ServerResponse, a: MessageAnswer | StreamErrorAnswer, body: MessagesBody, rawBody: string): void => {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'request-id': `req_${randomBytes(8).toString('hex')}`,
    });
    const send = (event: string, data: Record<string, unknown>): void => {
      res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
    };
    const asMessage: MessageAnswer = a.kind === 'message' ? a : { kind: 'message', content: a.partial ?? [] };
    const full = messageJson(asMessage, body, rawBody);
    const usage = full.usage as Record<string, number>;
    send('message_start', {
      message: { ...full, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } },
    });
    send('ping', {});
    (full.content as Record<string, unknown>[]).forEach((block, index) => {
      if (block.type === 'text') {
        send('content_block_start', { index, content_block: { type: 'text', text: '' } });
        for (const piece of chunks(String(block.text), chunkSize)) {
          send('content_block_delta', { index, delta: { type: 'text_delta', text: piece } });
        }
      } else if (block.type === 'thinking') {
        // As Anthropic streams it: the thinking in deltas, then its signature in one.
        send('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
        for (const piece of chunks(String(block.thinking), chunkSize)) {
          send('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: piece } });
        }
        send('content_block_delta', { index, delta: { type: 'signature_delta', signature: block.signature } });
      } else {
        send('content_block_start', { index, content_block: { ...block, input: {} } });
        for (const piece of chunks(JSON.stringify(block.input), chunkSize)) {
          send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } });
        }
      }
      send('content_block_stop', { index });
    });
    if (a.kind === 'stream-error') {
      send('error', { error: a.error });
      res.end();
      return;
    }
    send('message_delta', {
      delta: { stop_reason: full.stop_reason, stop_sequence: null },
      usage: { output_tokens: usage.output_tokens },
    });
    send('message_stop', {});
    res.end();
  };

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const url = req.url ?? '/';
    const [pathPart = '/', query = ''] = url.split(/\?(.*)/s, 2);
    const inPrefix = !prefix || pathPart === prefix || pathPart.startsWith(prefix + '/');
    const rec: RecordedRequest = {
      seq: requests.length,
      method: req.method ?? 'GET',
      url,
      path: inPrefix ? pathPart.slice(prefix.length) || '/' : null,
      query,
      headers: lowerHeaders(req),
      rawBody: '',
      body: null,
      kind: 'other',
      conversation: false,
      index: null,
    };
    requests.push(rec);
    const raw = await readBody(req);
    try {
      rec.rawBody = decode(raw, rec.headers['content-encoding']).toString('utf8');
    } catch (err) {
      rec.status = 415;
      sendJson(res, 415, { type: 'error', error: { type: 'invalid_request_error', message: String(err) } });
      return;
    }
    try {
      rec.body = rec.rawBody ? (JSON.parse(rec.rawBody) as unknown) : null;
    } catch {
      rec.body = null;
    }
    if (rec.method === 'POST' && rec.path === '/v1/messages/count_tokens') {
      rec.kind = 'count_tokens';
      rec.status = 200;
      sendJson(res, 200, { input_tokens: estimate(rec.rawBody) });
      return;
    }
    if (rec.method !== 'POST' || rec.path !== '/v1/messages') {
      rec.status = 404;
      sendJson(res, 404, { type: 'error', error: { type: 'not_found_error', message: `no route ${rec.method} ${url}` } });
      return;
    }
    rec.kind = 'messages';
    if (!isRecord(rec.body) || !Array.isArray(rec.body.messages)) {
      rec.status = 400;
      sendJson(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'body must be JSON with messages' } });
      return;
    }
    rec.conversation = isConversation(rec.body);
    const body = rec.body as MessagesBody;
    const index = rec.conversation ? counters.conversation++ : counters.side++;
    rec.index = index;
    let a: Answer;
    try {
      a = await script({ ...rec, kind: 'messages', body, index });
    } catch (err) {
      a = { kind: 'error', status: 500, body: { type: 'error', error: { type: 'api_error', message: `script threw: ${String(err)}` } } };
    }
    rec.answer = a;
    if (a.kind === 'error') {
      rec.status = a.status;
      sendJson(res, a.status, a.body, a.headers);
      return;
    }
    rec.status = 200;
    if (body.stream === true) {
      stream(res, a, body, rec.rawBody);
    } else if (a.kind === 'stream-error') {
      rec.status = 500;
      sendJson(res, 500, { type: 'error', error: a.error });
    } else {
      sendJson(res, 200, messageJson(a, body, rec.rawBody));
    }
  };

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { type: 'error', error: { type: 'api_error', message: String(err) } });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    baseUrl: `http://127.0.0.1:${port}${prefix}`,
    port,
    requests,
    messages(filter = {}) {
      return requests.filter(
        (r): r is ScriptRequest => r.kind === 'messages' && (filter.conversation === undefined || r.conversation === filter.conversation),
      );
    },
    setScript(next) {
      script = next;
    },
    async close() {
      if (closing) return;
      closing = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}
