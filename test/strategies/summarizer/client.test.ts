// The `client` backend with a fake reverse-request function (valid, invalid, rejecting, hanging),
// and how createSummarizer picks a backend from the config and the connection's capability.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlbedoError } from '../../../protocol/errors.ts';
import { createClientSummarizer, type ClientCall, type ClientSummarizeParams } from '../../../strategies/summarizer/client.ts';
import { createSummarizer } from '../../../strategies/summarizer/index.ts';
import { SummarizerConfig, type SummaryRequest } from '../../../strategies/summarizer/types.ts';

const request: SummaryRequest = {
  session: 's1',
  purpose: 'notes',
  system: 'Rewrite the notes.',
  prompt: '<transcript>\n¶user: hi\n</transcript>',
  maxOutputTokens: 2500,
};

/** A remote error as rpc-peer's RpcRemoteError has it: a message and a numeric code. */
class RemoteError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

async function failure(promise: Promise<unknown>, reason: string): Promise<AlbedoError> {
  let caught: unknown;
  await promise.then(
    () => assert.fail('expected a failure'),
    (err: unknown) => {
      caught = err;
    },
  );
  assert.ok(caught instanceof AlbedoError, String(caught));
  assert.equal(caught.code, 'summarizer_failed');
  assert.equal(caught.details?.backend, 'client');
  assert.equal(caught.details?.reason, reason, caught.message);
  return caught;
}

test('the reverse request carries the wire params and the answer comes back as the summary', async () => {
  const calls: ClientSummarizeParams[] = [];
  const call: ClientCall = async (params, signal) => {
    calls.push(params);
    assert.ok(signal instanceof AbortSignal);
    return { text: 'client summary', extra: 'ignored' };
  };
  const result = await createClientSummarizer(call, { timeoutMs: 1000 }).summarize(request);
  assert.deepEqual(result, { text: 'client summary', backend: 'client', model: null, outputTokens: 4 });
  assert.deepEqual(calls, [
    { session: 's1', purpose: 'notes', system: 'Rewrite the notes.', prompt: request.prompt, max_output_tokens: 2500 },
  ]);
});

test('an invalid answer fails with what was wrong', async () => {
  for (const answer of [null, 'text', { text: 42 }, {}]) {
    const err = await failure(createClientSummarizer(async () => answer, { timeoutMs: 1000 }).summarize(request), 'invalid_answer');
    assert.match(err.message, /invalid answer/);
  }
});

test('an empty text fails as an empty summary', async () => {
  await failure(createClientSummarizer(async () => ({ text: '  \n' }), { timeoutMs: 1000 }).summarize(request), 'empty_summary');
});

test('an error response from the client is reported with its code', async () => {
  const err = await failure(
    createClientSummarizer(async () => Promise.reject(new RemoteError(-32603, 'model quota exceeded')), { timeoutMs: 1000 }).summarize(request),
    'client_error',
  );
  assert.match(err.message, /client answered with an error: model quota exceeded/);
  assert.equal(err.details?.remote_code, -32603);
});

test('a disconnect (or a call that throws at once) is a client error', async () => {
  const gone = await failure(
    createClientSummarizer(async () => Promise.reject(new Error('connection closed before a response arrived (stream closed)')), {
      timeoutMs: 1000,
    }).summarize(request),
    'client_error',
  );
  assert.match(gone.message, /summarize request failed: connection closed/);
  const sync: ClientCall = () => {
    throw new Error('cannot send summarize: connection is closed');
  };
  await failure(createClientSummarizer(sync, { timeoutMs: 1000 }).summarize(request), 'client_error');
});

test('a client that never answers times out, and the call sees its signal abort', async () => {
  let seen: AbortSignal | undefined;
  const call: ClientCall = (_params, signal) => {
    seen = signal;
    return new Promise(() => {});
  };
  const err = await failure(createClientSummarizer(call, { timeoutMs: 100 }).summarize(request), 'timeout');
  assert.match(err.message, /timed out after 100 ms/);
  assert.equal(seen?.aborted, true);
});

test('the caller cancelling ends the wait, even if the client ignores the signal', async () => {
  const controller = new AbortController();
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const call: ClientCall = () => {
    started();
    return new Promise(() => {});
  };
  const pending = createClientSummarizer(call, { timeoutMs: 60_000 }).summarize({ ...request, signal: controller.signal });
  await running;
  controller.abort();
  await failure(pending, 'cancelled');
});

test('with no provider configured, a connection that can summarize gets the client backend', async () => {
  const config = SummarizerConfig.parse({});
  const withClient = createSummarizer(config, { clientCall: async () => ({ text: 'from client' }) });
  assert.equal(withClient.backend, 'client');
  assert.equal((await withClient.summarize(request)).text, 'from client');
  assert.equal(createSummarizer(config, {}).backend, 'extractive');
});

test('an explicit provider wins over the capability', () => {
  const clientCall: ClientCall = async () => ({ text: 'x' });
  assert.equal(createSummarizer(SummarizerConfig.parse({ provider: 'extractive' }), { clientCall }).backend, 'extractive');
  const anthropic = createSummarizer(SummarizerConfig.parse({ provider: 'anthropic' }), { clientCall });
  assert.equal(anthropic.backend, 'anthropic');
  assert.equal(anthropic.model, 'claude-haiku-4-5');
  assert.equal(createSummarizer(SummarizerConfig.parse({ provider: 'openai' }), {}).model, 'gpt-4.1-mini');
});

test('provider "client" on a connection without the capability fails instead of falling back', async () => {
  const s = createSummarizer(SummarizerConfig.parse({ provider: 'client' }), {});
  assert.equal(s.backend, 'client');
  const err = await failure(s.summarize(request), 'no_capability');
  assert.match(err.message, /no connection that answers summarize is open for this session/);
});

test('the config schema applies defaults and rejects unknown keys and bad values', () => {
  assert.deepEqual(SummarizerConfig.parse({}), { timeoutMs: 60_000, maxRetries: 2 });
  assert.equal(SummarizerConfig.safeParse({ provider: 'gemini' }).success, false);
  assert.equal(SummarizerConfig.safeParse({ apiKey: 'sk-x' }).success, false);
  assert.equal(SummarizerConfig.safeParse({ baseUrl: 'not a url' }).success, false);
  assert.equal(SummarizerConfig.safeParse({ maxRetries: 6 }).success, false);
  assert.equal(SummarizerConfig.safeParse({ timeoutMs: 0 }).success, false);
});
