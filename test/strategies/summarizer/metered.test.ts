// The engine's one count of summarizer use (metered.ts): calls, estimated tokens sent and the
// tokens each answer reported, with failed calls counted as sent.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { textTokens } from '../../../strategies/estimate.ts';
import { metered } from '../../../strategies/summarizer/metered.ts';
import { RecordingSummarizer } from '../engine-fixtures.ts';

const request = (prompt: string) => ({ session: 's', purpose: 'rolling', system: 'Summarize the conversation.', prompt, maxOutputTokens: 100 });

test('metered counts every call, the tokens it sent, and the tokens each answer reported', async () => {
  const inner = new RecordingSummarizer();
  inner.answer = (_req, n) => 'x'.repeat(40 * n);
  const m = metered(inner);
  assert.equal(m.backend, inner.backend);
  assert.equal(m.model, inner.model);
  assert.deepEqual([m.calls, m.tokensIn, m.tokensOut], [0, 0, 0]);
  const a = await m.summarize(request('first transcript'));
  const b = await m.summarize(request('a second, longer transcript to fold in'));
  assert.equal(m.calls, 2);
  assert.equal(m.tokensIn, textTokens('Summarize the conversation.') * 2 + textTokens('first transcript') + textTokens('a second, longer transcript to fold in'));
  assert.equal(m.tokensOut, a.outputTokens + b.outputTokens);
  assert.equal(inner.calls.length, 2, 'each call reaches the summarizer once');
});

test('a failed call is counted as sent, with nothing received, and its error passes through', async () => {
  const inner = new RecordingSummarizer();
  inner.failWith = 'provider answered 500';
  const m = metered(inner);
  await assert.rejects(m.summarize(request('the transcript')), /provider answered 500/);
  assert.equal(m.calls, 1);
  assert.equal(m.tokensIn, textTokens('Summarize the conversation.') + textTokens('the transcript'));
  assert.equal(m.tokensOut, 0);
});
