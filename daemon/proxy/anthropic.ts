// The Anthropic Messages wire through the proxy: `POST /v1/messages` is reconciled into the
// session's transcript, prepared by the same pipeline as the socket's `prepare`, forwarded
// compacted, and its answer streamed back unchanged while a tee records it; count_tokens is
// answered for the prepared request. Side requests and anything the daemon cannot prepare go
// upstream as they came (failure is open). The listener and the token are server.ts's.
import type http from 'node:http';
import { AlbedoError } from '../../protocol/errors.ts';
import type { Params } from '../../protocol/methods.ts';
import { ToolSpec } from '../../protocol/prepared.ts';
import { lastPrompt } from '../../storage/engine-log.ts';
import { getPayload } from '../../storage/payloads.ts';
import { countSideRequest, currentProxySession, firstOfFamily, latestOfNamespace, messageChain } from '../../storage/proxy-state.ts';
import type { ChainLink } from '../../storage/proxy-state.ts';
import { textTokens } from '../../strategies/estimate.ts';
import { createSummarizer, SummarizerConfig, type UpstreamCall } from '../../strategies/summarizer/index.ts';
import type { CallContext, ConnectionState, DaemonServices } from '../context.ts';
import { preparedRequest, previewPrepared, usageReport } from '../handlers/compaction.ts';
import { AnthropicStreamTee, answerFromJson, type Answer } from './anthropic-stream.ts';
import { MessagesRequest, messageText, placeCacheMarkers, preparedMessages, systemText, WIRE, wireError, withClientSystemMessages, type WireBlock, type WireMessage } from './anthropic-wire.ts';
import { credentialOf, identify, type Identity } from './identity.ts';
import { matchChain, proxySessionFor, reconcile, recordAnswer, type ProxyTarget } from './reconcile.ts';
import { clientHeaders, decodeBody, decoderFor, sendUpstream, upstreamHeaders, upstreamUrl } from './upstream.ts';

/** What one proxied request is handed by the listener. */
export interface ProxyCall {
  daemon: DaemonServices;
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /** The path after the token and the wire's prefix, with its query (`/v1/messages?beta=true`). */
  path: string;
  body: Buffer;
  upstream: string;
}

/** The connection a proxied request is handled as: no socket peer, no client summaries. */
function proxyConnection(agent: string | null): ConnectionState {
  return { id: 0, peer: undefined, initialized: true, client: { name: agent ?? 'proxy', version: '' }, canSummarize: false };
}

function sendError(res: http.ServerResponse, status: number, type: Parameters<typeof wireError>[0], message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = wireError(type, message);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Aborted when the agent goes away before its answer was complete. */
function clientGone(req: http.IncomingMessage, res: http.ServerResponse): AbortController {
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort(new Error('the client disconnected'));
  });
  req.on('aborted', () => abort.abort(new Error('the client disconnected')));
  return abort;
}

/**
 * Forwards the request as it came and streams the answer back; `tee` gets a decoded copy of
 * the answer and is told at the end whether it arrived whole with a 2xx status.
 */
async function forward(
  call: ProxyCall,
  body: Buffer,
  rewritten: boolean,
  signal: AbortSignal,
  tee?: { chunk: (text: string) => void; end: (ok: boolean, status: number) => Promise<void> },
): Promise<void> {
  const { req, res } = call;
  const url = upstreamUrl(call.upstream, call.path);
  let up: http.IncomingMessage;
  try {
    up = await sendUpstream(url, req.method ?? 'POST', upstreamHeaders(req.headers, body.length, rewritten), body, signal);
  } catch (err) {
    if (signal.aborted) return;
    call.daemon.log.warn({ err, method: 'proxy anthropic', upstream: url.origin }, 'the upstream could not be reached');
    sendError(res, 502, 'api_error', `albedo proxy: the upstream ${url.origin} could not be reached (${(err as Error).message})`);
    return;
  }
  const status = up.statusCode ?? 502;
  res.writeHead(status, clientHeaders(up.headers));
  const ok = status >= 200 && status < 300;
  const decoder = tee === undefined || !ok ? null : decoderFor(up.headers['content-encoding']);
  if (decoder !== null && decoder !== undefined) {
    decoder.setEncoding('utf8');
    decoder.on('data', (s: string) => tee?.chunk(s));
    decoder.on('error', () => undefined);
  }
  let complete = false;
  up.on('data', (chunk: Buffer) => {
    res.write(chunk);
    if (decoder !== null && decoder !== undefined) decoder.write(chunk);
    else if (decoder === null && ok) tee?.chunk(chunk.toString('utf8'));
  });
  await new Promise<void>((resolve) => {
    up.on('end', () => {
      complete = true;
      resolve();
    });
    up.on('error', () => resolve());
    up.on('close', () => resolve());
  });
  if (decoder !== null && decoder !== undefined) await new Promise<void>((resolve) => decoder.end(resolve));
  res.end();
  await tee?.end(complete && ok && !signal.aborted && decoder !== undefined, status);
}

function toolSpecs(tools: MessagesRequest['tools']): Params<'prepare'>['tools'] {
  return (tools ?? []).flatMap((t) => {
    const spec = ToolSpec.safeParse({ name: t.name, description: typeof t.description === 'string' ? t.description : '', input_schema: typeof t.input_schema === 'object' && t.input_schema !== null ? t.input_schema : {} });
    return spec.success ? [spec.data] : [];
  });
}

/** The request split: the conversation, and the agent's system-role messages with their places. */
function splitSystem(messages: readonly WireMessage[]): { conversation: WireMessage[]; system: Array<{ message: WireMessage; before: number }> } {
  const conversation: WireMessage[] = [];
  const system: Array<{ message: WireMessage; before: number }> = [];
  for (const m of messages) {
    if (m.role === 'system') system.push({ message: m, before: conversation.length });
    else conversation.push(m);
  }
  return { conversation, system };
}

/**
 * Not the conversation: no tools (title and topic calls), or one user message on another model
 * than the session's (quota probes). Forwarded unchanged and only counted.
 */
function isSideRequest(body: MessagesRequest, conversation: readonly WireMessage[], sessionModel: string | null): boolean {
  if (body.tools === undefined || body.tools.length === 0) return true;
  return conversation.length === 1 && sessionModel !== null && sessionModel !== body.model;
}

/** The headers the `upstream` summarizer sends: the agent's credentials and API version. */
function summaryHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of ['x-api-key', 'authorization', 'anthropic-version']) {
    const v = headers[k];
    if (typeof v === 'string' && v !== '') out[k] = v;
  }
  return out;
}

/** Reads the answer from a decoded copy: an event stream through the tee, or one JSON body. */
class AnswerReader {
  private readonly tee = new AnthropicStreamTee();
  private json = '';
  private why: string | null = null;

  constructor(private readonly streamed: boolean) {}

  chunk(text: string): void {
    if (this.streamed) this.tee.feed(text);
    else this.json += text;
  }

  /** The answer, or null (and `error` says why) for one that must not be recorded. */
  finish(): Answer | null {
    if (this.streamed) return this.tee.finish();
    try {
      const a = answerFromJson(JSON.parse(this.json));
      if (a === null) this.why = 'the body is not a Messages result';
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

/** Counts a side request on the session its agent session is in, once its usage is known. */
function sideTee(call: ProxyCall, streamed: boolean, sid: number | undefined): { chunk: (t: string) => void; end: (ok: boolean) => Promise<void> } {
  const reader = new AnswerReader(streamed);
  return {
    chunk: (t) => reader.chunk(t),
    end: async (ok) => {
      if (!ok || sid === undefined) return;
      const answer = reader.finish();
      countSideRequest(call.daemon.db, sid, answer?.usage?.inputTokens ?? 0, answer?.usage?.outputTokens ?? 0);
    },
  };
}

interface Parsed {
  body: MessagesRequest;
  raw: Buffer;
}

/** The body as JSON and as a Messages request, or the provider's 400 already sent. */
function parseBody(call: ProxyCall): Parsed | 'forward' | null {
  const decoded = decodeBody(call.body, call.req.headers['content-encoding']);
  if (decoded === undefined) return 'forward';
  let json: unknown;
  try {
    json = JSON.parse(decoded.toString('utf8'));
  } catch (err) {
    sendError(call.res, 400, 'invalid_request_error', `albedo proxy: the request body is not JSON (${(err as Error).message})`);
    return null;
  }
  const parsed = MessagesRequest.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    sendError(call.res, 400, 'invalid_request_error', `albedo proxy: not a Messages request: ${issue === undefined ? 'invalid' : `${issue.path.join('.')}: ${issue.message}`}`);
    return null;
  }
  return { body: parsed.data, raw: decoded };
}

/** The model's own window from the catalog, for `max_tokens`. */
function modelWindow(daemon: DaemonServices, model: string): number | undefined {
  return daemon.config().models.lookup(model)?.context_window;
}

/**
 * `max_tokens` lowered so that input and output fit the model's own window (Anthropic refuses
 * a request whose input plus max_tokens exceed it), with what /context says about it.
 */
function fitMaxTokens(maxTokens: number | undefined, input: number, window: number | undefined): { value: number | undefined; note: string | null } {
  if (maxTokens === undefined || window === undefined || input + maxTokens <= window) return { value: maxTokens, note: null };
  const room = window - input;
  if (room < 1) return { value: maxTokens, note: null };
  return { value: room, note: `max_tokens lowered from ${maxTokens} to ${room} so that input (~${input} tokens) and output fit the model's ${window}-token window` };
}

/** The `system` field as it goes out: the agent's as it sent it, then the daemon's own block. */
function systemField(client: MessagesRequest['system'], context: string): { system?: MessagesRequest['system'] } {
  if (context === '') return client === undefined ? {} : { system: client };
  const own: WireBlock = { type: 'text', text: context };
  if (client === undefined) return { system: [own] };
  if (typeof client === 'string') return { system: [{ type: 'text', text: client }, own] };
  return { system: [...client, own] };
}

/** The agent's own prompt as text: its `system` and its system-role messages. */
function promptText(body: MessagesRequest, system: ReadonlyArray<{ message: WireMessage }>): string {
  return [systemText(body.system), ...system.map((s) => messageText(s.message))].filter((t) => t !== '').join('\n\n');
}

/** A request as both endpoints read it, once its body parsed. */
interface Opened {
  abort: AbortController;
  body: MessagesRequest;
  conversation: WireMessage[];
  system: Array<{ message: WireMessage; before: number }>;
  id: Identity;
}

/**
 * Reads the request: its body, its conversation and the agent's system messages, its identity.
 * Null once it is dealt with: a body that does not parse was answered with the provider's 400,
 * and one in an encoding the proxy cannot read was forwarded as it came.
 */
async function openRequest(call: ProxyCall): Promise<Opened | null> {
  const abort = clientGone(call.req, call.res);
  const parsed = parseBody(call);
  if (parsed === null) return null;
  if (parsed === 'forward') {
    await forward(call, call.body, false, abort.signal);
    return null;
  }
  const { conversation, system } = splitSystem(parsed.body.messages);
  return { abort, body: parsed.body, conversation, system, id: identify(call.req.headers, parsed.body, conversation) };
}

/** `POST /v1/messages`. */
export async function handleMessages(call: ProxyCall): Promise<void> {
  const { daemon, res } = call;
  const opened = await openRequest(call);
  if (opened === null) return;
  const { abort, body, conversation, system, id } = opened;
  // A side request opens with its own message: it belongs to the agent session's first
  // conversation, or without a session id to the namespace's latest session.
  const known = currentProxySession(daemon.db, id.identity) ?? firstOfFamily(daemon.db, id.family) ?? latestOfNamespace(daemon.db, id.namespace);
  const sessionModel = known === undefined ? null : lastPrompt(daemon.db, known.sid).model;
  if (conversation.length === 0 || isSideRequest(body, conversation, sessionModel)) {
    return forward(call, call.body, false, abort.signal, sideTee(call, body.stream === true, known?.sid));
  }

  let target: ProxyTarget;
  let links: ChainLink[];
  let outgoing: Buffer;
  let preparedId: string;
  try {
    if (daemon.settings.fault === 'proxy-prepare-fails') throw new Error('staged fault: the proxied prepare fails');
    const session = proxySessionFor(daemon.db, id);
    const reconciled = await daemon.kernels.run(session.name, () => reconcile(daemon.db, session, conversation, { maxImageBytes: daemon.settings.maxImageBytes }), 'transcript');
    daemon.rowsAdded();
    target = reconciled.target;
    links = reconciled.links;
    if (reconciled.forkedFrom !== null) daemon.log.info({ session: target.name, from: reconciled.forkedFrom, method: 'proxy anthropic' }, 'the history departed from the stored one; continuing in a fork');
    const summarizer = createSummarizer({ ...(daemon.config().extensions.summarizer ?? SummarizerConfig.parse({})), provider: 'upstream' }, { upstream: upstreamCall(call, body.model) });
    // The agent owns its prompt: it goes out as sent and is only counted (PrepareArgs.clientPrompt).
    const clientPrompt = promptText(body, system);
    const ctx: CallContext = { daemon, conn: proxyConnection(id.agent), signal: abort.signal, summarizer, clientPrompt, method: 'proxy anthropic' };
    const params: Params<'prepare'> = { session: target.name, model: body.model, provider: WIRE, instructions: '', tools: toolSpecs(body.tools), images: 'ref', force: false };
    let maxTokens: ReturnType<typeof fitMaxTokens> = { value: body.max_tokens, note: null };
    const { result } = await daemon.kernels.run(target.name, (kernel) =>
      preparedRequest(params, ctx, kernel, (p) => {
        maxTokens = fitMaxTokens(body.max_tokens, p.observation.calibrated_input_tokens ?? p.observation.estimated_input_tokens, modelWindow(daemon, body.model));
        return maxTokens.note === null ? [] : [maxTokens.note];
      }),
    );
    preparedId = result.prepared_id;
    const image = (hash: string): string | undefined => getPayload(daemon.db, hash)?.data.toString('base64');
    const messages = placeCacheMarkers(withClientSystemMessages(preparedMessages(result.inputs, image), system), { system: body.system, tools: body.tools, messages: body.messages });
    // With no instructions of the daemon's, `system` is the daemon's own block (extension context).
    const context = result.system;
    const out: Record<string, unknown> = { ...body, ...systemField(body.system, context), messages };
    if (maxTokens.value !== undefined && maxTokens.value !== body.max_tokens) {
      out.max_tokens = maxTokens.value;
      // A thinking budget must stay below max_tokens.
      const thinking = out.thinking as { type?: unknown; budget_tokens?: unknown } | undefined;
      if (typeof thinking?.budget_tokens === 'number' && thinking.budget_tokens >= maxTokens.value) out.thinking = { ...thinking, budget_tokens: Math.max(1024, maxTokens.value - 1) };
    }
    outgoing = Buffer.from(JSON.stringify(out));
  } catch (err) {
    if (abort.signal.aborted) return;
    if (err instanceof AlbedoError && err.code === 'invalid_proxy_request') {
      sendError(res, 400, 'invalid_request_error', `albedo proxy: ${err.message}`);
      return;
    }
    // Failure is open: the agent's request goes up as it came.
    daemon.log.error({ err, session: id.stem, method: 'proxy anthropic' }, 'the request could not be prepared; forwarding it unchanged');
    return forward(call, call.body, false, abort.signal);
  }

  const reader = new AnswerReader(body.stream === true);
  await forward(call, outgoing, true, abort.signal, {
    chunk: (t) => reader.chunk(t),
    end: async (ok) => {
      if (!ok) return;
      const answer = reader.finish();
      if (answer === null) {
        daemon.log.warn({ session: target.name, method: 'proxy anthropic', why: reader.error }, 'the answer was not recorded');
        return;
      }
      await record(daemon, target, links, answer, body.model, preparedId);
    },
  });
}

function upstreamCall(call: ProxyCall, model: string): UpstreamCall {
  return { baseUrl: call.upstream, headers: summaryHeaders(call.req.headers), model, secret: credentialOf(call.req.headers) };
}

/** The answer becomes the conversation's next message, and its usage the prepared request's report. */
async function record(daemon: DaemonServices, target: ProxyTarget, links: readonly ChainLink[], answer: Answer, model: string, preparedId: string): Promise<void> {
  try {
    await daemon.kernels.run(target.name, () => recordAnswer(daemon.db, target, links, answer.message, { model }), 'transcript');
    daemon.rowsAdded();
    if (answer.usage !== null && answer.usage.inputTokens > 0) {
      const ctx: CallContext = { daemon, conn: proxyConnection(null), signal: new AbortController().signal, method: 'proxy anthropic' };
      await usageReport({ session: target.name, prepared_id: preparedId, input_tokens: answer.usage.inputTokens, cached_tokens: answer.usage.cachedTokens }, ctx);
    }
  } catch (err) {
    daemon.log.error({ err, session: target.name, method: 'proxy anthropic' }, 'the answer could not be recorded');
  }
}

/**
 * `POST /v1/messages/count_tokens`: the prepared request's size, so the agent's own accounting
 * sees what compaction made of its history. Nothing is written and no summarizer runs: the
 * stored history is previewed as it stands and the request's messages past it are added as
 * they came. The upstream counts that body; one without count_tokens gets the calibrated
 * estimate. A request for a session the proxy has not seen, or whose history departs from the
 * stored one, goes up as it came.
 */
export async function handleCountTokens(call: ProxyCall): Promise<void> {
  const { daemon } = call;
  const opened = await openRequest(call);
  if (opened === null) return;
  const { abort, body, conversation, system, id } = opened;
  const known = currentProxySession(daemon.db, id.identity);
  if (known === undefined) return forward(call, call.body, false, abort.signal);
  let outgoing: Buffer;
  let estimate: number;
  try {
    const { matched, departed } = matchChain(messageChain(daemon.db, known.sid), conversation);
    if (departed || matched === 0) return forward(call, call.body, false, abort.signal);
    const clientPrompt = promptText(body, system);
    const ctx: CallContext = { daemon, conn: proxyConnection(id.agent), signal: abort.signal, clientPrompt, method: 'proxy anthropic count_tokens' };
    const params: Params<'prepare'> = { session: known.name, model: body.model, provider: WIRE, instructions: '', tools: toolSpecs(body.tools), images: 'ref', force: false };
    const preview = await daemon.kernels.run(known.name, (kernel) => previewPrepared(params, ctx, kernel));
    const fresh = conversation.slice(matched);
    const image = (hash: string): string | undefined => getPayload(daemon.db, hash)?.data.toString('base64');
    const messages = withClientSystemMessages([...preparedMessages(preview.inputs, image), ...fresh], system);
    outgoing = Buffer.from(JSON.stringify({ ...body, ...systemField(body.system, preview.system), messages }));
    const ratio = preview.observation.token_ratio;
    estimate = (preview.observation.calibrated_input_tokens ?? preview.observation.estimated_input_tokens) + Math.ceil(textTokens(JSON.stringify(fresh)) * ratio);
  } catch (err) {
    if (abort.signal.aborted) return;
    daemon.log.error({ err, session: known.name, method: 'proxy anthropic count_tokens' }, 'count_tokens could not be prepared; forwarding it unchanged');
    return forward(call, call.body, false, abort.signal);
  }
  await countUpstream(call, outgoing, estimate, abort.signal);
}

/** Forwards a count_tokens body; a 404 or 405 (an upstream without the endpoint) is answered with `estimate`. */
async function countUpstream(call: ProxyCall, body: Buffer, estimate: number, signal: AbortSignal): Promise<void> {
  const { req, res } = call;
  const url = upstreamUrl(call.upstream, call.path);
  try {
    const up = await sendUpstream(url, 'POST', upstreamHeaders(req.headers, body.length, true), body, signal);
    if (up.statusCode !== 404 && up.statusCode !== 405) {
      res.writeHead(up.statusCode ?? 502, clientHeaders(up.headers));
      up.pipe(res);
      return;
    }
    up.resume();
  } catch (err) {
    if (signal.aborted) return;
    call.daemon.log.warn({ err, method: 'proxy anthropic count_tokens', upstream: url.origin }, 'count_tokens: the upstream could not be reached; answering with the estimate');
  }
  const answer = JSON.stringify({ input_tokens: estimate });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
  res.end(answer);
}

/** Any other path of the wire (`/v1/models`, ...): forwarded as it came, nothing recorded. */
export function handlePassThrough(call: ProxyCall): Promise<void> {
  const abort = clientGone(call.req, call.res);
  return forward(call, call.body, false, abort.signal);
}
