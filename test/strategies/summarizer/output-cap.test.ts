// The output cap every backend is held to (output-cap.ts), through createSummarizer: one smaller
// retry, then a cut at a sentence with the marker, or a failure. The client backend runs with a
// fake reverse request; the HTTP backends are covered against a loopback server in http.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlbedoError } from '../../../protocol/errors.ts';
import { textTokens } from '../../../strategies/estimate.ts';
import { createSummarizer } from '../../../strategies/summarizer/index.ts';
import { cutAtSentence, TRUNCATION_MARKER } from '../../../strategies/summarizer/output-cap.ts';
import type { ClientCall, ClientSummarizeParams } from '../../../strategies/summarizer/client.ts';
import { isOverCap, SummarizerConfig, type SummaryRequest } from '../../../strategies/summarizer/types.ts';

const CAP = 40;
const request: SummaryRequest = {
  session: 's1',
  purpose: 'rolling',
  system: 'Summarize.',
  prompt: '<transcript>\n¶user: fix src/a.ts\n</transcript>',
  maxOutputTokens: CAP,
};

/** `n` sentences of 20 bytes each, one space apart. */
const sentences = (n: number, word = 'edited') => Array.from({ length: n }, (_, i) => `Step ${String(i).padStart(2, '0')} ${word} a.ts.`).join(' ');

function client(answers: string[], seen: ClientSummarizeParams[] = []) {
  const call: ClientCall = async (params) => {
    seen.push(params);
    const text = answers.shift();
    if (text === undefined) throw new Error('no more answers');
    return { text };
  };
  return createSummarizer(SummarizerConfig.parse({}), { clientCall: call });
}

test('an answer within the cap is taken as it is, with one call', async () => {
  const seen: ClientSummarizeParams[] = [];
  const result = await client([sentences(3)], seen).summarize(request);
  assert.equal(result.text, sentences(3));
  assert.equal(seen.length, 1);
});

test('an answer over the cap is asked for once more with half the cap, and a fitting retry is taken', async () => {
  const seen: ClientSummarizeParams[] = [];
  const result = await client([sentences(20), sentences(4)], seen).summarize(request);
  assert.equal(result.text, sentences(4));
  assert.equal(seen.length, 2);
  assert.equal(seen[1]?.max_output_tokens, CAP / 2);
  assert.ok(seen[1]?.system.includes(`previous answer was about ${textTokens(sentences(20))} tokens, over the limit of 40`), seen[1]?.system);
  assert.equal(seen[1]?.prompt, request.prompt);
  assert.equal(result.outputTokens, textTokens(sentences(20)) + textTokens(sentences(4)));
});

test('a retry still over the cap is cut at its last fitting sentence, with the marker', async () => {
  const seen: ClientSummarizeParams[] = [];
  const result = await client([sentences(20), sentences(12)], seen).summarize(request);
  assert.equal(seen.length, 2);
  assert.ok(textTokens(result.text) <= CAP, `${textTokens(result.text)} tokens`);
  assert.ok(result.text.endsWith(`\n${TRUNCATION_MARKER}`));
  const kept = result.text.slice(0, -TRUNCATION_MARKER.length - 1);
  assert.ok(sentences(12).startsWith(kept) && kept.endsWith('.'), kept);
  assert.ok(kept.length > 0);
});

test('an answer with no sentence to cut at fails as over_cap instead of being kept whole', async () => {
  const blob = 'x'.repeat(CAP * 8);
  const err = await client([blob, blob]).summarize(request).then(
    () => assert.fail('expected a failure'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AlbedoError);
  assert.equal(err.details?.reason, 'over_cap');
  assert.equal(err.details?.backend, 'client');
});

test("a request with overCap 'cut' gets no retry from the cap: an answer over it is cut at once, or fails as over_cap", async () => {
  const seen: ClientSummarizeParams[] = [];
  const cut = await client([sentences(20)], seen).summarize({ ...request, overCap: 'cut' });
  assert.equal(seen.length, 1);
  assert.ok(textTokens(cut.text) <= CAP && cut.text.endsWith(`\n${TRUNCATION_MARKER}`));
  const err = await client(['x'.repeat(CAP * 8)], seen).summarize({ ...request, overCap: 'cut' }).then(
    () => assert.fail('expected a failure'),
    (e: unknown) => e,
  );
  assert.ok(isOverCap(err));
  assert.equal(seen.length, 2, 'one call for each request');
});

test('a retry that fails leaves the first answer to cut', async () => {
  const result = await client([sentences(20)]).summarize(request);
  assert.ok(textTokens(result.text) <= CAP);
  assert.ok(result.text.startsWith('Step 00 edited a.ts.'));
  assert.ok(result.text.endsWith(TRUNCATION_MARKER));
});

test('the caller cancelling during the retry fails the call as cancelled', async () => {
  const controller = new AbortController();
  let calls = 0;
  const call: ClientCall = async () => {
    calls++;
    if (calls === 1) return { text: sentences(20) };
    controller.abort();
    return new Promise(() => {});
  };
  const s = createSummarizer(SummarizerConfig.parse({}), { clientCall: call });
  const err = await s.summarize({ ...request, signal: controller.signal }).then(
    () => assert.fail('expected a failure'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AlbedoError);
  assert.equal(err.details?.reason, 'cancelled');
});

test('the extractive backend stays within the cap for every cap', async () => {
  const prompt = `<transcript>\n${Array.from({ length: 200 }, (_, i) => `¶user: change src/file${i}.ts line ${i * 7} to return ${i}`).join('\n')}\n</transcript>`;
  const s = createSummarizer(SummarizerConfig.parse({ provider: 'extractive' }), {});
  for (const cap of [30, 64, 200, 1000]) {
    const result = await s.summarize({ ...request, prompt, maxOutputTokens: cap });
    assert.ok(textTokens(result.text) <= cap, `cap ${cap}: ${textTokens(result.text)} tokens`);
    assert.ok(!result.text.includes(TRUNCATION_MARKER), 'extractive fits on its own');
  }
});

test('cutAtSentence keeps whole sentences or lines, fits the cap, and refuses a stub', () => {
  const text = `First line without a stop\n${sentences(30)}`;
  const cut = cutAtSentence(text, CAP);
  assert.ok(cut !== undefined);
  assert.ok(textTokens(cut) <= CAP);
  assert.match(cut, /^First line without a stop\nStep 00 edited a\.ts\./);
  assert.equal(cutAtSentence(`Ok. ${'y'.repeat(1000)}`, CAP), undefined, 'three characters of a 40-token cap is nothing sensible');
  assert.equal(cutAtSentence(sentences(30), 10), undefined, 'the marker alone does not fit');
  for (const cap of [25, 41, 77, 300]) {
    const c = cutAtSentence(`Ünïcödé façade. ${sentences(200, 'déjà')}`, cap);
    assert.ok(c !== undefined && textTokens(c) <= cap, `cap ${cap}`);
  }
});
