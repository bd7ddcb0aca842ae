// What the two OpenAI wires (Responses, Chat Completions) share: the error body OpenAI's API
// answers with, the headers a summary request carries, and where an OpenAI agent names its
// account. Each wire's own shapes are in openai-responses*.ts and openai-chat*.ts.
import type { IncomingHttpHeaders } from 'node:http';
import { credentialOf, header } from './identity.ts';
import type { ProxyErrorKind } from './wire.ts';
import type { UpstreamCall } from '../../strategies/summarizer/index.ts';

const ERROR_TYPES: Record<ProxyErrorKind, string> = { invalid_request: 'invalid_request_error', api: 'server_error', not_found: 'not_found_error', overloaded: 'server_overloaded' };

/** OpenAI's error body: `{"error": {"message", "type", "code"}}`. */
export function openaiError(kind: ProxyErrorKind, message: string): string {
  return JSON.stringify({ error: { message, type: ERROR_TYPES[kind], code: kind === 'invalid_request' ? 'invalid_request' : null } });
}

/** Headers a summary request carries: the agent's credential and the account it acts for. */
const SUMMARY_HEADERS = ['authorization', 'openai-organization', 'openai-project', 'chatgpt-account-id', 'originator', 'openai-beta'];

export function openaiSummaryCall(wire: 'openai-responses' | 'openai-chat', headers: IncomingHttpHeaders, upstream: string, model: string): UpstreamCall {
  const out: Record<string, string> = {};
  for (const k of SUMMARY_HEADERS) {
    const v = header(headers, k);
    if (v !== undefined) out[k] = v;
  }
  return { wire, baseUrl: upstream, headers: out, model, secret: credentialOf(headers) };
}

/**
 * The account an OpenAI agent names: a ChatGPT sign-in's `chatgpt-account-id` (its bearer token
 * refreshes, the account stays). Else undefined, and the credential's hash is the namespace.
 */
export function openaiAccount(headers: IncomingHttpHeaders): string | undefined {
  const chatgpt = header(headers, 'chatgpt-account-id');
  return chatgpt === undefined ? undefined : `chatgpt:${chatgpt}`;
}
