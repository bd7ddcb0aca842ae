// A scripted OpenAI upstream for tests: a real HTTP server on 127.0.0.1 that answers POST
// /v1/chat/completions and /v1/responses (streamed or not) as a script decides, and records
// every request. One answer model for both wires (text, tool calls, reasoning, an HTTP error),
// rendered in each wire's own shapes; it models no real model.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { isRecord } from '../../protocol/is-record.ts';

export type OpenAIWire = 'chat' | 'responses';

export interface OpenAICall {
  name: string;
  arguments: Record<string, unknown>;
  /** Default a fresh `call_...`. */
  id?: string;
}

export interface OpenAIMessageAnswer {
  kind: 'message';
  text?: string;
  calls?: OpenAICall[];
  /** Responses only: a reasoning item before the output, with its readable summary and blob. */
  reasoning?: { summary: string; encrypted: string };
  /** Responses only: items sent as they are, after the others (e.g. an unknown type). */
  items?: Array<Record<string, unknown>>;
  /** Default: input = request bytes / 4, output = 10. */
  usage?: { input?: number; cached?: number; output?: number };
}

export interface OpenAIErrorAnswer {
  kind: 'error';
  status: number;
  body: unknown;
}

export type OpenAIAnswer = OpenAIMessageAnswer | OpenAIErrorAnswer;

export interface OpenAIRequest {
  seq: number;
  url: string;
  /** The path below `/v1` without the query (`/chat/completions`, `/responses`). */
  path: string;
  headers: Record<string, string>;
  rawBody: string;
  body: Record<string, unknown>;
  wire: OpenAIWire | null;
  /** Has a non-empty `tools` array (an agent's turn, not a title or a summary). */
  conversation: boolean;
  status?: number;
}

export type OpenAIScript = (req: OpenAIRequest & { wire: OpenAIWire }) => OpenAIAnswer | Promise<OpenAIAnswer>;

export interface OpenAIUpstream {
  /** `http://127.0.0.1:PORT/v1`: what the proxy takes as its OpenAI upstream. */
  readonly baseUrl: string;
  readonly requests: readonly OpenAIRequest[];
  /** Requests of one wire (all, or only the agent's turns / only the others). */
  of(wire: OpenAIWire, filter?: { conversation?: boolean }): OpenAIRequest[];
  setScript(script: OpenAIScript): void;
  close(): Promise<void>;
}

export const openaiAnswer = {
  text(text: string, usage?: OpenAIMessageAnswer['usage']): OpenAIMessageAnswer {
    return { kind: 'message', text, ...(usage === undefined ? {} : { usage }) };
  },
  call(name: string, args: Record<string, unknown>, text?: string): OpenAIMessageAnswer {
    return { kind: 'message', calls: [{ name, arguments: args }], ...(text === undefined ? {} : { text }) };
  },
  error(status: number, message: string): OpenAIErrorAnswer {
    return { kind: 'error', status, body: { error: { message, type: 'server_error', code: null } } };
  },
};

function chunks(s: string, size: number): string[] {
  if (s === '') return [];
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

const fresh = (prefix: string): string => `${prefix}_${randomBytes(8).toString('hex')}`;

function usageOf(a: OpenAIMessageAnswer, raw: string): { input: number; cached: number; output: number } {
  return { input: a.usage?.input ?? Math.ceil(Buffer.byteLength(raw) / 4), cached: a.usage?.cached ?? 0, output: a.usage?.output ?? 10 };
}

/** A Chat Completions answer: chunks (tool-call fragments of parallel calls interleaved) or one body. */
function renderChat(a: OpenAIMessageAnswer, req: OpenAIRequest, size: number): { stream: string[] } | { json: unknown } {
  const model = typeof req.body.model === 'string' ? req.body.model : 'gpt-test';
  const u = usageOf(a, req.rawBody);
  const usage = { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output, prompt_tokens_details: { cached_tokens: u.cached } };
  const calls = (a.calls ?? []).map((c) => ({ id: c.id ?? fresh('call'), name: c.name, args: JSON.stringify(c.arguments) }));
  const finish = calls.length > 0 ? 'tool_calls' : 'stop';
  if (req.body.stream !== true) {
    const message = { role: 'assistant', content: a.text ?? null, ...(calls.length > 0 ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.args } })) } : {}) };
    return { json: { id: fresh('chatcmpl'), object: 'chat.completion', model, choices: [{ index: 0, message, finish_reason: finish }], usage } };
  }
  const id = fresh('chatcmpl');
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null): string => JSON.stringify({ id, object: 'chat.completion.chunk', model, choices: [{ index: 0, delta, finish_reason: finishReason }] });
  const out = [chunk({ role: 'assistant', content: '' })];
  for (const piece of chunks(a.text ?? '', size)) out.push(chunk({ content: piece }));
  calls.forEach((c, index) => out.push(chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] })));
  const pieces = calls.map((c) => chunks(c.args, size));
  for (let k = 0; pieces.some((p) => k < p.length); k++) {
    pieces.forEach((p, index) => {
      if (k < p.length) out.push(chunk({ tool_calls: [{ index, function: { arguments: p[k] } }] }));
    });
  }
  out.push(chunk({}, finish));
  const opts = req.body.stream_options;
  if (isRecord(opts) && opts.include_usage === true) out.push(JSON.stringify({ id, object: 'chat.completion.chunk', model, choices: [], usage }));
  out.push('[DONE]');
  return { stream: out.map((d) => `data: ${d}\n\n`) };
}

/** A Responses answer: the event sequence Codex accepts, or one response body. */
function renderResponses(a: OpenAIMessageAnswer, req: OpenAIRequest, size: number): { stream: string[] } | { json: unknown } {
  const model = typeof req.body.model === 'string' ? req.body.model : 'gpt-test';
  const u = usageOf(a, req.rawBody);
  const usage = { input_tokens: u.input, input_tokens_details: { cached_tokens: u.cached }, output_tokens: u.output, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: u.input + u.output };
  const items: Array<Record<string, unknown>> = [];
  if (a.reasoning !== undefined) items.push({ type: 'reasoning', id: fresh('rs'), summary: [{ type: 'summary_text', text: a.reasoning.summary }], encrypted_content: a.reasoning.encrypted });
  if (a.text !== undefined) items.push({ type: 'message', id: fresh('msg'), role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: a.text, annotations: [] }] });
  for (const c of a.calls ?? []) items.push({ type: 'function_call', id: fresh('fc'), status: 'completed', name: c.name, arguments: JSON.stringify(c.arguments), call_id: c.id ?? fresh('call') });
  items.push(...(a.items ?? []));
  const response = { id: fresh('resp'), object: 'response', created_at: 1_800_000_000, status: 'completed', model, output: items, usage };
  if (req.body.stream !== true) return { json: response };
  let seq = 0;
  const ev = (type: string, data: Record<string, unknown>): string => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`;
  const out = [ev('response.created', { response: { ...response, status: 'in_progress', output: [], usage: null } })];
  items.forEach((item, output_index) => {
    const opening = item.type === 'message' ? { ...item, status: 'in_progress', content: [] } : item;
    out.push(ev('response.output_item.added', { output_index, item: opening }));
    if (item.type === 'message') {
      for (const delta of chunks(a.text ?? '', size)) out.push(ev('response.output_text.delta', { item_id: item.id, output_index, content_index: 0, delta }));
    }
    out.push(ev('response.output_item.done', { output_index, item }));
  });
  out.push(ev('response.completed', { response }));
  return { stream: out };
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function decode(raw: Buffer, encoding: string | undefined): Buffer {
  if (encoding === 'gzip') return zlib.gunzipSync(raw);
  if (encoding === 'br') return zlib.brotliDecompressSync(raw);
  if (encoding === 'zstd') throw new Error('zstd body');
  return raw;
}

export async function startOpenAIUpstream(opts: { script: OpenAIScript; chunkSize?: number }): Promise<OpenAIUpstream> {
  let script = opts.script;
  const size = opts.chunkSize ?? 48;
  const requests: OpenAIRequest[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    void (async () => {
      const raw = decode(await readBody(req), req.headers['content-encoding']).toString('utf8');
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
      const url = req.url ?? '/';
      const path = (url.split('?')[0] ?? '').replace(/^\/v1/, '');
      let body: Record<string, unknown> = {};
      try {
        const parsed = JSON.parse(raw) as unknown;
        if (isRecord(parsed)) body = parsed;
      } catch {
        // recorded as it came
      }
      // `/responses/compact` (Codex's own compaction) answers a response body, never a stream.
      const wire: OpenAIWire | null = path === '/chat/completions' ? 'chat' : path === '/responses' || path === '/responses/compact' ? 'responses' : null;
      if (path === '/responses/compact') body = { ...body, stream: false };
      const record: OpenAIRequest = { seq: requests.length, url, path, headers, rawBody: raw, body, wire, conversation: Array.isArray(body.tools) && body.tools.length > 0 };
      requests.push(record);
      if (wire === null) {
        record.status = 404;
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `no route ${path}`, type: 'invalid_request_error', code: null } }));
        return;
      }
      const a = await script({ ...record, wire });
      if (a.kind === 'error') {
        record.status = a.status;
        const text = JSON.stringify(a.body);
        res.writeHead(a.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      record.status = 200;
      const r = wire === 'chat' ? renderChat(a, record, size) : renderResponses(a, record, size);
      if ('json' in r) {
        const text = JSON.stringify(r.json);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      for (const piece of r.stream) res.write(piece);
      res.end();
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    of: (wire, filter) => requests.filter((r) => r.wire === wire && (filter?.conversation === undefined || r.conversation === filter.conversation)),
    setScript: (s) => {
      script = s;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
