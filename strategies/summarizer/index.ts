// The summarizer folder's edge: picks a backend for a compaction from the `summarizer` config and
// whether a connection answers summarize for the session, and re-exports what strategies need.
// Reading the config file, finding that connection and sending reverse requests are the daemon's.
import { createClientSummarizer, type ClientCall } from './client.ts';
import { createExtractiveSummarizer } from './extractive.ts';
import { createAnthropicSummarizer } from './http-anthropic.ts';
import { createOpenAISummarizer } from './http-openai.ts';
import type { Sleep } from './http.ts';
import { createUpstreamSummarizer, type UpstreamCall } from './upstream.ts';
import { capOutput } from './output-cap.ts';
import { summarizerFailed, type BackendName, type Summarizer, type SummarizerConfig } from './types.ts';

export type { ClientCall, ClientSummarizeParams } from './client.ts';
export { extractSummary } from './extractive.ts';
export { ANTHROPIC_DEFAULT_MODEL } from './http-anthropic.ts';
export { OPENAI_DEFAULT_MODEL } from './http-openai.ts';
export { TRUNCATION_MARKER } from './output-cap.ts';
export { BLOB_PLACEHOLDER, LINE_MARKERS, SECTION_TAGS, aiLine, buildSummaryPrompt, callLine, outLine, parseSummaryPrompt, parseTranscriptLine, redactBlobs, userLine } from './prompt-format.ts';
export type { SectionTag, SummaryPromptParts, TranscriptLine, TranscriptLineKind } from './prompt-format.ts';
export { BackendName, SummarizerConfig, summarizerFailed } from './types.ts';
export type { FailureReason, Summarizer, SummaryRequest, SummaryResult } from './types.ts';
export type { UpstreamCall } from './upstream.ts';

export interface SummarizerDeps {
  /** Where API keys are read from. Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Present when a connection that declared `capabilities.summarize` answers for the session (the caller or its agent). */
  clientCall?: ClientCall;
  /** Default the global fetch. */
  fetch?: typeof fetch;
  /** Waits between HTTP retries; for tests. */
  sleep?: Sleep;
  /** The upstream a proxied request goes to (daemon/proxy/): the `upstream` backend's target. */
  upstream?: UpstreamCall;
}

/** The backend `createSummarizer` would use: the configured provider, else client when possible, else extractive. */
export function chooseBackend(config: SummarizerConfig, hasClientCall: boolean, hasUpstream = false): BackendName {
  return config.provider ?? (hasUpstream ? 'upstream' : hasClientCall ? 'client' : 'extractive');
}

function createBackend(config: SummarizerConfig, deps: SummarizerDeps): Summarizer {
  const http = { env: deps.env, fetch: deps.fetch, sleep: deps.sleep };
  switch (chooseBackend(config, deps.clientCall !== undefined, deps.upstream !== undefined)) {
    case 'upstream':
      if (deps.upstream === undefined) return unavailable('upstream', 'only requests that come through the proxy have an upstream to summarize with');
      return createUpstreamSummarizer(deps.upstream, config, http);
    case 'client':
      return createClientSummarizer(deps.clientCall, config);
    case 'anthropic':
      return createAnthropicSummarizer(config, http);
    case 'openai':
      return createOpenAISummarizer(config, http);
    case 'extractive':
      return createExtractiveSummarizer();
  }
}

/** A backend that cannot serve this caller: every summary fails and says why. */
function unavailable(backend: BackendName, why: string): Summarizer {
  return {
    backend,
    model: null,
    summarize: () => Promise.reject(summarizerFailed(backend, 'no_capability', why)),
  };
}

/**
 * A summarizer for one compaction. `config` is the parsed `summarizer` section. An explicit
 * `provider: "client"` on a connection without the capability does not fall back: its
 * summarize fails, so a misconfiguration shows in `/context` instead of hiding. Whatever the
 * backend, its answers are held to the request's output cap (output-cap.ts).
 */
export function createSummarizer(config: SummarizerConfig, deps: SummarizerDeps = {}): Summarizer {
  return capOutput(createBackend(config, deps), config);
}
