// The processes the proxy section measures the daemon's proxy against, each plain
// JavaScript run with `node -e` in a child process of its own (so its CPU time is its own, read
// from /proc like the daemon's, timing.ts):
// - the upstream: answers POST .../v1/messages, .../chat/completions and .../responses with a
//   short streamed text answer in that wire's events, or, when the request carries the header
//   `x-bench-answer: big`, with a text answer of about 1 MiB in 1 KiB deltas. It reads each body
//   whole before answering, as a provider must, and parses nothing of it;
// - the bare pass-through proxy: reads the body, parses it and writes it again
//   (JSON.parse, JSON.stringify), forwards it with the client's headers and pipes the answer
//   back. What any proxy that touches the body costs, with nothing of albedo's work;
// - the pipe proxy: streams the body on unread. What the extra hop alone costs.
import { spawn, type ChildProcess } from 'node:child_process';

/** The big answer's text, in characters. */
export const BIG_ANSWER_CHARS = 1 << 20;
/** One delta of the big answer. */
const BIG_DELTA_CHARS = 1 << 10;
/** The short answer every other request gets. */
export const SHORT_ANSWER = 'Done; continuing with the next step.';

const UPSTREAM = `
const http = require('node:http');
const BIG = ${BIG_ANSWER_CHARS};
const DELTA = ${BIG_DELTA_CHARS};
const SHORT = ${JSON.stringify(SHORT_ANSWER)};
const piece = 'x'.repeat(DELTA - 1) + ' ';
let n = 0;
function anthropic(res, text, deltas, inTok) {
  const ev = (t, d) => res.write('event: ' + t + '\\ndata: ' + JSON.stringify(Object.assign({ type: t }, d)) + '\\n\\n');
  ev('message_start', { message: { id: 'msg_' + (++n), type: 'message', role: 'assistant', model: 'bench', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: inTok, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 } } });
  ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
  for (const d of deltas) ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: d } });
  ev('content_block_stop', { index: 0 });
  ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: Math.ceil(text.length / 4) } });
  ev('message_stop', {});
}
function chat(res, text, deltas, inTok, usage) {
  const id = 'chatcmpl-' + (++n);
  const ch = (delta, finish) => res.write('data: ' + JSON.stringify({ id, object: 'chat.completion.chunk', model: 'bench', choices: [{ index: 0, delta, finish_reason: finish }] }) + '\\n\\n');
  ch({ role: 'assistant', content: '' }, null);
  for (const d of deltas) ch({ content: d }, null);
  ch({}, 'stop');
  const out = Math.ceil(text.length / 4);
  if (usage) res.write('data: ' + JSON.stringify({ id, object: 'chat.completion.chunk', model: 'bench', choices: [], usage: { prompt_tokens: inTok, completion_tokens: out, total_tokens: inTok + out, prompt_tokens_details: { cached_tokens: 0 } } }) + '\\n\\n');
  res.write('data: [DONE]\\n\\n');
}
function responses(res, text, deltas, inTok) {
  let seq = 0;
  const ev = (t, d) => res.write('event: ' + t + '\\ndata: ' + JSON.stringify(Object.assign({ type: t, sequence_number: seq++ }, d)) + '\\n\\n');
  const k = ++n;
  const item = { type: 'message', id: 'msg_' + k, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] };
  const response = { id: 'resp_' + k, object: 'response', created_at: 1800000000, status: 'completed', model: 'bench', output: [item], usage: { input_tokens: inTok, input_tokens_details: { cached_tokens: 0 }, output_tokens: Math.ceil(text.length / 4), output_tokens_details: { reasoning_tokens: 0 }, total_tokens: inTok } };
  ev('response.created', { response: Object.assign({}, response, { status: 'in_progress', output: [], usage: null }) });
  ev('response.output_item.added', { output_index: 0, item: Object.assign({}, item, { status: 'in_progress', content: [] }) });
  for (const d of deltas) ev('response.output_text.delta', { item_id: item.id, output_index: 0, content_index: 0, delta: d });
  ev('response.output_item.done', { output_index: 0, item });
  ev('response.completed', { response });
}
const server = http.createServer((req, res) => {
  let bytes = 0;
  req.on('data', (c) => { bytes += c.length; });
  req.on('end', () => {
    const path = (req.url || '').split('?')[0];
    const big = req.headers['x-bench-answer'] === 'big';
    const deltas = big ? Array.from({ length: BIG / DELTA }, () => piece) : [SHORT];
    const text = deltas.join('');
    const inTok = Math.ceil(bytes / 4);
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    if (path.endsWith('/v1/messages')) anthropic(res, text, deltas, inTok);
    else if (path.endsWith('/chat/completions')) chat(res, text, deltas, inTok, true);
    else if (path.endsWith('/responses')) responses(res, text, deltas, inTok);
    else { res.statusCode = 404; }
    res.end();
  });
});
server.keepAliveTimeout = 65000;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
process.on('SIGTERM', () => { server.closeAllConnections(); server.close(() => process.exit(0)); });
`;

/**
 * A proxy in front of the upstream given as its argument: `send(req, res, forward)` gets each
 * request and calls `forward(headers)` for the upstream request (the answer is piped back).
 */
function proxyScript(send: string): string {
  return `
const http = require('node:http');
const upstream = new URL(process.argv[1]);
const agent = new http.Agent({ keepAlive: true });
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host']);
const server = http.createServer((req, res) => {
  const headers = {};
  for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k)) headers[k] = v;
  const forward = () => {
    const up = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers, agent }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    return up;
  };
  ${send}
});
server.keepAliveTimeout = 65000;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
process.on('SIGTERM', () => { server.closeAllConnections(); server.close(() => process.exit(0)); });
`;
}

/** Reads the body whole, parses it and writes it again. */
const BARE_PROXY = proxyScript(`
  const parts = [];
  req.on('data', (c) => parts.push(c));
  req.on('end', () => {
    const body = Buffer.from(JSON.stringify(JSON.parse(Buffer.concat(parts).toString('utf8'))));
    headers['content-length'] = String(body.length);
    forward().end(body);
  });`);

/**
 * Streams the body on as it arrives, unread. What the extra hop alone costs in time: no proxy
 * that must read the body before it sends it on (as albedo must, to store and compact it) can
 * be faster.
 */
const PIPE_PROXY = proxyScript(`
  req.pipe(forward());`);

export interface Peer {
  /** http://127.0.0.1:PORT */
  url: string;
  pid: number;
  stop(): Promise<void>;
}

async function startPeer(script: string, args: string[]): Promise<Peer> {
  const proc: ChildProcess = spawn(process.execPath, ['-e', script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<string>((resolve, reject) => {
    proc.stdout?.once('data', (d: Buffer) => resolve(d.toString('utf8').trim()));
    proc.once('exit', (code) => reject(new Error(`a bench peer exited before listening (${code})`)));
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return {
    url: `http://127.0.0.1:${port}`,
    pid: proc.pid ?? -1,
    async stop() {
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

/** The scripted upstream every path of the section ends at. */
export function startBenchUpstream(): Promise<Peer> {
  return startPeer(UPSTREAM, []);
}

/** The bare pass-through proxy in front of `upstream`. */
export function startBareProxy(upstream: string): Promise<Peer> {
  return startPeer(BARE_PROXY, [upstream]);
}

/** The pipe proxy in front of `upstream`. */
export function startPipeProxy(upstream: string): Promise<Peer> {
  return startPeer(PIPE_PROXY, [upstream]);
}
