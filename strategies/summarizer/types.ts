// The summarizer's contract: its configuration schema, one request and one result, the backend
// interface, and the single way a backend reports failure. Choosing a backend is index.ts's job;
// what a summary should say (system text, prompt sections) belongs to the strategies.
import { z } from 'zod';
import { AlbedoError } from '../../protocol/errors.ts';

export const BackendName = z.enum(['client', 'anthropic', 'openai', 'extractive', 'upstream']);
export type BackendName = z.output<typeof BackendName>;

/** The `summarizer` section of `extensions.json`. */
export const SummarizerConfig = z.strictObject({
  provider: BackendName.optional(),
  model: z.string().min(1).optional(),
  baseUrl: z.url().optional(),
  /** Name of the environment variable holding the API key (never the key itself). */
  apiKeyEnv: z.string().min(1).optional(),
  /** Bound on one summarize call, retries and backoff included (ms). */
  timeoutMs: z.number().int().positive().max(600_000).default(60_000),
  /** Extra attempts after a retryable HTTP failure (429/5xx, network errors). */
  maxRetries: z.number().int().min(0).max(5).default(2),
});
export type SummarizerConfig = z.output<typeof SummarizerConfig>;

export interface SummaryRequest {
  session: string;
  /** Which caller asks: 'rolling' | 'lcm' | 'notes' ...; passed through to a client backend. */
  purpose: string;
  system: string;
  /** Usually built with buildSummaryPrompt (prompt-format.ts). */
  prompt: string;
  /** Output cap, tokens. The extractive backend turns it into a byte budget of 4 bytes/token. */
  maxOutputTokens: number;
  /** Cancels the call; a cancelled call fails with reason 'cancelled' and is never retried. */
  signal?: AbortSignal;
  /**
   * What the output cap (output-cap.ts) does with an answer over `maxOutputTokens`: 'retry'
   * (the default) asks once more at a smaller cap before it cuts; 'cut' cuts at once, or fails
   * with `over_cap`, for a caller that runs its own retry at a limit of its choosing (lcm).
   */
  overCap?: 'retry' | 'cut';
}

export interface SummaryResult {
  text: string;
  backend: BackendName;
  /** Model that wrote the text as the provider named it, the configured one, or null (client, extractive). */
  model: string | null;
  /** Output tokens the backend reported, else estimated as ceil(UTF-8 bytes / 4). */
  outputTokens: number;
}

export interface Summarizer {
  readonly backend: BackendName;
  readonly model: string | null;
  summarize(req: SummaryRequest): Promise<SummaryResult>;
}

/** Why a summary failed; stable strings carried in the error's `details.reason`. */
export type FailureReason =
  | 'http_status'
  | 'network'
  | 'timeout'
  | 'cancelled'
  | 'invalid_response'
  | 'empty_summary'
  | 'missing_api_key'
  | 'no_capability'
  | 'client_error'
  | 'invalid_answer'
  /** Over `maxOutputTokens` even after the retry, with no sentence to cut at (output-cap.ts). */
  | 'over_cap';

/** The one constructor of summarizer failures. Callers must keep secrets out of `message`. */
export function summarizerFailed(
  backend: BackendName,
  reason: FailureReason,
  message: string,
  extra: { status?: number; attempts?: number; remoteCode?: number } = {},
): AlbedoError {
  const details: Record<string, unknown> = { backend, reason };
  if (extra.status !== undefined) details.status = extra.status;
  if (extra.attempts !== undefined) details.attempts = extra.attempts;
  if (extra.remoteCode !== undefined) details.remote_code = extra.remoteCode;
  return new AlbedoError('summarizer_failed', `${backend} summarizer: ${message}`, details);
}

/** Whether an error is the output cap's `over_cap` failure: an answer too long to cut at a sentence. */
export function isOverCap(err: unknown): err is AlbedoError {
  return err instanceof AlbedoError && err.code === 'summarizer_failed' && err.details?.reason === 'over_cap';
}
