// The `upstream` backend: a proxied session's summaries go to the same provider endpoint, with
// the agent's own credentials and model (or the configured `model`), in the wire the agent
// speaks: Messages, Responses or Chat Completions. One request per summary, no tools.
// Retries, deadline and error wording are http.ts's.
import { z } from 'zod';
import { ANTHROPIC_VERSION, readMessages } from './http-anthropic.ts';
import { outputLimitField, readChat } from './http-openai.ts';
import { joinUrl, summarizeOverHttp, type HttpDeps, type ReadOutcome } from './http.ts';
import { summarizerFailed, type Summarizer, type SummarizerConfig, type SummaryRequest, type SummaryResult } from './types.ts';

/**
 * Where a proxied session's requests go (daemon/proxy/): the wire, the upstream's root, the
 * agent's own headers (its credentials and API version, held in memory only), and the model.
 */
export interface UpstreamCall {
  wire: 'anthropic' | 'openai-responses' | 'openai-chat';
  baseUrl: string;
  headers: Record<string, string>;
  model: string;
  /** The credential inside `headers`, scrubbed from every error message. */
  secret: string | null;
}

const ResponsesResult = z.looseObject({
  model: z.string().optional(),
  status: z.string().optional(),
  output: z.array(z.looseObject({ type: z.string(), content: z.array(z.looseObject({ type: z.string(), text: z.string().optional() })).optional() })),
  usage: z.looseObject({ output_tokens: z.number().int().nonnegative().optional() }).nullish(),
});

export function readResponses(json: unknown): ReadOutcome {
  const parsed = ResponsesResult.safeParse(json);
  if (!parsed.success) return 'response is not a Responses result (no output array)';
  const texts = parsed.data.output.filter((o) => o.type === 'message').flatMap((o) => (o.content ?? []).filter((c) => c.type === 'output_text' && typeof c.text === 'string').map((c) => c.text!));
  if (texts.length === 0) return `response has no output text${parsed.data.status === undefined ? '' : ` (status: ${parsed.data.status})`}`;
  return { text: texts.join(''), outputTokens: parsed.data.usage?.output_tokens ?? undefined, model: parsed.data.model };
}

/** The summary request in the agent's wire: path, extra headers, body and how to read the answer. */
function requestFor(upstream: UpstreamCall, model: string, req: SummaryRequest): { path: string; headers: Record<string, string>; body: Record<string, unknown>; read: (json: unknown) => ReadOutcome } {
  switch (upstream.wire) {
    case 'anthropic':
      return {
        path: 'v1/messages',
        headers: { 'anthropic-version': ANTHROPIC_VERSION },
        body: { model, max_tokens: req.maxOutputTokens, system: req.system, messages: [{ role: 'user', content: req.prompt }] },
        read: readMessages,
      };
    case 'openai-responses':
      return {
        path: 'responses',
        headers: {},
        body: { model, instructions: req.system, input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: req.prompt }] }], max_output_tokens: req.maxOutputTokens, store: false },
        read: readResponses,
      };
    case 'openai-chat':
      return {
        path: 'chat/completions',
        headers: {},
        body: { model, [outputLimitField(upstream.baseUrl)]: req.maxOutputTokens, messages: [{ role: 'system', content: req.system }, { role: 'user', content: req.prompt }] },
        read: readChat,
      };
  }
}

export function createUpstreamSummarizer(upstream: UpstreamCall, config: SummarizerConfig, deps: HttpDeps = {}): Summarizer {
  const model = config.model ?? upstream.model;
  return {
    backend: 'upstream',
    model,
    async summarize(req: SummaryRequest): Promise<SummaryResult> {
      if (req.signal?.aborted === true) throw summarizerFailed('upstream', 'cancelled', 'cancelled');
      const r = requestFor(upstream, model, req);
      return summarizeOverHttp(
        {
          backend: 'upstream',
          url: joinUrl(upstream.baseUrl, r.path),
          headers: { ...r.headers, ...upstream.headers, 'content-type': 'application/json' },
          body: r.body,
          read: r.read,
          secrets: upstream.secret === null ? [] : [upstream.secret],
        },
        config,
        req,
        deps,
        model,
      );
    },
  };
}
