// What the two HTTP backends share: one POST with a deadline, retries with backoff, error
// bodies turned into precise messages, and a 2xx body read into text. The wire format of each
// provider (URL, headers, body, where the text is) stays in http-anthropic.ts / http-openai.ts.
import { startDeadline } from './deadline.ts';
import { textTokens } from '../estimate.ts';
import { summarizerFailed, type BackendName, type FailureReason, type SummaryResult } from './types.ts';

export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

export interface HttpDeps {
  /** Where API keys are read from. Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Default the global fetch. */
  fetch?: typeof fetch;
  /** Waits between attempts; rejects when the signal aborts. Tests pass one that records delays. */
  sleep?: Sleep;
}

/** What a provider's 2xx body yields; a string instead says why it holds no text. */
export type ReadOutcome = { text: string; outputTokens?: number; model?: string } | string;

export interface HttpSummaryCall {
  backend: Extract<BackendName, 'anthropic' | 'openai' | 'upstream'>;
  url: string;
  headers: Record<string, string>;
  body: unknown;
  read: (json: unknown) => ReadOutcome;
  /** Values scrubbed from every message (the API key). */
  secrets: readonly string[];
  /** Added to a 401/403 message, e.g. that no key was sent. */
  authHint?: string;
}

export interface HttpCallOptions {
  /** Bound on the whole call, retries and waits included (ms). */
  timeoutMs: number;
  /** Extra attempts after a retryable failure. */
  maxRetries: number;
  signal?: AbortSignal;
  fetch: typeof fetch;
  sleep: Sleep;
}

/** Statuses worth another attempt: rate limits, overload (Anthropic's 529), gateway trouble. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 500, 502, 503, 504, 529]);
export const BACKOFF_BASE_MS = 250;
export const BACKOFF_MAX_MS = 5000;
/** Longest provider error message quoted in ours (characters). */
const MAX_QUOTED = 300;

export const defaultSleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });

/** Removes the given secrets and anything shaped like an API key or bearer token. */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join('[redacted]');
  return out
    .replace(/\b(sk|pk|rk)-[A-Za-z0-9_*.-]{6,}/g, '[redacted]')
    .replace(/\bBearer\s+\S+/gi, 'Bearer [redacted]');
}

function quote(text: string, secrets: readonly string[]): string {
  const flat = scrubSecrets(text, secrets).replace(/\s+/g, ' ').trim();
  return flat.length > MAX_QUOTED ? `${flat.slice(0, MAX_QUOTED)}…` : flat;
}

/**
 * The provider's own explanation in an error body: `error.message` (Anthropic, OpenAI),
 * a string `error` (Ollama, llama.cpp), `message` or `detail` (vLLM and other servers), or
 * a short plain-text body (proxies). Undefined when there is nothing readable.
 */
export function providerMessage(raw: string): string | undefined {
  const trimmed = raw.trim();
  if (trimmed === '') return undefined;
  let json: unknown;
  try {
    json = JSON.parse(trimmed);
  } catch {
    return trimmed.length <= 200 && !trimmed.startsWith('<') ? trimmed : undefined;
  }
  if (typeof json !== 'object' || json === null) return undefined;
  const o = json as Record<string, unknown>;
  const err = o.error;
  if (typeof err === 'string') return err;
  if (typeof err === 'object' && err !== null) {
    const m = (err as Record<string, unknown>).message;
    if (typeof m === 'string' && m !== '') return m;
  }
  if (typeof o.message === 'string') return o.message;
  if (typeof o.detail === 'string') return o.detail;
  return undefined;
}

/** `retry-after-ms`, else `retry-after` as seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(headers: Headers, now = Date.now()): number | undefined {
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '' && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Number(ms);
  const ra = headers.get('retry-after');
  if (ra === null || ra.trim() === '') return undefined;
  const seconds = Number(ra);
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1000 : undefined;
  const date = Date.parse(ra);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Wait before attempt `attempt + 1` (attempt counts from 0): the server's word, else 250·2^attempt; at most 5 s. */
export function backoffMs(attempt: number, serverSays: number | undefined): number {
  const wanted = serverSays ?? BACKOFF_BASE_MS * 2 ** attempt;
  return Math.min(BACKOFF_MAX_MS, Math.max(0, Math.round(wanted)));
}

interface Failure {
  reason: FailureReason;
  message: string;
  status?: number;
  retryable: boolean;
  retryAfter?: number;
}
type Attempt = { ok: true; text: string; outputTokens?: number; model?: string } | ({ ok: false } & Failure);

function networkMessage(err: unknown): string {
  const cause = err instanceof Error ? (err as Error & { cause?: unknown }).cause : undefined;
  const pick = (e: unknown): string | undefined => {
    if (!(e instanceof Error)) return undefined;
    const code = (e as Error & { code?: unknown }).code;
    return typeof code === 'string' ? `${code} (${e.message})` : e.message;
  };
  return pick(cause) ?? pick(err) ?? String(err);
}

/**
 * Posts one summary request and returns its text. Every attempt shares one deadline
 * (`timeoutMs` from the start of the call), combined with the caller's signal, so the caller
 * waits at most timeoutMs whatever the retries. Retryable failures (RETRY_STATUSES and network
 * errors) are tried again up to maxRetries times after backoffMs; anything else, a timeout,
 * or the caller cancelling ends the call at once. Failures throw summarizer_failed.
 */
export async function postSummary(
  call: HttpSummaryCall,
  opts: HttpCallOptions,
): Promise<{ text: string; outputTokens?: number; model?: string }> {
  const deadline = startDeadline(opts.timeoutMs, opts.signal);
  const signal = deadline.signal;
  const fail = (f: Failure, attempts: number): Error => summarizerFailed(call.backend, f.reason, f.message, { status: f.status, attempts });
  const stopped = (): Failure =>
    deadline.cancelled()
      ? { reason: 'cancelled', message: 'cancelled', retryable: false }
      : { reason: 'timeout', message: `timed out after ${opts.timeoutMs} ms`, retryable: false };

  const attemptOnce = async (): Promise<Attempt> => {
    let res: Response;
    let raw: string;
    try {
      res = await opts.fetch(call.url, {
        method: 'POST',
        headers: call.headers,
        body: JSON.stringify(call.body),
        signal,
      });
      raw = await res.text();
    } catch (err) {
      if (signal.aborted) return { ok: false, ...stopped() };
      return { ok: false, reason: 'network', message: `network error: ${quote(networkMessage(err), call.secrets)}`, retryable: true };
    }
    const status = res.status;
    if (status < 200 || status > 299) {
      const said = providerMessage(raw);
      let message = `HTTP ${status}${said !== undefined ? `: ${quote(said, call.secrets)}` : ''}`;
      if ((status === 401 || status === 403) && call.authHint !== undefined) message += ` (${call.authHint})`;
      return {
        ok: false,
        reason: 'http_status',
        message,
        status,
        retryable: RETRY_STATUSES.has(status),
        retryAfter: retryAfterMs(res.headers),
      };
    }
    const bad = (message: string): Attempt => ({ ok: false, reason: 'invalid_response', message, status, retryable: false });
    if (raw.trim() === '') return bad(`empty response body (HTTP ${status})`);
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch {
      return bad(`response is not JSON (HTTP ${status}): ${quote(raw.slice(0, 80), call.secrets)}`);
    }
    const read = call.read(json);
    if (typeof read === 'string') return bad(read);
    if (read.text.trim() === '') {
      return { ok: false, reason: 'empty_summary', message: 'empty summary', status, retryable: false };
    }
    return { ok: true, ...read };
  };

  try {
    for (let attempt = 0;; attempt++) {
      const outcome = await attemptOnce();
      if (outcome.ok) return { text: outcome.text, outputTokens: outcome.outputTokens, model: outcome.model };
      if (!outcome.retryable || attempt >= opts.maxRetries) {
        const failure = { ...outcome };
        if (outcome.retryable && opts.maxRetries > 0) failure.message += ` (after ${attempt + 1} attempts)`;
        throw fail(failure, attempt + 1);
      }
      try {
        await opts.sleep(backoffMs(attempt, outcome.retryAfter), signal);
      } catch {
        throw fail(stopped(), attempt + 1);
      }
      if (signal.aborted) throw fail(stopped(), attempt + 1);
    }
  } finally {
    deadline.dispose();
  }
}

/** `${base}${path}` with exactly one slash between them. */
export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, '')}/${path.replace(/^\/+/, '')}`;
}

/**
 * One summary over HTTP with the configured deadline and retries, as a SummaryResult: the
 * part both HTTP backends share once they have built their request.
 */
export async function summarizeOverHttp(
  call: HttpSummaryCall,
  config: { timeoutMs: number; maxRetries: number },
  req: { signal?: AbortSignal | undefined },
  deps: HttpDeps,
  model: string,
): Promise<SummaryResult> {
  const out = await postSummary(call, {
    timeoutMs: config.timeoutMs,
    maxRetries: config.maxRetries,
    signal: req.signal,
    fetch: deps.fetch ?? fetch,
    sleep: deps.sleep ?? defaultSleep,
  });
  return { text: out.text, backend: call.backend, model: out.model ?? model, outputTokens: out.outputTokens ?? textTokens(out.text) };
}
