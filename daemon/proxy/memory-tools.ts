// The memory tools behind the proxy: the session's enabled memory tools (transcript_grep,
// lcm_expand, ...) are added to what goes upstream, and when the model calls them the proxy runs
// them itself, stores the exchange, and asks the upstream again with the request prepared anew,
// up to MAX_ROUNDS times a turn. The agent never learns of them: the wire's TurnSplicer gives it
// one message with only its own tools' calls. Which tools, and the turn loop, are here; each
// wire's shapes are its splicer's (anthropic-splice.ts).
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { AlbedoError } from '../../protocol/errors.ts';
import type { ToolSpec } from '../../protocol/prepared.ts';
import type { RowIn } from '../../protocol/rows.ts';
import { durable } from '../../storage/db.ts';
import { noteMemoryCall, type ChainLink } from '../../storage/log/proxy-state.ts';
import type { CallContext } from '../context.ts';
import { toolsCall } from '../handlers/tools.ts';
import type { ProxyCall } from './conversation.ts';
import { appendRound, linkTurn, type ProxyTarget } from './reconcile.ts';
import { clientHeaders, decoderFor, sendUpstream, upstreamHeaders, upstreamUrl, type OutgoingBody } from './upstream.ts';
import type { AnswerUsage, MemoryCall, RoundOutcome, Wire, WireRequest } from './wire.ts';

/** Follow-ups a turn may send; the calls of the round after them get an error result, and the last follow-up allows no tools. */
export const MAX_ROUNDS = 8;

/** How an agent names our tools when it loads `albedo mcp` itself (Claude Code's convention). */
const MCP_PREFIX = 'mcp__albedo__';

/**
 * The memory tools the proxy adds for this request: those the prepared request offers beyond
 * the client's own, as `proxy.memoryTools` allows. None when the client already has them as an
 * MCP server's tools: those calls are the client's to run.
 */
export function proxyMemoryTools(prepared: readonly ToolSpec[], client: readonly ToolSpec[], setting: 'on' | 'off' | readonly string[]): ToolSpec[] {
  if (setting === 'off') return [];
  const mine = new Set(client.map((t) => t.name));
  if (client.some((t) => t.name.startsWith(MCP_PREFIX))) return [];
  return prepared.filter((t) => !mine.has(t.name) && (setting === 'on' || setting.includes(t.name)));
}

/** A call's result as a tool_result row: the tool's answer as JSON, or the error it gave. */
async function runCall(c: MemoryCall, session: string, ctx: CallContext, refused: string | null): Promise<{ row: RowIn; isError: boolean }> {
  const row = (text: string, isError: boolean): { row: RowIn; isError: boolean } => ({ row: { kind: 'tool_result', call_id: c.id, is_error: isError, content: [{ type: 'text', text }] }, isError });
  if (refused !== null) return row(refused, true);
  try {
    const { result } = await toolsCall({ session, name: c.name, arguments: c.arguments }, ctx);
    return row(JSON.stringify(result), false);
  } catch (err) {
    if (err instanceof AlbedoError) return row(`${err.code}: ${err.message}`, true);
    throw err;
  }
}

/** What the turn loop is handed by the conversation path. */
export interface Turn<M, R extends WireRequest<M>> {
  call: ProxyCall;
  wire: Wire<M, R>;
  request: R;
  target: ProxyTarget;
  links: ChainLink[];
  ctx: CallContext;
  /** Names of the tools the proxy runs. */
  tools: ReadonlySet<string>;
  first: { body: OutgoingBody; preparedId: string };
  /** The request prepared again over what is stored now (with `last`, tool use off). */
  prepareAgain(last: boolean): Promise<{ body: OutgoingBody; preparedId: string }>;
  /** Reports a round's usage on the prepared request it answered. */
  reportUsage(preparedId: string, usage: AnswerUsage): Promise<void>;
  signal: AbortSignal;
}

/** Sends one round upstream with the agent's headers; resolves once the response's headers arrive. */
function sendRound(call: ProxyCall, body: OutgoingBody, signal: AbortSignal): Promise<http.IncomingMessage> {
  return sendUpstream(upstreamUrl(call.upstream, call.path), call.req.method ?? 'POST', upstreamHeaders(call.req.headers, body.length, true), body, signal);
}

/** Reads a response whole through its decoder, handing each decoded piece to `onText`; false when it broke off. */
async function readAll(up: http.IncomingMessage, onText: (s: string) => void): Promise<boolean> {
  const decoder = decoderFor(up.headers['content-encoding']);
  if (decoder === undefined) {
    up.resume();
    return false;
  }
  let complete = false;
  if (decoder !== null) {
    decoder.setEncoding('utf8');
    decoder.on('data', onText);
  }
  await new Promise<void>((resolve) => {
    up.on('data', (chunk: Buffer) => (decoder === null ? onText(chunk.toString('utf8')) : decoder.write(chunk)));
    up.on('end', () => {
      complete = true;
      resolve();
    });
    up.on('error', () => resolve());
    up.on('close', () => resolve());
  });
  if (decoder !== null) await new Promise<void>((resolve) => decoder.end(resolve));
  return complete;
}

function withoutLength(headers: http.OutgoingHttpHeaders): http.OutgoingHttpHeaders {
  const out = { ...headers };
  delete out['content-encoding'];
  delete out['content-length'];
  return out;
}

/**
 * Runs one turn: round after round upstream while the model calls only the proxy's tools, the
 * client's stream fed as the rounds arrive. Each complete round is stored with its tool
 * results; the message the client saw is linked to them at the end.
 */
export async function runTurn<M, R extends WireRequest<M>>(t: Turn<M, R>): Promise<void> {
  const { call, wire, request, target, ctx, signal } = t;
  const { daemon, res } = call;
  const method = `proxy ${wire.name}`;
  const splicer = wire.memoryTools!.splicer(request, (name) => t.tools.has(name));
  const turnIdx = t.links.length;
  let round = 0;
  let next = t.first;
  let lastSeq = t.links.length === 0 ? 0 : t.links[t.links.length - 1]!.last_seq;
  for (;;) {
    let up: http.IncomingMessage;
    try {
      up = await sendRound(call, next.body, signal);
    } catch (err) {
      call.answering();
      if (signal.aborted) return;
      daemon.log.warn({ err, session: target.name, method, round }, 'the upstream could not be reached');
      return endWith(res, 502, wire.errorBody('api', `albedo proxy: the upstream could not be reached (${(err as Error).message})`), splicer, request.stream);
    }
    call.answering();
    const status = up.statusCode ?? 502;
    if (status < 200 || status >= 300) {
      // The upstream's refusal reaches the client as it came; a follow-up's ends the stream begun.
      if (!res.headersSent && round === 0) {
        res.writeHead(status, clientHeaders(up.headers));
        up.pipe(res);
        return;
      }
      let text = '';
      await readAll(up, (s) => (text += s));
      daemon.log.warn({ session: target.name, method, round, status }, 'a memory-tool follow-up was refused upstream');
      return endWith(res, status, text, splicer, request.stream, `albedo proxy: the follow-up after a memory-tool call failed upstream (${status}): ${text.slice(0, 500)}`);
    }
    if (request.stream && !res.headersSent) res.writeHead(status, withoutLength(clientHeaders(up.headers)));
    let raw = '';
    const whole = await readAll(up, (s) => {
      if (!request.stream) raw += s;
      const out = splicer.chunk(s);
      if (out !== '' && request.stream) res.write(out);
    });
    const outcome = whole && !signal.aborted ? splicer.endRound() : null;
    if (outcome === null) {
      // Not recorded; the client has what the upstream sent (an error event, a body it cannot read).
      if (signal.aborted) return;
      daemon.log.warn({ session: target.name, method, round, why: splicer.error ?? 'the answer broke off' }, 'the turn was not recorded');
      if (request.stream) res.end();
      else if (round === 0) {
        res.writeHead(status, clientHeaders(up.headers));
        res.end(raw);
      } else res.destroy();
      return;
    }
    if (outcome.memoryCalls.length === 0) {
      // Nothing left for the proxy to run: the client's message ends now, and the round is
      // stored after, so the agent never waits for the store (a long answer's packing, the
      // fsync). The store, the link and the usage report are queued on the session before this
      // turn yields; the agent's next request reconciles in the same queue (and a socket
      // client's transcript.rows or context waits in it), so each finds them done.
      const { text, visible } = splicer.finish();
      endMessage(res, request.stream, text);
      const rows = roundRows(t, outcome, []);
      const stored = daemon.kernels.run(
        target.name,
        async (kernel) => {
          if (daemon.settings.fault === 'proxy-store-held') await heldUntilReleased(path.join(daemon.paths.home, 'release-store'), signal);
          await appendRound(daemon.db, target, turnIdx, round, rows, (seq) => void linkTurn(daemon.db, wire, target, t.links, visible, Math.max(lastSeq, seq), kernel.cache));
        },
        'transcript',
      );
      const reported = outcome.usage !== null && outcome.usage.inputTokens > 0 ? t.reportUsage(next.preparedId, outcome.usage) : undefined;
      await Promise.all([stored, reported]);
      daemon.rowsAdded();
      return;
    }
    const refused = round >= MAX_ROUNDS ? `albedo proxy: at most ${MAX_ROUNDS} memory-tool rounds a turn; answer with what you have` : null;
    const results = await Promise.all(outcome.memoryCalls.map((c) => runCall(c, target.name, ctx, refused)));
    lastSeq = Math.max(lastSeq, await storeRound(t, turnIdx, round, outcome, results.map((r) => r.row)));
    if (outcome.usage !== null && outcome.usage.inputTokens > 0) await t.reportUsage(next.preparedId, outcome.usage);
    for (const [k, c] of outcome.memoryCalls.entries()) {
      noteMemoryCall(daemon.db, target.sid, {
        turn: turnIdx,
        round,
        name: c.name,
        arguments: c.arguments,
        isError: results[k]!.isError,
        inputTokens: outcome.usage?.inputTokens ?? 0,
        outputTokens: outcome.usage?.outputTokens ?? 0,
        now: Date.now(),
      });
    }
    // The client's own calls, or a round past the last (whose follow-up allowed no tools), end
    // the turn. The memory exchange is stored before the client gets its message, so that its
    // next request, which carries the client's results after that message, finds it.
    if (outcome.clientCalls || round > MAX_ROUNDS) break;
    round++;
    splicer.nextRound();
    next = await t.prepareAgain(round > MAX_ROUNDS);
  }
  const { text, visible } = splicer.finish();
  endMessage(res, request.stream, text);
  await daemon.kernels.run(
    target.name,
    async (kernel) => {
      linkTurn(daemon.db, wire, target, t.links, visible, lastSeq, kernel.cache);
      await durable(daemon.db);
    },
    'transcript',
  );
}

/** The staged fault `proxy-store-held`: waits until `file` exists. */
async function heldUntilReleased(file: string, signal: AbortSignal): Promise<void> {
  while (!fs.existsSync(file) && !signal.aborted) await new Promise((r) => setTimeout(r, 20));
}

/** Closes the client's message: the rest of its stream, or the whole body. */
function endMessage(res: http.ServerResponse, streamed: boolean, text: string): void {
  if (streamed) res.end(text);
  else {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }
}

/** The rows of a round: its answer (assistant rows carry the request's model), then the results of its memory calls. */
function roundRows<M, R extends WireRequest<M>>(t: Turn<M, R>, outcome: RoundOutcome<M>, results: readonly RowIn[]): RowIn[] {
  return [...outcome.messages.flatMap((m) => t.wire.rows(m)).map((r) => (r.kind === 'assistant' ? { ...r, model: t.request.model } : r)), ...results];
}

/** The round's answer and its tool results as rows, stored under the turn. */
async function storeRound<M, R extends WireRequest<M>>(t: Turn<M, R>, turnIdx: number, round: number, outcome: RoundOutcome<M>, results: readonly RowIn[]): Promise<number> {
  const seq = await t.call.daemon.kernels.run(t.target.name, () => appendRound(t.call.daemon.db, t.target, turnIdx, round, roundRows(t, outcome, results)), 'transcript');
  t.call.daemon.rowsAdded();
  return seq;
}

/** Ends the client's answer after a failure: a stream with the wire's error event, a body with the upstream's status. */
function endWith(res: http.ServerResponse, status: number, body: string, splicer: { fail(message: string): string }, streamed: boolean, message?: string): void {
  if (res.headersSent) {
    if (streamed) res.end(splicer.fail(message ?? body));
    else res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
