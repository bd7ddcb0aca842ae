// HistoryChecker as the wires use it: a body checked with its history one element at a time
// gives what the whole schema gives (unknown fields kept, key order kept), reports the first
// bad element by its path, and hands back the same validated object for an element object it
// has seen, so that a repeated history costs no validation and compares by identity.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MessagesRequest, messagesRequest } from '../../../daemon/proxy/anthropic-wire.ts';
import { chatRequest } from '../../../daemon/proxy/openai-chat-wire.ts';
import { responsesRequest } from '../../../daemon/proxy/openai-responses-wire.ts';

const body = (messages: unknown[]): Record<string, unknown> => ({ model: 'm', messages, stream: true, extra: { kept: 1 } });

test('a body checked element by element equals the whole schema, unknown fields and key order included', () => {
  const json = body([{ role: 'user', content: 'hi', note: 'x' }, { role: 'assistant', content: [{ type: 'text', text: 'a' }] }]);
  const r = messagesRequest.check(json);
  assert.ok('data' in r);
  const whole = MessagesRequest.parse(json);
  assert.deepStrictEqual(r.data, whole);
  assert.deepEqual(Object.keys(r.data), Object.keys(whole));
});

test('the first bad element is reported by its path from the body', () => {
  const r = messagesRequest.check(body([{ role: 'user', content: 'ok' }, { role: 'robot', content: 'no' }]));
  assert.ok('issue' in r);
  assert.deepEqual(r.issue.path.slice(0, 3), ['messages', 1, 'role']);
  const top = chatRequest.check({ messages: [] });
  assert.ok('issue' in top);
  assert.deepEqual(top.issue.path, ['model']);
});

test('an element object seen before keeps its validated copy; a new object is validated again', () => {
  const first = { role: 'user', content: 'one' };
  const second = { role: 'assistant', content: 'two' };
  const a = messagesRequest.check(body([first, second]));
  const b = messagesRequest.check(body([first, second, { role: 'user', content: 'three' }]));
  assert.ok('data' in a && 'data' in b);
  assert.equal(b.data.messages[0], a.data.messages[0]);
  assert.equal(b.data.messages[1], a.data.messages[1]);
  // An equal element in a new object (a body parsed whole) is validated as new, and a bad one
  // in a new object is refused even when an equal good one was seen.
  const c = messagesRequest.check(body([{ role: 'user', content: 'one' }]));
  assert.ok('data' in c);
  assert.notEqual(c.data.messages[0], a.data.messages[0]);
  assert.deepStrictEqual(c.data.messages[0], a.data.messages[0]);
});

test('a Responses input given as a string is no history to check', () => {
  const r = responsesRequest.check({ model: 'm', input: 'just text' });
  assert.ok('data' in r);
  assert.equal(r.data.input, 'just text');
});
