// The one count of what a compaction asked of its summarizer. The engine wraps the session's
// summarizer once per preparation, hands the wrapper to the strategy and its layers, and reads
// the totals back for the compaction log and for the caller (the daemon notes where a client
// summary went only when one was asked for). Strategies and layers never count for themselves.
import { textTokens } from '../estimate.ts';
import type { Summarizer, SummaryRequest, SummaryResult } from './types.ts';

export interface MeteredSummarizer extends Summarizer {
  /** Calls made, including ones that failed. */
  readonly calls: number;
  /** Estimated tokens of every request sent (system and prompt), including ones that failed. */
  readonly tokensIn: number;
  /** Output tokens of every answer, as the backend reported them. */
  readonly tokensOut: number;
}

export function metered(inner: Summarizer): MeteredSummarizer {
  let calls = 0;
  let tokensIn = 0;
  let tokensOut = 0;
  return {
    backend: inner.backend,
    model: inner.model,
    get calls() {
      return calls;
    },
    get tokensIn() {
      return tokensIn;
    },
    get tokensOut() {
      return tokensOut;
    },
    async summarize(req: SummaryRequest): Promise<SummaryResult> {
      calls += 1;
      tokensIn += textTokens(req.system) + textTokens(req.prompt);
      const result = await inner.summarize(req);
      tokensOut += result.outputTokens;
      return result;
    },
  };
}
