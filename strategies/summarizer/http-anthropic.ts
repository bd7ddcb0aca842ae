// The `anthropic` backend: one Messages API request per summary, no tools, key from an
// environment variable. Retries, deadline and error wording are http.ts's; prompts are the caller's.
import { z } from 'zod';
import { joinUrl, summarizeOverHttp, type HttpDeps, type ReadOutcome } from './http.ts';
import { summarizerFailed, type Summarizer, type SummarizerConfig, type SummaryRequest, type SummaryResult } from './types.ts';

export const ANTHROPIC_DEFAULT_MODEL = 'claude-haiku-4-5';
export const ANTHROPIC_DEFAULT_BASE_URL = 'https://api.anthropic.com';
export const ANTHROPIC_DEFAULT_KEY_ENV = 'ANTHROPIC_API_KEY';
export const ANTHROPIC_VERSION = '2023-06-01';

const MessagesResponse = z.object({
  model: z.string().optional(),
  stop_reason: z.string().nullable().optional(),
  content: z.array(z.object({ type: z.string(), text: z.string().optional() }).loose()),
  usage: z.object({ output_tokens: z.number().int().nonnegative().optional() }).loose().optional(),
});

export function readMessages(json: unknown): ReadOutcome {
  const parsed = MessagesResponse.safeParse(json);
  if (!parsed.success) return 'response is not a Messages API result (no content array)';
  const texts = parsed.data.content.filter((b) => b.type === 'text' && typeof b.text === 'string');
  if (texts.length === 0) {
    const why = parsed.data.stop_reason ? ` (stop_reason: ${parsed.data.stop_reason})` : '';
    return `response has no text content${why}`;
  }
  return {
    text: texts.map((b) => b.text).join(''),
    outputTokens: parsed.data.usage?.output_tokens,
    model: parsed.data.model,
  };
}

export function createAnthropicSummarizer(config: SummarizerConfig, deps: HttpDeps = {}): Summarizer {
  const model = config.model ?? ANTHROPIC_DEFAULT_MODEL;
  const keyEnv = config.apiKeyEnv ?? ANTHROPIC_DEFAULT_KEY_ENV;
  const url = joinUrl(config.baseUrl ?? ANTHROPIC_DEFAULT_BASE_URL, 'v1/messages');
  return {
    backend: 'anthropic',
    model,
    async summarize(req: SummaryRequest): Promise<SummaryResult> {
      const key = (deps.env ?? process.env)[keyEnv];
      if (key === undefined || key === '') {
        throw summarizerFailed('anthropic', 'missing_api_key', `environment variable ${keyEnv} is not set`);
      }
      if (req.signal?.aborted === true) throw summarizerFailed('anthropic', 'cancelled', 'cancelled');
      return summarizeOverHttp(
        {
          backend: 'anthropic',
          url,
          headers: { 'x-api-key': key, 'anthropic-version': ANTHROPIC_VERSION, 'content-type': 'application/json' },
          body: {
            model,
            max_tokens: req.maxOutputTokens,
            system: req.system,
            messages: [{ role: 'user', content: req.prompt }],
          },
          read: readMessages,
          secrets: [key],
        },
        config,
        req,
        deps,
        model,
      );
    },
  };
}
