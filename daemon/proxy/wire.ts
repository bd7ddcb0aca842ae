// What the proxy needs of a provider's wire, so that one conversation path (conversation.ts)
// serves Anthropic Messages, OpenAI Responses and OpenAI Chat Completions alike. A wire reads
// its request body, turns its messages into transcript rows, writes the prepared request back
// in its own shape, reads the answer (streamed or not) and speaks its own error body. Sessions,
// reconcile, forwarding and the prepare pipeline are shared and know nothing of the shapes.
import type { IncomingHttpHeaders } from 'node:http';
import type { PlainInput, ToolSpec } from '../../protocol/prepared.ts';
import type { RowIn } from '../../protocol/rows.ts';
import type { UpstreamCall } from '../../strategies/summarizer/index.ts';
import type { IdentitySource } from './identity.ts';

/** What the upstream reported for the request and the answer, in its own token counts. */
export interface AnswerUsage {
  /** All input the upstream read, cached or not. */
  inputTokens: number;
  /** The part of it read from the provider's cache. */
  cachedTokens: number;
  outputTokens: number;
}

/** The upstream's answer as conversation messages (the next ones of the chain), with its usage. */
export interface Answer<M> {
  messages: M[];
  usage: AnswerUsage | null;
}

/** Builds the answer from a decoded copy of the upstream's body as it arrives. */
export interface AnswerReader<M> {
  chunk(text: string): void;
  /** The answer, or null (and `error` says why) for one that must not be recorded. */
  finish(): Answer<M> | null;
  readonly error: string | null;
}

/**
 * Rewrites what the client receives of a streamed answer (decoded text in, text out). Only for
 * an option the proxy itself added upstream: the client must not see what it did not ask for.
 */
export interface ClientFilter {
  chunk(text: string): string;
  end(): string;
}

/** How reconcile treats one conversation message. */
export interface MessageCodec<M> {
  /** The one form its chain hash is taken over: what clients change between requests removed. */
  canonical(m: M): string;
  /** The transcript rows it becomes, without keys (reconcile adds them). */
  rows(m: M): RowIn[];
  /** Whether it is the model's: a recorded answer the client sends back in another shape is the same turn. */
  isAnswer(m: M): boolean;
  /** Names it in an error (`user`, `assistant`, `function_call`). */
  label(m: M): string;
}

/** The prepared request, as the proxy maps it back. */
export interface PreparedForWire {
  inputs: readonly PlainInput[];
  /** The daemon's own context (extension note); empty when it has none. */
  system: string;
}

/** Image bytes for a prepared image part, by hash (base64); undefined when gone. */
export type ImageBytes = (hash: string) => string | undefined;

/** One request body as a wire read it. */
export interface WireRequest<M> {
  model: string;
  stream: boolean;
  /** The client's tools, for the estimate; none means a side request. */
  tools: ToolSpec[];
  /** The conversation: the client's messages without its own prompt. */
  conversation: M[];
  /** The client's own prompt as text (its system, instructions, system-role messages): counted, never compacted. */
  prompt: string;
  /** The output cap the client asked for, if any. */
  maxTokens: number | undefined;
  /** Set when the proxy must forward the request as it came, with the reason /context gives. */
  uncompactable: string | null;
  /** Who sent it (identity.ts turns this into the session's identity). */
  identity: Omit<IdentitySource, 'headers'>;
  /** The body that goes upstream: the prepared history in the client's shape, everything else as sent. */
  outgoing(prepared: PreparedForWire, image: ImageBytes, maxTokens: number | undefined): Record<string, unknown>;
  /** A filter for what the client sees of the answer, when `outgoing` asked the upstream for more than the client did. */
  clientFilter(): ClientFilter | null;
}

/** One call of a tool the proxy runs itself (a memory tool). */
export interface MemoryCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

/** What one round of a turn was, once its answer arrived whole. */
export interface RoundOutcome<M> {
  /** The round's answer as the upstream sent it: what is stored, and what later requests carry upstream. */
  messages: M[];
  usage: AnswerUsage | null;
  /** Its calls of the proxy's tools, held back from the client. */
  memoryCalls: MemoryCall[];
  /** Whether it also called the client's own tools: the turn then ends with this round. */
  clientCalls: boolean;
}

/**
 * Reads a turn whose memory-tool calls the proxy answers itself, round by round, and writes
 * the one message the client sees: the rounds' blocks spliced together, the proxy's tool calls
 * left out, indexes consecutive, one start and one end (memory-tools.ts drives it).
 */
export interface TurnSplicer<M> {
  /** Decoded upstream text of the current round; answers what the client gets now ('' while held). */
  chunk(text: string): string;
  /** The current round's answer is complete: what it was, or null (and `error`) when it cannot be read. */
  endRound(): RoundOutcome<M> | null;
  /** Another round follows; its text comes through `chunk` next. */
  nextRound(): void;
  /** The turn is over: what closes the client's message (for a body not streamed, the whole body), and that message. */
  finish(): { text: string; visible: M[] };
  /** A follow-up failed after the client's stream began: the wire's error event that ends it. */
  fail(message: string): string;
  readonly error: string | null;
}

export type ProxyErrorKind = 'invalid_request' | 'api' | 'not_found' | 'overloaded';

export interface Wire<M, R extends WireRequest<M> = WireRequest<M>> extends MessageCodec<M> {
  /** Stored with the proxy session; the method name in logs is `proxy <name>`. */
  readonly name: string;
  /** The body's top-level member that holds the history (`messages`, `input`): what body-memo.ts shares between requests. */
  readonly historyKey: string;
  /** The provider key prepare projects for: encrypted reasoning and opaque parts go back only to it. */
  provider(upstream: string): string;
  /** The body, or why it is not a request of this wire. */
  read(json: unknown, headers: IncomingHttpHeaders, upstream: string): R | { error: string };
  reader(streamed: boolean): AnswerReader<M>;
  /** The provider's own error body. */
  readonly errorBody: (kind: ProxyErrorKind, message: string) => string;
  /** The `upstream` summarizer's target: same endpoint and credentials as the request. */
  summaryCall(headers: IncomingHttpHeaders, upstream: string, model: string): UpstreamCall;
  /**
   * The proxy's own tools on a wire that can run them (memory-tools.ts): the outgoing body
   * with them added (and with `last`, tool use switched off), and the turn's splicer.
   */
  readonly memoryTools?: {
    addTools(body: Record<string, unknown>, tools: readonly ToolSpec[], last: boolean): Record<string, unknown>;
    splicer(request: R, isMemoryTool: (name: string) => boolean): TurnSplicer<M>;
  };
}
