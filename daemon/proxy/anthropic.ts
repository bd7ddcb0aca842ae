// The Anthropic Messages wire through the proxy: its Wire (what conversation.ts needs to
// reconcile, prepare, forward and record a `POST /v1/messages`), and count_tokens, which is
// answered for the prepared request. The listener and the token are server.ts's.
import type { IncomingHttpHeaders } from 'node:http';
import type { Params } from '../../protocol/methods.ts';
import { ToolSpec } from '../../protocol/prepared.ts';
import { currentProxySession, messageChain } from '../../storage/log/proxy-state.ts';
import { textTokens } from '../../strategies/estimate.ts';
import type { CallContext } from '../context.ts';
import { previewPrepared } from '../prepare-pipeline.ts';
import { messagesSplicer } from './anthropic-splice.ts';
import { AnthropicStreamTee, answerFromJson } from './anthropic-stream.ts';
import { canonicalMessage, messagesRequest, type MessagesRequest, messageRows, messageText, placeCacheMarkers, preparedMessages, systemText, WIRE, wireError, type WireBlock, type WireMessage } from './anthropic-wire.ts';
import { placeClientPrompt, splitClientPrompt, type PlacedPrompt } from './client-prompt.ts';
import { forward, imageBytes, openRequest, proxyConnection, type ProxyCall } from './conversation.ts';
import { credentialOf, header } from './identity.ts';
import { matchChain } from './reconcile.ts';
import { clientHeaders, sendUpstream, upstreamHeaders, upstreamUrl } from './upstream.ts';
import type { Answer, AnswerReader, ProxyErrorKind, Wire, WireRequest } from './wire.ts';

function toolSpecs(tools: MessagesRequest['tools']): ToolSpec[] {
  return (tools ?? []).flatMap((t) => {
    const spec = ToolSpec.safeParse({ name: t.name, description: typeof t.description === 'string' ? t.description : '', input_schema: typeof t.input_schema === 'object' && t.input_schema !== null ? t.input_schema : {} });
    return spec.success ? [spec.data] : [];
  });
}

type SystemMessages = Array<PlacedPrompt<WireMessage>>;

/** Claude Code's `metadata.user_id`: a JSON string with device, account and session ids. */
function userIdFields(body: MessagesRequest): { account?: string; device?: string; session?: string } {
  const raw = body.metadata?.user_id;
  if (raw === undefined) return {};
  try {
    const v = JSON.parse(raw) as unknown;
    if (typeof v !== 'object' || v === null) return { account: raw };
    const r = v as Record<string, unknown>;
    const str = (x: unknown): string | undefined => (typeof x === 'string' && x !== '' ? x : undefined);
    return { account: str(r.account_uuid), device: str(r.device_id), session: str(r.session_id) };
  } catch {
    // An opaque user id (the API's own meaning) names the end user: a namespace.
    return { account: raw };
  }
}

/** The headers the `upstream` summarizer sends: the agent's credentials and API version. */
function summaryHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of ['x-api-key', 'authorization', 'anthropic-version']) {
    const v = header(headers, k);
    if (v !== undefined) out[k] = v;
  }
  return out;
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
function promptText(body: MessagesRequest, system: SystemMessages): string {
  return [systemText(body.system), ...system.map((s) => messageText(s.message))].filter((t) => t !== '').join('\n\n');
}

/** `max_tokens` as it goes out; a thinking budget must stay below it. */
function withMaxTokens(out: Record<string, unknown>, body: MessagesRequest, maxTokens: number | undefined): void {
  if (maxTokens === undefined || maxTokens === body.max_tokens) return;
  out.max_tokens = maxTokens;
  const thinking = out.thinking as { type?: unknown; budget_tokens?: unknown } | undefined;
  if (typeof thinking?.budget_tokens === 'number' && thinking.budget_tokens >= maxTokens) out.thinking = { ...thinking, budget_tokens: Math.max(1024, maxTokens - 1) };
}

/** Reads the answer from a decoded copy: an event stream through the tee, or one JSON body. */
class MessagesAnswerReader implements AnswerReader<WireMessage> {
  private readonly tee = new AnthropicStreamTee();
  private json = '';
  private why: string | null = null;

  constructor(private readonly streamed: boolean) {}

  chunk(text: string): void {
    if (this.streamed) this.tee.feed(text);
    else this.json += text;
  }

  finish(): Answer<WireMessage> | null {
    let a: ReturnType<typeof answerFromJson>;
    if (this.streamed) a = this.tee.finish();
    else {
      try {
        a = answerFromJson(JSON.parse(this.json));
        if (a === null) this.why = 'the body is not a Messages result';
      } catch (err) {
        this.why = `the body is not JSON (${(err as Error).message})`;
        return null;
      }
    }
    return a === null ? null : { messages: [a.message], usage: a.usage };
  }

  get error(): string | null {
    return this.streamed ? this.tee.error : this.why;
  }
}

const ERROR_TYPES: Record<ProxyErrorKind, Parameters<typeof wireError>[0]> = { invalid_request: 'invalid_request_error', api: 'api_error', not_found: 'not_found_error', overloaded: 'overloaded_error' };

/** A Messages body as the proxy reads it, with the agent's system-role messages kept aside. */
export interface MessagesRead extends WireRequest<WireMessage> {
  body: MessagesRequest;
  system: SystemMessages;
}

function readMessages(json: unknown): MessagesRead | { error: string } {
  const parsed = messagesRequest.check(json);
  if ('issue' in parsed) return { error: `not a Messages request: ${parsed.issue.path.join('.')}: ${parsed.issue.message}` };
  const body = parsed.data;
  const { conversation, prompt: system } = splitClientPrompt(body.messages, (m) => m.role === 'system');
  const fields = userIdFields(body);
  const first = conversation.find((m) => m.role === 'user');
  return {
    body,
    system,
    model: body.model,
    stream: body.stream === true,
    tools: toolSpecs(body.tools),
    conversation,
    prompt: promptText(body, system),
    maxTokens: body.max_tokens,
    uncompactable: null,
    identity: { account: fields.account ?? fields.device, sessionId: fields.session, prompt: systemText(body.system), opening: first === undefined ? '' : canonicalMessage(first) },
    outgoing(prepared, image, maxTokens) {
      const messages = placeCacheMarkers(placeClientPrompt(preparedMessages(prepared.inputs, image), system), { system: body.system, tools: body.tools, messages: body.messages });
      const out: Record<string, unknown> = { ...body, ...systemField(body.system, prepared.system), messages };
      withMaxTokens(out, body, maxTokens);
      return out;
    },
    clientFilter: () => null,
  };
}

/** Anthropic Messages (`POST /v1/messages`). */
export const anthropicWire: Wire<WireMessage, MessagesRead> = {
  name: WIRE,
  historyKey: 'messages',
  provider: () => WIRE,
  canonical: canonicalMessage,
  rows: messageRows,
  isAnswer: (m) => m.role === 'assistant',
  label: (m) => m.role,
  read(json, headers) {
    const r = readMessages(json);
    if ('error' in r) return r;
    // Claude Code names its session in a header as well as in metadata.
    const sessionId = header(headers, 'x-claude-code-session-id') ?? r.identity.sessionId;
    return { ...r, identity: { ...r.identity, sessionId } };
  },
  reader: (streamed) => new MessagesAnswerReader(streamed),
  errorBody: (kind, message) => wireError(ERROR_TYPES[kind], message),
  summaryCall: (headers, upstream, model) => ({ wire: 'anthropic', baseUrl: upstream, headers: summaryHeaders(headers), model, secret: credentialOf(headers) }),
  memoryTools: {
    addTools(body, tools, last) {
      const own = Array.isArray(body.tools) ? (body.tools as unknown[]) : [];
      const out: Record<string, unknown> = { ...body, tools: [...own, ...tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.input_schema }))] };
      if (last) out.tool_choice = { type: 'none' };
      return out;
    },
    splicer: (request, isMemoryTool) => messagesSplicer(request.stream, isMemoryTool),
  },
};

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
  const opened = await openRequest(call, anthropicWire);
  if (opened === null) return;
  const { abort, request, id } = opened;
  const { body, conversation, system } = request;
  const known = currentProxySession(daemon.db, id.identity);
  if (known === undefined) return forward(call, anthropicWire, call.body, false, abort.signal);
  let outgoing: Buffer;
  let estimate: number;
  try {
    const { matched, departed } = matchChain(anthropicWire, messageChain(daemon.db, known.sid), conversation);
    if (departed || matched === 0) return forward(call, anthropicWire, call.body, false, abort.signal);
    const ctx: CallContext = { daemon, conn: proxyConnection(id.agent), signal: abort.signal, clientPrompt: request.prompt, method: 'proxy anthropic count_tokens' };
    const params: Params<'prepare'> = { session: known.name, model: body.model, provider: WIRE, instructions: '', tools: request.tools, images: 'ref', force: false };
    const preview = await daemon.kernels.run(known.name, (kernel) => previewPrepared(params, ctx, kernel));
    const fresh = conversation.slice(matched);
    const messages = placeClientPrompt([...preparedMessages(preview.inputs, imageBytes(daemon)), ...fresh], system);
    outgoing = Buffer.from(JSON.stringify({ ...body, ...systemField(body.system, preview.system), messages }));
    const ratio = preview.observation.token_ratio;
    estimate = (preview.observation.calibrated_input_tokens ?? preview.observation.estimated_input_tokens) + Math.ceil(textTokens(JSON.stringify(fresh)) * ratio);
  } catch (err) {
    if (abort.signal.aborted) return;
    daemon.log.error({ err, session: known.name, method: 'proxy anthropic count_tokens' }, 'count_tokens could not be prepared; forwarding it unchanged');
    return forward(call, anthropicWire, call.body, false, abort.signal);
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
