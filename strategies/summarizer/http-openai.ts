// The `openai` backend: one chat-completions request per summary, no tools; also the way to
// reach vLLM, llama.cpp or Ollama through `baseUrl`. Retries and errors are http.ts's.
import { z } from 'zod';
import { joinUrl, summarizeOverHttp, type HttpDeps, type ReadOutcome } from './http.ts';
import { summarizerFailed, type Summarizer, type SummarizerConfig, type SummaryRequest, type SummaryResult } from './types.ts';

export const OPENAI_DEFAULT_MODEL = 'gpt-4.1-mini';
export const OPENAI_DEFAULT_BASE_URL = 'https://api.openai.com/v1';
export const OPENAI_DEFAULT_KEY_ENV = 'OPENAI_API_KEY';

const ChatResponse = z.object({
  model: z.string().optional(),
  choices: z.array(
    z
      .object({
        finish_reason: z.string().nullable().optional(),
        message: z.object({ content: z.string().nullable().optional(), refusal: z.string().nullable().optional() }).loose(),
      })
      .loose(),
  ),
  usage: z.object({ completion_tokens: z.number().int().nonnegative().optional() }).loose().nullable().optional(),
});

export function readChat(json: unknown): ReadOutcome {
  const parsed = ChatResponse.safeParse(json);
  if (!parsed.success) return 'response is not a chat completion (no choices[].message)';
  const first = parsed.data.choices[0];
  if (first === undefined) return 'response has no choices';
  const content = first.message.content;
  if (typeof content !== 'string') {
    if (typeof first.message.refusal === 'string' && first.message.refusal !== '') {
      return `model refused: ${first.message.refusal.slice(0, 200)}`;
    }
    const why = first.finish_reason ? ` (finish_reason: ${first.finish_reason})` : '';
    return `response has no text content${why}`;
  }
  return { text: content, outputTokens: parsed.data.usage?.completion_tokens, model: parsed.data.model };
}

/**
 * The request field that caps output tokens. OpenAI's own API takes `max_completion_tokens` for
 * every chat model and rejects `max_tokens` for its reasoning models (o-series, gpt-5);
 * compatible servers (vLLM, llama.cpp, Ollama) know `max_tokens`.
 */
export function outputLimitField(baseUrl: string | undefined): 'max_completion_tokens' | 'max_tokens' {
  if (baseUrl === undefined) return 'max_completion_tokens';
  return new URL(baseUrl).hostname === 'api.openai.com' ? 'max_completion_tokens' : 'max_tokens';
}

/**
 * The key comes from `apiKeyEnv` (default OPENAI_API_KEY). Against the default OpenAI URL a
 * missing key is an error; with a configured `baseUrl` the request goes out without an
 * authorization header, since local servers usually want none.
 */
export function createOpenAISummarizer(config: SummarizerConfig, deps: HttpDeps = {}): Summarizer {
  const model = config.model ?? OPENAI_DEFAULT_MODEL;
  const keyEnv = config.apiKeyEnv ?? OPENAI_DEFAULT_KEY_ENV;
  const url = joinUrl(config.baseUrl ?? OPENAI_DEFAULT_BASE_URL, 'chat/completions');
  return {
    backend: 'openai',
    model,
    async summarize(req: SummaryRequest): Promise<SummaryResult> {
      const raw = (deps.env ?? process.env)[keyEnv];
      const key = raw === undefined || raw === '' ? undefined : raw;
      if (key === undefined && config.baseUrl === undefined) {
        throw summarizerFailed('openai', 'missing_api_key', `environment variable ${keyEnv} is not set`);
      }
      if (req.signal?.aborted === true) throw summarizerFailed('openai', 'cancelled', 'cancelled');
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (key !== undefined) headers.authorization = `Bearer ${key}`;
      return summarizeOverHttp(
        {
          backend: 'openai',
          url,
          headers,
          body: {
            model,
            [outputLimitField(config.baseUrl)]: req.maxOutputTokens,
            messages: [
              { role: 'system', content: req.system },
              { role: 'user', content: req.prompt },
            ],
          },
          read: readChat,
          secrets: key === undefined ? [] : [key],
          authHint: key === undefined ? `no API key sent: ${keyEnv} is not set` : undefined,
        },
        config,
        req,
        deps,
        model,
      );
    },
  };
}
