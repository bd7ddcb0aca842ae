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

export type ProxyErrorKind = 'invalid_request' | 'api' | 'not_found' | 'overloaded';

export interface Wire<M, R extends WireRequest<M> = WireRequest<M>> extends MessageCodec<M> {
  /** Stored with the proxy session; the method name in logs is `proxy <name>`. */
  readonly name: string;
  /** The provider key prepare projects for: encrypted reasoning and opaque parts go back only to it. */
  provider(upstream: string): string;
  /** The body, or why it is not a request of this wire. */
  read(json: unknown, headers: IncomingHttpHeaders, upstream: string): R | { error: string };
  reader(streamed: boolean): AnswerReader<M>;
  /** The provider's own error body. */
  readonly errorBody: (kind: ProxyErrorKind, message: string) => string;
  /** The `upstream` summarizer's target: same endpoint and credentials as the request. */
  summaryCall(headers: IncomingHttpHeaders, upstream: string, model: string): UpstreamCall;
}
