// The `client` backend: the summary is written by the connection that asked for the
// compaction, through the daemon's reverse `summarize` request. Sending that request (and
// knowing whether the connection declared the capability) is the daemon's; this file checks the answer.
import type { z } from 'zod';
import { reverseMethods } from '../../protocol/methods.ts';
import { estimateTokens, summarizerFailed, type Summarizer, type SummaryRequest, type SummaryResult } from './types.ts';

/** Params of the reverse `summarize` request, as they go on the wire. */
export type ClientSummarizeParams = z.input<typeof reverseMethods.summarize.params>;
/** Sends the reverse request and resolves with the client's raw answer. */
export type ClientCall = (params: ClientSummarizeParams, signal?: AbortSignal) => Promise<unknown>;

function describe(err: unknown): { message: string; remoteCode?: number } {
  if (err instanceof Error) {
    const code = (err as Error & { code?: unknown }).code;
    // An error response from the client (RpcRemoteError) carries the numeric JSON-RPC code.
    if (typeof code === 'number') return { message: `client answered with an error: ${err.message}`, remoteCode: code };
    return { message: `summarize request failed: ${err.message}` };
  }
  return { message: `summarize request failed: ${String(err)}` };
}

/** A function, not a property test, so TypeScript does not keep an earlier narrowing across awaits. */
function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
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
 * `call` is absent when the requesting connection did not declare `summarize`; summarize then
 * fails rather than silently switching backend. `timeoutMs` bounds the wait for the answer.
 */
export function createClientSummarizer(call: ClientCall | undefined, config: { timeoutMs: number }): Summarizer {
  return {
    backend: 'client',
    model: null,
    async summarize(req: SummaryRequest): Promise<SummaryResult> {
      if (call === undefined) {
        throw summarizerFailed('client', 'no_capability', 'the requesting connection did not declare the summarize capability');
      }
      if (req.signal?.aborted === true) throw summarizerFailed('client', 'cancelled', 'cancelled');
      const deadline = AbortSignal.timeout(config.timeoutMs);
      const signal = req.signal === undefined ? deadline : AbortSignal.any([req.signal, deadline]);
      const params: ClientSummarizeParams = {
        session: req.session,
        purpose: req.purpose,
        system: req.system,
        prompt: req.prompt,
        max_output_tokens: req.maxOutputTokens,
      };
      let answer: unknown;
      try {
        answer = await untilAborted(
          Promise.resolve().then(() => call(params, signal)),
          signal,
        );
      } catch (err) {
        if (isAborted(req.signal)) throw summarizerFailed('client', 'cancelled', 'cancelled');
        if (deadline.aborted) throw summarizerFailed('client', 'timeout', `timed out after ${config.timeoutMs} ms`);
        const { message, remoteCode } = describe(err);
        throw summarizerFailed('client', 'client_error', message, { remoteCode });
      }
      const parsed = reverseMethods.summarize.result.safeParse(answer);
      if (!parsed.success) {
        const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(answer)'}: ${i.message}`).join('; ');
        throw summarizerFailed('client', 'invalid_answer', `invalid answer: ${issues}`);
      }
      const text = parsed.data.text;
      if (text.trim() === '') throw summarizerFailed('client', 'empty_summary', 'empty summary');
      return { text, backend: 'client', model: null, outputTokens: estimateTokens(text) };
    },
  };
}
