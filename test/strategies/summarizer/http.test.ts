// The anthropic and openai backends against a real HTTP server on loopback that speaks both
// wire formats: request shape, retries, timeouts, cancellation and every malformed answer.
// Backoff waits go through an injected sleep that records them, so no test waits for real.
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { AlbedoError } from '../../../protocol/errors.ts';
import { textTokens } from '../../../strategies/estimate.ts';
import { backoffMs, providerMessage, retryAfterMs } from '../../../strategies/summarizer/http.ts';
import { outputLimitField } from '../../../strategies/summarizer/http-openai.ts';
import { createSummarizer, TRUNCATION_MARKER } from '../../../strategies/summarizer/index.ts';
import { SummarizerConfig, type SummaryRequest } from '../../../strategies/summarizer/types.ts';

interface Seen {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}
/** Answers request number `n` (from 0); leaving `res` alone means never answering. */
type Handler = (seen: Seen, n: number, res: ServerResponse) => void;

interface TestServer {
  baseUrl: string;
  requests: Seen[];
  /** Resolves when the server has received `count` requests. */
  received: (count: number) => Promise<void>;
  close: () => Promise<void>;
}

async function startServer(handler: Handler): Promise<TestServer> {
  const requests: Seen[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const seen: Seen = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>),
      };
      requests.push(seen);
      for (const w of waiters) if (requests.length >= w.count) w.resolve();
      handler(seen, requests.length - 1, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    received: (count) =>
      new Promise((resolve) => {
        if (requests.length >= count) resolve();
        else waiters.push({ count, resolve });
      }),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** A success in whichever wire format the request path asks for. */
function answer(seen: Seen, res: ServerResponse, text: string): void {
  if (seen.path.endsWith('/v1/messages')) {
    json(res, 200, {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: String(seen.body.model),
      content: [{ type: 'text', text }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 100, output_tokens: 17 },
    });
  } else {
    json(res, 200, {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      model: String(seen.body.model),
      choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 100, completion_tokens: 23, total_tokens: 123 },
    });
  }
}

const KEY = 'sk-test-0123456789abcdef';
const request: SummaryRequest = {
  session: 's1',
  purpose: 'rolling',
  system: 'You summarize coding sessions.',
  prompt: '<transcript>\n¶user: fix src/a.ts\n</transcript>',
  maxOutputTokens: 300,
};

function backend(
  provider: 'anthropic' | 'openai',
  server: TestServer,
  extra: Partial<SummarizerConfig> = {},
  env: NodeJS.ProcessEnv = { ANTHROPIC_API_KEY: KEY, OPENAI_API_KEY: KEY },
  delays: number[] = [],
) {
  const baseUrl = provider === 'anthropic' ? server.baseUrl : `${server.baseUrl}/v1`;
  const config = SummarizerConfig.parse({ provider, baseUrl, ...extra });
  return createSummarizer(config, {
    env,
    sleep: async (ms) => {
      delays.push(ms);
    },
  });
}

/** Asserts a summarizer_failed error with these details, returning it for further checks. */
async function failure(promise: Promise<unknown>, expect: Record<string, unknown>): Promise<AlbedoError> {
  let caught: unknown;
  await promise.then(
    () => assert.fail('expected a failure'),
    (err: unknown) => {
      caught = err;
    },
  );
  assert.ok(caught instanceof AlbedoError, `not an AlbedoError: ${String(caught)}`);
  assert.equal(caught.code, 'summarizer_failed');
  for (const [k, v] of Object.entries(expect)) assert.equal(caught.details?.[k], v, `details.${k} in ${caught.message}`);
  assert.ok(!caught.message.includes(KEY) && !JSON.stringify(caught.details).includes(KEY), 'the API key leaked');
  return caught;
}

test('anthropic: a Messages API request with key, version and no tools; text and usage read back', async () => {
  const server = await startServer((seen, _n, res) => answer(seen, res, '  summary text  '));
  try {
    const result = await backend('anthropic', server).summarize(request);
    assert.deepEqual(result, { text: '  summary text  ', backend: 'anthropic', model: 'claude-haiku-4-5', outputTokens: 17 });
    const [seen] = server.requests;
    assert.ok(seen);
    assert.equal(seen.method, 'POST');
    assert.equal(seen.path, '/v1/messages');
    assert.equal(seen.headers['x-api-key'], KEY);
    assert.equal(seen.headers['anthropic-version'], '2023-06-01');
    assert.match(String(seen.headers['content-type']), /^application\/json/);
    assert.deepEqual(seen.body, {
      model: 'claude-haiku-4-5',
      max_tokens: 300,
      system: request.system,
      messages: [{ role: 'user', content: request.prompt }],
    });
    assert.ok(!('tools' in seen.body));
  } finally {
    await server.close();
  }
});

test('anthropic: the configured model and key variable are used; text blocks are joined, others skipped', async () => {
  const server = await startServer((seen, _n, res) =>
    json(res, 200, {
      model: 'claude-sonnet-4-5-20250929',
      content: [
        { type: 'thinking', thinking: 'hm' },
        { type: 'text', text: 'part one, ' },
        { type: 'text', text: 'part two' },
      ],
    })
  );
  try {
    const s = backend('anthropic', server, { model: 'claude-sonnet-4-5', apiKeyEnv: 'MY_KEY' }, { MY_KEY: KEY });
    assert.equal(s.model, 'claude-sonnet-4-5');
    const result = await s.summarize(request);
    assert.equal(result.text, 'part one, part two');
    assert.equal(result.model, 'claude-sonnet-4-5-20250929');
    assert.equal(result.outputTokens, Math.ceil(Buffer.byteLength('part one, part two') / 4), 'estimated without usage');
    assert.equal(server.requests[0]?.body.model, 'claude-sonnet-4-5');
    assert.equal(server.requests[0]?.headers['x-api-key'], KEY);
  } finally {
    await server.close();
  }
});

test('openai: a chat completion with bearer key, system message and no tools', async () => {
  const server = await startServer((seen, _n, res) => answer(seen, res, 'the summary'));
  try {
    const result = await backend('openai', server).summarize(request);
    assert.deepEqual(result, { text: 'the summary', backend: 'openai', model: 'gpt-4.1-mini', outputTokens: 23 });
    const [seen] = server.requests;
    assert.ok(seen);
    assert.equal(seen.path, '/v1/chat/completions');
    assert.equal(seen.headers.authorization, `Bearer ${KEY}`);
    assert.deepEqual(seen.body, {
      model: 'gpt-4.1-mini',
      max_tokens: 300,
      messages: [
        { role: 'system', content: request.system },
        { role: 'user', content: request.prompt },
      ],
    });
    assert.ok(!('tools' in seen.body));
  } finally {
    await server.close();
  }
});

test("openai: OpenAI's own API gets max_completion_tokens, compatible servers max_tokens", () => {
  assert.equal(outputLimitField(undefined), 'max_completion_tokens');
  assert.equal(outputLimitField('https://api.openai.com/v1'), 'max_completion_tokens');
  assert.equal(outputLimitField('http://127.0.0.1:8080/v1'), 'max_tokens');
  assert.equal(outputLimitField('http://localhost:11434/v1'), 'max_tokens');
});

test('openai: a local server reached through baseUrl gets no authorization header when no key is set', async () => {
  const server = await startServer((seen, _n, res) => answer(seen, res, 'local summary'));
  try {
    const result = await backend('openai', server, { model: 'qwen2.5-coder' }, {}).summarize(request);
    assert.equal(result.text, 'local summary');
    assert.equal(server.requests[0]?.headers.authorization, undefined);
    assert.equal(server.requests[0]?.body.model, 'qwen2.5-coder');
  } finally {
    await server.close();
  }
});

test('openai: a 401 without a key says that no key was sent', async () => {
  const server = await startServer((_seen, _n, res) => json(res, 401, { error: 'unauthorized' }));
  try {
    const err = await failure(backend('openai', server, {}, {}).summarize(request), { status: 401, reason: 'http_status' });
    assert.match(err.message, /HTTP 401: unauthorized \(no API key sent: OPENAI_API_KEY is not set\)/);
    assert.equal(server.requests.length, 1);
  } finally {
    await server.close();
  }
});

test('a missing API key fails naming the variable, before any request', async () => {
  const server = await startServer((seen, _n, res) => answer(seen, res, 'x'));
  try {
    const err = await failure(backend('anthropic', server, {}, {}).summarize(request), { backend: 'anthropic', reason: 'missing_api_key' });
    assert.match(err.message, /ANTHROPIC_API_KEY/);
    const custom = await failure(backend('anthropic', server, { apiKeyEnv: 'TEAM_KEY' }, { ANTHROPIC_API_KEY: KEY }).summarize(request), {
      reason: 'missing_api_key',
    });
    assert.match(custom.message, /TEAM_KEY/);
    assert.equal(server.requests.length, 0);
  } finally {
    await server.close();
  }
  let fetched = 0;
  const openai = createSummarizer(SummarizerConfig.parse({ provider: 'openai' }), {
    env: { OPENAI_API_KEY: '' },
    fetch: async () => {
      fetched++;
      return new Response('{}');
    },
  });
  const err = await failure(openai.summarize(request), { backend: 'openai', reason: 'missing_api_key' });
  assert.match(err.message, /OPENAI_API_KEY/);
  assert.equal(fetched, 0);
});

test('a 429 is retried after the retry-after the server asked for', async () => {
  const server = await startServer((seen, n, res) => {
    if (n === 0) json(res, 429, { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } }, { 'retry-after': '2' });
    else answer(seen, res, 'after the wait');
  });
  try {
    const delays: number[] = [];
    const result = await backend('anthropic', server, {}, undefined, delays).summarize(request);
    assert.equal(result.text, 'after the wait');
    assert.equal(server.requests.length, 2);
    assert.deepEqual(delays, [2000]);
  } finally {
    await server.close();
  }
});

test('retries really wait and then succeed (real sleep, retry-after 0)', async () => {
  const server = await startServer((seen, n, res) => {
    if (n === 0) json(res, 529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }, { 'retry-after': '0' });
    else answer(seen, res, 'ok now');
  });
  try {
    const s = createSummarizer(SummarizerConfig.parse({ provider: 'anthropic', baseUrl: server.baseUrl }), { env: { ANTHROPIC_API_KEY: KEY } });
    assert.equal((await s.summarize(request)).text, 'ok now');
    assert.equal(server.requests.length, 2);
  } finally {
    await server.close();
  }
});

test('two 500s then success: three requests with exponential backoff', async () => {
  const server = await startServer((seen, n, res) => {
    if (n < 2) json(res, 500, { error: { message: 'internal', type: 'server_error' } });
    else answer(seen, res, 'third time');
  });
  try {
    const delays: number[] = [];
    const result = await backend('openai', server, {}, undefined, delays).summarize(request);
    assert.equal(result.text, 'third time');
    assert.equal(server.requests.length, 3);
    assert.deepEqual(delays, [250, 500]);
  } finally {
    await server.close();
  }
});

test('a server that always fails with 500 gives up after maxRetries + 1 requests', async () => {
  const server = await startServer((_seen, _n, res) => json(res, 500, { type: 'error', error: { type: 'api_error', message: 'Internal server error' } }));
  try {
    const err = await failure(backend('anthropic', server, { maxRetries: 3 }, undefined).summarize(request), {
      status: 500,
      reason: 'http_status',
      attempts: 4,
    });
    assert.match(err.message, /HTTP 500: Internal server error/);
    assert.equal(server.requests.length, 4);
  } finally {
    await server.close();
  }
});

test('a 400 is not retried and quotes the provider message', async () => {
  const server = await startServer((_seen, _n, res) => json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: must be at most 8192' } }));
  try {
    const err = await failure(backend('anthropic', server).summarize(request), { status: 400, reason: 'http_status', attempts: 1 });
    assert.match(err.message, /HTTP 400: max_tokens: must be at most 8192/);
    assert.equal(server.requests.length, 1);
  } finally {
    await server.close();
  }
});

test('a provider error that echoes the key does not leak it', async () => {
  const server = await startServer((_seen, _n, res) => json(res, 401, { error: { message: `Incorrect API key provided: ${KEY}. You can find your API key at ...`, type: 'invalid_request_error' } }));
  try {
    const err = await failure(backend('openai', server).summarize(request), { status: 401 });
    assert.match(err.message, /Incorrect API key provided: \[redacted\]/);
    assert.equal(server.requests.length, 1);
  } finally {
    await server.close();
  }
});

test('a dropped connection is a network error and is retried', async () => {
  const server = await startServer((seen, n, res) => {
    if (n === 0) res.socket?.destroy();
    else answer(seen, res, 'second try');
  });
  try {
    const delays: number[] = [];
    assert.equal((await backend('openai', server, {}, undefined, delays).summarize(request)).text, 'second try');
    assert.equal(server.requests.length, 2);
    assert.deepEqual(delays, [250]);
  } finally {
    await server.close();
  }
});

test('a refused connection fails as a network error after the retries', async () => {
  const server = await startServer(() => {});
  const baseUrl = server.baseUrl;
  await server.close();
  const s = createSummarizer(SummarizerConfig.parse({ provider: 'openai', baseUrl, maxRetries: 1 }), { env: {}, sleep: async () => {} });
  const err = await failure(s.summarize(request), { reason: 'network', attempts: 2 });
  assert.match(err.message, /network error: .*ECONNREFUSED/);
});

test('a server that never answers times out', async () => {
  const server = await startServer(() => {});
  try {
    const err = await failure(backend('anthropic', server, { timeoutMs: 200 }).summarize(request), { reason: 'timeout' });
    assert.match(err.message, /timed out after 200 ms/);
    assert.equal(server.requests.length, 1, 'a timeout is not retried');
  } finally {
    await server.close();
  }
});

test('the caller cancelling stops the request in flight, without retry', async () => {
  const server = await startServer(() => {});
  try {
    const controller = new AbortController();
    const pending = backend('openai', server).summarize({ ...request, signal: controller.signal });
    await server.received(1);
    controller.abort();
    const err = await failure(pending, { reason: 'cancelled' });
    assert.match(err.message, /cancelled/);
    assert.equal(server.requests.length, 1);
  } finally {
    await server.close();
  }
});

test('an already cancelled request is never sent', async () => {
  const server = await startServer((seen, _n, res) => answer(seen, res, 'x'));
  try {
    await failure(backend('anthropic', server).summarize({ ...request, signal: AbortSignal.abort() }), { reason: 'cancelled' });
    assert.equal(server.requests.length, 0);
  } finally {
    await server.close();
  }
});

test('malformed successes fail clearly and are not retried', async () => {
  const bodies: [string, string, RegExp, string][] = [
    ['anthropic', '', /empty response body \(HTTP 200\)/, 'invalid_response'],
    ['openai', '', /empty response body/, 'invalid_response'],
    ['anthropic', '<html>gateway</html>', /response is not JSON \(HTTP 200\): <html>gateway<\/html>/, 'invalid_response'],
    ['openai', 'not json at all', /response is not JSON/, 'invalid_response'],
    ['anthropic', JSON.stringify({ content: [], stop_reason: 'refusal' }), /no text content \(stop_reason: refusal\)/, 'invalid_response'],
    ['anthropic', JSON.stringify({ id: 'x' }), /not a Messages API result/, 'invalid_response'],
    ['openai', JSON.stringify({ choices: [] }), /no choices/, 'invalid_response'],
    ['openai', JSON.stringify({ choices: [{ message: { content: null }, finish_reason: 'length' }] }), /no text content \(finish_reason: length\)/, 'invalid_response'],
    ['anthropic', JSON.stringify({ content: [{ type: 'text', text: ' \n ' }] }), /empty summary/, 'empty_summary'],
    ['openai', JSON.stringify({ choices: [{ message: { content: '' } }] }), /empty summary/, 'empty_summary'],
  ];
  for (const [provider, body, message, reason] of bodies) {
    const server = await startServer((_seen, _n, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    try {
      const err = await failure(backend(provider as 'anthropic' | 'openai', server).summarize(request), { reason, status: 200 });
      assert.match(err.message, message);
      assert.equal(server.requests.length, 1, `${provider} ${body}: not retried`);
    } finally {
      await server.close();
    }
  }
});

test('retry-after parsing and backoff bounds', () => {
  assert.equal(retryAfterMs(new Headers({ 'retry-after': '3' })), 3000);
  assert.equal(retryAfterMs(new Headers({ 'retry-after-ms': '150', 'retry-after': '3' })), 150);
  assert.equal(retryAfterMs(new Headers({ 'retry-after': 'Thu, 01 Jan 2026 00:00:10 GMT' }), Date.parse('2026-01-01T00:00:00Z')), 10_000);
  assert.equal(retryAfterMs(new Headers({ 'retry-after': 'soon' })), undefined);
  assert.equal(retryAfterMs(new Headers()), undefined);
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((a) => backoffMs(a, undefined)), [250, 500, 1000, 2000, 4000, 5000]);
  assert.equal(backoffMs(0, 60_000), 5000);
  assert.equal(providerMessage('{"error":{"message":"m"}}'), 'm');
  assert.equal(providerMessage('{"error":"model not found"}'), 'model not found');
  assert.equal(providerMessage('{"detail":"bad"}'), 'bad');
  assert.equal(providerMessage('Bad Gateway'), 'Bad Gateway');
  assert.equal(providerMessage('<html>...</html>'), undefined);
});

/** Sentences of 40 bytes (10 tokens), one space apart: `n` of them are about 10·n tokens. */
const long = (n: number) => Array.from({ length: n }, (_, i) => `Changed src/module${String(i).padStart(3, '0')}.ts to fix it.`.padEnd(40, '!')).join(' ');

test('anthropic: an answer over max_tokens is asked for again with half of it, and the fitting retry is kept', async () => {
  const server = await startServer((seen, n, res) => answer(seen, res, n === 0 ? long(60) : long(10)));
  try {
    const result = await backend('anthropic', server).summarize(request);
    assert.equal(result.text, long(10));
    assert.equal(server.requests.length, 2);
    assert.equal(server.requests[0]?.body.max_tokens, 300);
    assert.equal(server.requests[1]?.body.max_tokens, 150);
    assert.match(String(server.requests[1]?.body.system), /over the limit of 300/);
    assert.equal(result.outputTokens, 34, 'both attempts are counted (17 reported each)');
  } finally {
    await server.close();
  }
});

test('openai: two answers over the cap end in a cut at a sentence with the marker', async () => {
  const server = await startServer((seen, n, res) => answer(seen, res, n === 0 ? long(80) : long(45)));
  try {
    const result = await backend('openai', server).summarize(request);
    assert.equal(server.requests.length, 2);
    assert.equal(server.requests[1]?.body.max_tokens, 150);
    assert.ok(textTokens(result.text) <= 300, `${textTokens(result.text)} tokens`);
    assert.ok(result.text.endsWith(`\n${TRUNCATION_MARKER}`));
    assert.ok(long(45).startsWith(result.text.slice(0, -TRUNCATION_MARKER.length - 1)), 'a prefix of the shorter answer');
  } finally {
    await server.close();
  }
});

test('openai: an answer over the cap with nowhere to cut fails as over_cap after one retry', async () => {
  const server = await startServer((seen, _n, res) => answer(seen, res, 'z'.repeat(4000)));
  try {
    await failure(backend('openai', server).summarize(request), { backend: 'openai', reason: 'over_cap' });
    assert.equal(server.requests.length, 2);
  } finally {
    await server.close();
  }
});
