// The `client` backend: the summary is written by the connection that asked for the
// compaction, through the daemon's reverse `summarize` request. Sending that request (and
// knowing whether the connection declared the capability) is the daemon's; this file checks the answer.
import type { z } from 'zod';
import { reverseMethods } from '../../protocol/methods.ts';
import { startDeadline } from './deadline.ts';
import { textTokens } from '../estimate.ts';
import { summarizerFailed, type Summarizer, type SummaryRequest, type SummaryResult } from './types.ts';

/** Params of the reverse `summarize` request, as they go on the wire. */
export type ClientSummarizeParams = z.input<typeof reverseMethods.summarize.params>;
/** Sends the reverse request and resolves with the client's raw answer. */
export type ClientCall = (params: ClientSummarizeParams, signal?: AbortSignal) => Promise<unknown>;

/** Longest client error message quoted in ours (characters). */
const MAX_QUOTED = 300;

function describe(err: unknown): { message: string; remoteCode?: number } {
  const said = (err instanceof Error ? err.message : String(err)).slice(0, MAX_QUOTED);
  const code = err instanceof Error ? (err as Error & { code?: unknown }).code : undefined;
  // An error response from the client (RpcRemoteError) carries the numeric JSON-RPC code.
  if (typeof code === 'number') return { message: `client answered with an error: ${said}`, remoteCode: code };
  return { message: `summarize request failed: ${said}` };
}

/** Rejects with the signal's reason when it aborts first: a client that ignores cancellation cannot hold us. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([work, aborted]).finally(() => {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
  });
}

/**
 * `call` is absent when no connection that declared `summarize` is open for the session; summarize then
 * fails rather than silently switching backend. `timeoutMs` bounds the wait for the answer.
 */
export function createClientSummarizer(call: ClientCall | undefined, config: { timeoutMs: number }): Summarizer {
  return {
    backend: 'client',
    model: null,
    async summarize(req: SummaryRequest): Promise<SummaryResult> {
      if (call === undefined) {
        throw summarizerFailed('client', 'no_capability', 'no connection that answers summarize is open for this session');
      }
      if (req.signal?.aborted === true) throw summarizerFailed('client', 'cancelled', 'cancelled');
      const deadline = startDeadline(config.timeoutMs, req.signal);
      const signal = deadline.signal;
      const params: ClientSummarizeParams = {
        session: req.session,
        purpose: req.purpose,
        system: req.system,
        prompt: req.prompt,
        max_output_tokens: req.maxOutputTokens,
      };
      let answer: unknown;
      try {
        answer = await untilAborted(Promise.resolve().then(() => call(params, signal)), signal);
      } catch (err) {
        if (deadline.cancelled()) throw summarizerFailed('client', 'cancelled', 'cancelled');
        if (deadline.expired()) throw summarizerFailed('client', 'timeout', `timed out after ${config.timeoutMs} ms`);
        const { message, remoteCode } = describe(err);
        throw summarizerFailed('client', 'client_error', message, { remoteCode });
      } finally {
        deadline.dispose();
      }
      const parsed = reverseMethods.summarize.result.safeParse(answer);
      if (!parsed.success) {
        const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(answer)'}: ${i.message}`).join('; ');
        throw summarizerFailed('client', 'invalid_answer', `invalid answer: ${issues}`);
      }
      const text = parsed.data.text;
      if (text.trim() === '') throw summarizerFailed('client', 'empty_summary', 'empty summary');
      return { text, backend: 'client', model: null, outputTokens: textTokens(text) };
    },
  };
}
