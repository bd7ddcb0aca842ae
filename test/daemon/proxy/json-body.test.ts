// The proxy's outgoing body is written in pieces; its bytes must be JSON.stringify's exactly.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonBody } from '../../../daemon/proxy/json-body.ts';

const same = (body: Record<string, unknown>): void => assert.equal(jsonBody(body).toString('hex'), Buffer.from(JSON.stringify(body)).toString('hex'));

test('a body with a long history array is the bytes JSON.stringify gives', () => {
  const messages = Array.from({ length: 40 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: [{ type: 'text', text: `step ${i}: é ß 中文 🚀 "quoted" \\ \n` }] }));
  same({ model: 'claude-sonnet-4-5', max_tokens: 8192, stream: true, system: [{ type: 'text', text: 'sys' }], tools: [{ name: 'Bash' }], messages });
  // The history in the middle, short arrays, nested arrays and a trailing field.
  same({ messages, tools: [], nested: [[1, 2], [3]], last: null });
});

test('fields JSON.stringify leaves out or writes as null are written the same', () => {
  const long = [1, undefined, () => 1, Symbol('s'), 'x', ...Array.from({ length: 20 }, (_, i) => i)];
  same({ a: undefined, b: () => 1, c: Symbol('s'), d: long, e: { toJSON: () => 'as json' }, f: new Date(0) });
  same({});
  same({ only: undefined });
  same({ empty: Array.from({ length: 16 }, () => ({})) });
});
