// The conversation endpoint of every wire (Messages, Responses, Chat Completions): the request
// is reconciled into the session's transcript, prepared by the same pipeline as the socket's
// `prepare`, forwarded compacted, and its answer streamed back as it arrives while a tee records
// it. Side requests, requests a proxy cannot compact and anything the daemon fails to prepare go
// upstream as they came (failure is open). What differs between wires is their Wire (wire.ts).
import type http from 'node:http';
import { AlbedoError } from '../../protocol/errors.ts';
import { encodeJson } from '../../protocol/kept-json.ts';
import type { Params } from '../../protocol/methods.ts';
import type { ToolSpec } from '../../protocol/prepared.ts';
import { lastModel } from '../../storage/log/prepared-requests.ts';
import { getPayload } from '../../storage/images/payloads.ts';
import { countSideRequest, currentProxySession, firstOfFamily, latestOfNamespace, notePassedThrough, noteRun } from '../../storage/log/proxy-state.ts';
import type { ChainLink } from '../../storage/log/proxy-state.ts';
import { createSummarizer, SummarizerConfig } from '../../strategies/summarizer/index.ts';
import type { CallContext, ConnectionState, DaemonServices } from '../context.ts';
import { usageReport } from '../handlers/compaction.ts';
import { preparedRequest } from '../prepare-pipeline.ts';
import type { BodyMemo } from './body-memo.ts';
import { identify, type Identity } from './identity.ts';
import { proxySessionFor, reconcile, recordAnswer, type ProxyTarget } from './reconcile.ts';
import { clientHeaders, decodeBody, decoderFor, sendUpstream, upstreamHeaders, upstreamUrl, type OutgoingBody } from './upstream.ts';
import { proxyMemoryTools, runTurn } from './memory-tools.ts';
import type { Answer, AnswerUsage, ClientFilter, ImageBytes, ProxyErrorKind, Wire, WireRequest } from './wire.ts';

/** What one proxied request is handed by the listener. */
export interface ProxyCall {
  daemon: DaemonServices;
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /** The path after the token and the wire's prefix, with its query (`/v1/messages?beta=true`). */
  path: string;
  body: Buffer;
  upstream: string;
  /** The `albedo run` the request came through (its base URL's `/run/<id>`), or null. */
  run: string | null;
  /** The upstream started answering: idle-time work may run again (DaemonServices.holdIdleWork). */
  answering: () => void;
  /** Recent request bodies, which the next request of the same conversation mostly repeats. */
  bodies: BodyMemo;
}

/** The connection a proxied request is handled as: no socket peer, no client summaries. */
export function proxyConnection(agent: string | null): ConnectionState {
  return { id: 0, peer: undefined, initialized: true, client: { name: agent ?? 'proxy', version: '' }, canSummarize: false };
}

const STATUS: Record<ProxyErrorKind, number> = { invalid_request: 400, not_found: 404, api: 502, overloaded: 529 };

/** The wire's own error body with `status` (default by kind); a stream already under way is cut. */
export function sendError(res: http.ServerResponse, errorBody: (kind: ProxyErrorKind, message: string) => string, kind: ProxyErrorKind, message: string, status = STATUS[kind]): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = errorBody(kind, message);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Aborted when the agent goes away before its answer was complete. */
export function clientGone(req: http.IncomingMessage, res: http.ServerResponse): AbortController {
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort(new Error('the client disconnected'));
  });
  req.on('aborted', () => abort.abort(new Error('the client disconnected')));
  return abort;
}

/** Gets a decoded copy of a 2xx answer and is told at its end whether it arrived whole. */
export interface Tee {
  chunk(text: string): void;
  end(ok: boolean, status: number): Promise<void>;
}

/**
 * Forwards `body` upstream and streams the answer back as it arrives; `tee` reads a decoded
 * copy. With a `filter`, the client gets the filtered decoded text instead of the raw bytes
 * (its content-encoding and length dropped); an encoding the proxy cannot decode goes raw.
 */
export async function forward(call: ProxyCall, wire: Pick<Wire<unknown>, 'name' | 'errorBody'>, body: OutgoingBody, rewritten: boolean, signal: AbortSignal, tee?: Tee, filter?: ClientFilter | null): Promise<void> {
  const { req, res } = call;
  const url = upstreamUrl(call.upstream, call.path);
  let up: http.IncomingMessage;
  try {
    up = await sendUpstream(url, req.method ?? 'POST', upstreamHeaders(req.headers, body.length, rewritten), body, signal);
  } catch (err) {
    call.answering();
    if (signal.aborted) return;
    call.daemon.log.warn({ err, method: `proxy ${wire.name}`, upstream: url.origin }, 'the upstream could not be reached');
    sendError(res, wire.errorBody, 'api', `albedo proxy: the upstream ${url.origin} could not be reached (${(err as Error).message})`);
    return;
  }
  call.answering();
  const status = up.statusCode ?? 502;
  const ok = status >= 200 && status < 300;
  const decoder = (tee === undefined && (filter ?? null) === null) || !ok ? null : decoderFor(up.headers['content-encoding']);
  // The filter needs the text; an answer it cannot decode reaches the client as it came.
  const filtering = ok && filter !== undefined && filter !== null && decoder !== undefined;
  const headers = clientHeaders(up.headers);
  if (filtering) {
    delete headers['content-encoding'];
    delete headers['content-length'];
  }
  res.writeHead(status, headers);
  const onText = (s: string): void => {
    tee?.chunk(s);
    if (filtering) res.write(filter.chunk(s));
  };
  if (decoder !== null && decoder !== undefined) {
    decoder.setEncoding('utf8');
    decoder.on('data', onText);
    decoder.on('error', () => undefined);
  }
  let complete = false;
  up.on('data', (chunk: Buffer) => {
    if (!filtering) res.write(chunk);
    if (decoder !== null && decoder !== undefined) decoder.write(chunk);
    else if (decoder === null && ok) onText(chunk.toString('utf8'));
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
  if (filtering) res.write(filter.end());
  res.end();
  await tee?.end(complete && ok && !signal.aborted && decoder !== undefined, status);
}

/**
 * Not the conversation: no tools (title and topic calls), or one message on another model than
 * the session's (quota probes). Forwarded unchanged and only counted.
 */
function isSideRequest<M>(r: WireRequest<M>, sessionModel: string | null): boolean {
  if (r.tools.length === 0) return true;
  return r.conversation.length === 1 && sessionModel !== null && sessionModel !== r.model;
}

/** Counts a side request on the session its agent session is in, once its usage is known. */
function sideTee<M, R extends WireRequest<M>>(call: ProxyCall, wire: Wire<M, R>, streamed: boolean, sid: number | undefined): Tee {
  const reader = wire.reader(streamed);
  return {
    chunk: (t) => reader.chunk(t),
    end: async (ok) => {
      if (!ok || sid === undefined) return;
      const answer = reader.finish();
      countSideRequest(call.daemon.db, sid, answer?.usage?.inputTokens ?? 0, answer?.usage?.outputTokens ?? 0);
    },
  };
}

/** The model's own window from the catalog, for the output cap. */
function modelWindow(daemon: DaemonServices, model: string): number | undefined {
  return daemon.config().models.lookup(model)?.context_window;
}

/**
 * The output cap lowered so that input and output fit the model's own window (Anthropic refuses
 * a request whose input plus max_tokens exceed it), with what /context says about it.
 */
export function fitMaxTokens(maxTokens: number | undefined, input: number, window: number | undefined): { value: number | undefined; note: string | null } {
  if (maxTokens === undefined || window === undefined || input + maxTokens <= window) return { value: maxTokens, note: null };
  const room = window - input;
  if (room < 1) return { value: maxTokens, note: null };
  return { value: room, note: `max_tokens lowered from ${maxTokens} to ${room} so that input (~${input} tokens) and output fit the model's ${window}-token window` };
}

/** A request as the conversation and count endpoints read it, once its body parsed. */
export interface Opened<R> {
  abort: AbortController;
  request: R;
  id: Identity;
}

/**
 * Reads the request: its body as the wire's, and its identity. Null once it is dealt with: a
 * body that does not parse was answered with the provider's 400, and one in an encoding the
 * proxy cannot read was forwarded as it came.
 */
export async function openRequest<M, R extends WireRequest<M>>(call: ProxyCall, wire: Wire<M, R>): Promise<Opened<R> | null> {
  const abort = clientGone(call.req, call.res);
  const decoded = decodeBody(call.body, call.req.headers['content-encoding']);
  if (decoded === undefined) {
    await forward(call, wire, call.body, false, abort.signal);
    return null;
  }
  let json: unknown;
  try {
    json = call.bodies.parse(decoded, wire.historyKey);
  } catch (err) {
    sendError(call.res, wire.errorBody, 'invalid_request', `albedo proxy: the request body is not JSON (${(err as Error).message})`);
    return null;
  }
  const request = wire.read(json, call.req.headers, call.upstream);
  if ('error' in request) {
    sendError(call.res, wire.errorBody, 'invalid_request', `albedo proxy: ${request.error}`);
    return null;
  }
  return { abort, request, id: identify({ headers: call.req.headers, ...request.identity }) };
}

/** The payload store's bytes of an image, for a prepared image part. */
export function imageBytes(daemon: DaemonServices): ImageBytes {
  return (hash) => getPayload(daemon.db, hash)?.data.toString('base64');
}

/** The conversation endpoint of `wire`: reconcile, prepare, forward, record. */
export async function handleConversation<M, R extends WireRequest<M>>(call: ProxyCall, wire: Wire<M, R>): Promise<void> {
  const { daemon, res } = call;
  const method = `proxy ${wire.name}`;
  const opened = await openRequest(call, wire);
  if (opened === null) return;
  const { abort, request, id } = opened;
  // A side request opens with its own message: it belongs to the agent session's first
  // conversation, or without a session id to the namespace's latest session.
  const known = currentProxySession(daemon.db, id.identity) ?? firstOfFamily(daemon.db, id.family) ?? latestOfNamespace(daemon.db, id.namespace);
  const sessionModel = known === undefined ? null : lastModel(daemon.db, known.sid);
  if (request.conversation.length === 0 || isSideRequest(request, sessionModel)) {
    return forward(call, wire, call.body, false, abort.signal, sideTee(call, wire, request.stream, known?.sid));
  }
  if (request.uncompactable !== null) {
    // Server-side state (previous_response_id): the history is the provider's, not the request's.
    if (known !== undefined) notePassedThrough(daemon.db, known.sid, request.uncompactable);
    daemon.log.info({ session: known?.name ?? id.stem, method }, `forwarded unchanged: ${request.uncompactable}`);
    return forward(call, wire, call.body, false, abort.signal);
  }

  let target: ProxyTarget;
  let links: ChainLink[];
  let first: { body: OutgoingBody; preparedId: string };
  let memory: ToolSpec[] = [];
  let prepare: (last: boolean) => Promise<{ body: OutgoingBody; preparedId: string }>;
  let ctx: CallContext;
  try {
    if (daemon.settings.fault === 'proxy-prepare-fails') throw new Error('staged fault: the proxied prepare fails');
    const session = proxySessionFor(daemon.db, wire.name, id);
    const reconciled = await daemon.kernels.run(session.name, (kernel) => reconcile(daemon.db, wire, session, request.conversation, { maxImageBytes: daemon.settings.maxImageBytes, cache: kernel.cache }), 'transcript');
    daemon.rowsAdded();
    target = reconciled.target;
    links = reconciled.links;
    if (call.run !== null) noteRun(daemon.db, target.sid, call.run);
    if (reconciled.forkedFrom !== null) daemon.log.info({ session: target.name, from: reconciled.forkedFrom, method }, 'the history departed from the stored one; continuing in a fork');
    const summarizer = createSummarizer({ ...(daemon.config().extensions.summarizer ?? SummarizerConfig.parse({})), provider: 'upstream' }, { upstream: wire.summaryCall(call.req.headers, call.upstream, request.model) });
    // The agent owns its prompt: it goes out as sent and is only counted (PrepareArgs.clientPrompt).
    ctx = { daemon, conn: proxyConnection(id.agent), signal: abort.signal, summarizer, clientPrompt: request.prompt, method };
    const params: Params<'prepare'> = { session: target.name, model: request.model, provider: wire.provider(call.upstream), instructions: '', tools: request.tools, images: 'ref', force: false };
    const name = target.name;
    const callCtx = ctx;
    // Once for the agent's request, and again before each follow-up of a memory-tool turn.
    prepare = async (last) => {
      let maxTokens: ReturnType<typeof fitMaxTokens> = { value: request.maxTokens, note: null };
      const { result } = await daemon.kernels.run(name, (kernel) =>
        preparedRequest(params, callCtx, kernel, (p) => {
          maxTokens = fitMaxTokens(request.maxTokens, p.observation.calibrated_input_tokens ?? p.observation.estimated_input_tokens, modelWindow(daemon, request.model));
          return maxTokens.note === null ? [] : [maxTokens.note];
        }));
      if (!last && memory.length === 0 && wire.memoryTools !== undefined) memory = proxyMemoryTools(result.tools, request.tools, daemon.config().extensions.proxy.memoryTools);
      // With no instructions of the daemon's, `system` is the daemon's own block (extension context).
      const out = request.outgoing({ inputs: result.inputs, system: result.system }, imageBytes(daemon), maxTokens.value);
      const body = memory.length === 0 || wire.memoryTools === undefined ? out : wire.memoryTools.addTools(out, memory, last);
      return { body: encodeJson(body), preparedId: result.prepared_id };
    };
    first = await prepare(false);
  } catch (err) {
    if (abort.signal.aborted) return;
    if (err instanceof AlbedoError && err.code === 'invalid_proxy_request') {
      sendError(res, wire.errorBody, 'invalid_request', `albedo proxy: ${err.message}`);
      return;
    }
    // Failure is open: the agent's request goes up as it came.
    daemon.log.error({ err, session: id.stem, method }, 'the request could not be prepared; forwarding it unchanged');
    return forward(call, wire, call.body, false, abort.signal);
  }

  if (memory.length > 0) {
    const reportUsage = (preparedId: string, usage: AnswerUsage): Promise<void> => reportOn(daemon, method, target.name, preparedId, usage);
    try {
      await runTurn({ call, wire, request, target, links, ctx, tools: new Set(memory.map((t) => t.name)), first, prepareAgain: prepare, reportUsage, signal: abort.signal });
    } catch (err) {
      if (abort.signal.aborted) return;
      daemon.log.error({ err, session: target.name, method }, 'the memory-tool turn failed');
      sendError(res, wire.errorBody, 'api', 'albedo proxy: the memory-tool turn failed (see albedod.log)', 500);
    }
    return;
  }
  const preparedId = first.preparedId;
  const reader = wire.reader(request.stream);
  const tee: Tee = {
    chunk: (t) => reader.chunk(t),
    end: async (ok) => {
      if (!ok) return;
      const answer = reader.finish();
      if (answer === null) {
        daemon.log.warn({ session: target.name, method, why: reader.error }, 'the answer was not recorded');
        return;
      }
      await record(daemon, wire, target, links, answer, request.model, preparedId);
    },
  };
  await forward(call, wire, first.body, true, abort.signal, tee, request.clientFilter());
}

/** A round's usage, reported on the prepared request it answered, as usage.report does. */
async function reportOn(daemon: DaemonServices, method: string, session: string, preparedId: string, usage: AnswerUsage): Promise<void> {
  const ctx: CallContext = { daemon, conn: proxyConnection(null), signal: new AbortController().signal, method };
  await usageReport({ session, prepared_id: preparedId, input_tokens: usage.inputTokens, cached_tokens: usage.cachedTokens }, ctx);
}

/**
 * The answer becomes the conversation's next messages, and its usage the prepared request's
 * report. Called once the client has the whole answer; both are queued on the session at once,
 * so the agent's next request (and a socket client's read) finds them done.
 */
async function record<M, R extends WireRequest<M>>(daemon: DaemonServices, wire: Wire<M, R>, target: ProxyTarget, links: readonly ChainLink[], answer: Answer<M>, model: string, preparedId: string): Promise<void> {
  const method = `proxy ${wire.name}`;
  try {
    const stored = daemon.kernels.run(target.name, (kernel) => recordAnswer(daemon.db, wire, target, links, answer.messages, { model, cache: kernel.cache }), 'transcript');
    const reported = answer.usage !== null && answer.usage.inputTokens > 0 ? reportOn(daemon, method, target.name, preparedId, answer.usage) : undefined;
    await Promise.all([stored, reported]);
    daemon.rowsAdded();
  } catch (err) {
    daemon.log.error({ err, session: target.name, method }, 'the answer could not be recorded');
  }
}

/** Any other path of a wire (`/v1/models`, ...): forwarded as it came, nothing recorded. */
export function handlePassThrough(call: ProxyCall, wire: Pick<Wire<unknown>, 'name' | 'errorBody'>): Promise<void> {
  const abort = clientGone(call.req, call.res);
  return forward(call, wire, call.body, false, abort.signal);
}
