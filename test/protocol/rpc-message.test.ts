// checkMessage: each incoming message sorted into what the peer does with it. The peer's own
// tests (rpc-peer.test.ts) drive the same rules over a stream; these pin the sorting alone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkMessage } from '../../protocol/rpc-message.ts';

const refusal = (c: ReturnType<typeof checkMessage>) => (c.kind === 'refused' ? (JSON.parse(c.reply) as { id: unknown; error: { code: number; message: string } }) : undefined);

test('requests, notifications, responses and cancels are told apart', () => {
  assert.deepEqual(checkMessage({ jsonrpc: '2.0', id: 7, method: 'ping', params: {} }, '7', undefined), { kind: 'request', id: 7, method: 'ping', params: {} });
  assert.deepEqual(checkMessage({ jsonrpc: '2.0', method: 'log', params: [1] }, undefined, undefined), { kind: 'notification', method: 'log', params: [1] });
  const response = { jsonrpc: '2.0', id: 'a', result: 1 };
  assert.deepEqual(checkMessage(response, undefined, undefined), { kind: 'response', id: 'a', msg: response });
  assert.equal(checkMessage({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'x' } }, 'null', undefined).kind, 'response', 'an error about a line we sent');
  assert.deepEqual(checkMessage({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id: 3 } }, undefined, undefined), { kind: 'cancel', target: 3 });
  assert.deepEqual(checkMessage({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id: {} } }, undefined, undefined), { kind: 'cancel', target: undefined });
  // With an id, $/cancelRequest is an ordinary request (the handler refuses it as unknown).
  assert.equal(checkMessage({ jsonrpc: '2.0', id: 1, method: '$/cancelRequest' }, '1', undefined).kind, 'request');
});

test('what is not JSON-RPC 2.0, or breaks the id rule, is refused with -32600 and the id when it is usable', () => {
  assert.deepEqual(refusal(checkMessage([1], undefined, undefined))?.id, null);
  assert.match(refusal(checkMessage({ jsonrpc: '1.0', id: 1, method: 'x' }, '1', undefined))!.error.message, /not a JSON-RPC 2.0 message/);
  assert.match(refusal(checkMessage({ jsonrpc: '2.0', id: 2 }, '2', undefined))!.error.message, /neither a request nor a response/);
  assert.deepEqual(refusal(checkMessage({ jsonrpc: '2.0', id: 2, method: 5 }, '2', undefined))?.id, 2);
  assert.equal(refusal(checkMessage({ jsonrpc: '2.0', id: 2, method: 'x', params: 'p' }, '2', undefined))?.error.code, -32600);
  // 1.0 parses as the integer 1, but its echo would read differently: refused, with a null id.
  const inexact = refusal(checkMessage({ jsonrpc: '2.0', id: 1, method: 'x' }, '1.0', undefined));
  assert.deepEqual([inexact?.id, /safe integer in plain digits/.test(inexact?.error.message ?? '')], [null, true]);
});

test('text that was not UTF-8 is sorted before anything else, with the id when it is readable', () => {
  const marker = '\u0000bad\u0000';
  const c = checkMessage({ jsonrpc: '2.0', id: 4, method: 'x', params: { text: `a${marker}` } }, '4', marker);
  assert.equal(c.kind, 'invalid_utf8');
  assert.ok(c.kind === 'invalid_utf8' && c.id === 4 && 'reply' in c.answer && /invalid params for x/.test(c.answer.reply));
  // The same message without the marker runs.
  assert.equal(checkMessage({ jsonrpc: '2.0', id: 4, method: 'x', params: { text: 'a' } }, '4', marker).kind, 'request');
});
