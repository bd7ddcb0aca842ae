// Holds every backend to the output cap of its request, in one place: an answer over
// `maxOutputTokens` is asked for once more with a smaller cap, and one still over is cut at a
// sentence with a visible marker (or fails). Backends know nothing of this; createSummarizer wraps them.
import { textTokens } from '../estimate.ts';
import { startDeadline } from './deadline.ts';
import { summarizerFailed, type BackendName, type Summarizer, type SummaryRequest, type SummaryResult } from './types.ts';

/** Appended, on its own line, to a summary that had to be cut. */
export const TRUNCATION_MARKER = '[summary truncated to fit its output cap]';

/** The retry asks for this share of the original cap, so a model that overshoots again still has room to. */
export const RETRY_SHARE = 0.5;

/** A cut keeping less than this share of the cap (tokens, marker not counted) counts as nothing sensible. */
export const MIN_KEPT_SHARE = 0.25;

/** A text ends a sentence here: after `.`, `!` or `?` followed by white space, or before a line break. */
const BOUNDARY = /[.!?](?=\s)|\n/g;

/**
 * The longest prefix of `text` that ends at a sentence (or line) boundary and, with the marker
 * on its own line, stays within `cap` tokens; undefined when no boundary leaves enough.
 *
 * textTokens is floor((bytes + 3) / 4), so "at most cap tokens" is "at most 4·cap bytes"; the
 * prefix gets that budget less the marker and its newline. A UTF-16 code unit is at least one
 * UTF-8 byte, so only the first budget code units can hold a fitting prefix, and the boundaries
 * are tried from the last one back until one fits.
 */
export function cutAtSentence(text: string, cap: number): string | undefined {
  const budget = 4 * Math.max(0, Math.floor(cap)) - Buffer.byteLength(TRUNCATION_MARKER, 'utf8') - 1;
  if (budget <= 0) return undefined;
  const head = text.slice(0, budget + 1);
  const ends: number[] = [];
  for (const m of head.matchAll(BOUNDARY)) ends.push(m[0] === '\n' ? m.index : m.index + 1);
  for (let i = ends.length - 1; i >= 0; i--) {
    const kept = head.slice(0, ends[i]).trimEnd();
    if (kept.trim() === '') return undefined;
    if (Buffer.byteLength(kept, 'utf8') > budget) continue;
    return textTokens(kept) >= cap * MIN_KEPT_SHARE ? `${kept}\n${TRUNCATION_MARKER}` : undefined;
  }
  return undefined;
}

/** An over-cap answer cut at its last sentence that fits (steps 3 and 4 below). */
function cutOrFail(backend: BackendName, answer: SummaryResult, cap: number): SummaryResult {
  const cut = cutAtSentence(answer.text, cap);
  if (cut === undefined) {
    throw summarizerFailed(backend, 'over_cap', `the answer (~${textTokens(answer.text)} tokens) exceeds the ${cap}-token output cap and no sentence ends early enough to cut it`);
  }
  return { ...answer, text: cut };
}

function isCancelled(req: SummaryRequest): boolean {
  return req.signal?.aborted === true;
}

/**
 * Wraps a backend so that no answer longer than the request's `maxOutputTokens` (textTokens,
 * the estimate the strategies size everything with) ever leaves it.
 *
 * 1. An answer within the cap goes out as it came.
 * 2. An answer over the cap is asked for once more: the cap becomes RETRY_SHARE of the original
 *    and the system text says how long the first answer was. The retry shares the call's
 *    `timeoutMs` with the first attempt, so the whole call stays within one timeout. A request
 *    with `overCap: 'cut'` skips this step: its caller retries on its own terms.
 * 3. A retry within the original cap goes out. Otherwise the shorter of the two answers is cut
 *    at its last sentence that fits, with TRUNCATION_MARKER on a line of its own; a retry that
 *    failed (other than by the caller cancelling) leaves the first answer to cut.
 * 4. When no sentence boundary leaves MIN_KEPT_SHARE of the cap, the call fails with reason
 *    `over_cap`: a stub would replace a summary that the caller still has.
 * `outputTokens` adds up both attempts, since both were paid for.
 */
export function capOutput(inner: Summarizer, config: { timeoutMs: number }): Summarizer {
  return {
    backend: inner.backend,
    model: inner.model,
    async summarize(req: SummaryRequest): Promise<SummaryResult> {
      const cap = req.maxOutputTokens;
      const deadline = startDeadline(config.timeoutMs, req.signal);
      try {
        const first = await inner.summarize(req);
        const firstTokens = textTokens(first.text);
        if (firstTokens <= cap) return first;
        if (req.overCap === 'cut') return cutOrFail(inner.backend, first, cap);

        const smaller = Math.max(1, Math.floor(cap * RETRY_SHARE));
        let second: SummaryResult | undefined;
        try {
          second = await inner.summarize({
            ...req,
            system: `${req.system}\n\nYour previous answer was about ${firstTokens} tokens, over the limit of ${cap}. Write it again in at most ${smaller} tokens.`,
            maxOutputTokens: smaller,
            signal: deadline.signal,
          });
        } catch (err) {
          if (isCancelled(req)) throw err;
        }
        const outputTokens = first.outputTokens + (second?.outputTokens ?? 0);
        if (second !== undefined && textTokens(second.text) <= cap) return { ...second, outputTokens };

        const shorter = second !== undefined && textTokens(second.text) < firstTokens ? second : first;
        return cutOrFail(inner.backend, { ...shorter, outputTokens }, cap);
      } finally {
        deadline.dispose();
      }
    },
  };
}
