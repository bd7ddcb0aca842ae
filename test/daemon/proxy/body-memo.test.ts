// BodyMemo against JSON.parse: a conversation that grows request by request the way agents send
// it (history first or in the middle, the cache marker moving to the newest message), then bodies
// that depart from a kept one in every way a shared prefix could mislead: an edit inside the
// history, a rewind, a number that goes on past a shared element, repeated keys, `__proto__`,
// whitespace, and bodies that are not JSON. Each result must be JSON.parse's, key order included;
// where elements are shared, they must be the very objects of the previous result.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BodyMemo } from '../../../daemon/proxy/body-memo.ts';
import { Prng } from '../../../scripts/stress/prng.ts';

/** Deep equality with own keys in order at every level (deepStrictEqual ignores key order). */
function assertSameAsParse(actual: unknown, text: string): void {
  const expected: unknown = JSON.parse(text);
  assert.deepStrictEqual(actual, expected);
  const stack: Array<[unknown, unknown]> = [[actual, expected]];
  for (let pair = stack.pop(); pair !== undefined; pair = stack.pop()) {
    const [a, e] = pair;
    if (typeof e !== 'object' || e === null) continue;
    assert.deepEqual(Reflect.ownKeys(a as object), Reflect.ownKeys(e));
    assert.equal(Object.getPrototypeOf(a), Object.getPrototypeOf(e));
    for (const k of Reflect.ownKeys(e)) stack.push([(a as Record<PropertyKey, unknown>)[k], (e as Record<PropertyKey, unknown>)[k]]);
  }
}

const SMALL = { minBytes: 0 };

function message(r: Prng, n: number): Record<string, unknown> {
  const text = `${'é😀"\\ x'.repeat(r.int(0, 20))} message ${n}`;
  return r.next() < 0.5 ? { role: n % 2 === 0 ? 'user' : 'assistant', content: text } : { role: 'user', content: [{ type: 'text', text }, { type: 'tool_result', tool_use_id: `t${n}`, content: [] }] };
}

/** The agent's body: the marker on the newest message only, as Claude Code moves it. */
function body(messages: ReadonlyArray<Record<string, unknown>>, order: 'first' | 'middle'): string {
  const marked = messages.map((m, i) => (i === messages.length - 1 ? { ...m, cache_control: { type: 'ephemeral' } } : m));
  const tail = { system: [{ type: 'text', text: 'sys' }], tools: [{ name: 'Read' }], stream: true };
  return JSON.stringify(order === 'first' ? { messages: marked, model: 'm', ...tail } : { model: 'm', max_tokens: 10, messages: marked, ...tail });
}

test('a growing conversation is read as JSON.parse reads it, sharing the elements it repeats', () => {
  for (const order of ['first', 'middle'] as const) {
    const r = new Prng(order === 'first' ? 1 : 2);
    const memo = new BodyMemo(SMALL);
    const messages: Array<Record<string, unknown>> = [];
    let previous: unknown[] | undefined;
    for (let step = 0; step < 40; step++) {
      for (let i = r.int(1, 2); i > 0; i--) messages.push(message(r, messages.length));
      const text = body(messages, order);
      const got = memo.parse(Buffer.from(text), 'messages') as { messages: unknown[] };
      assertSameAsParse(got, text);
      if (previous !== undefined) {
        // All but the one that carried the marker are the previous request's objects.
        const shared = previous.length - 1;
        for (let i = 0; i < shared; i++) assert.equal(got.messages[i], previous[i], `${order}: message ${i} of step ${step} is shared`);
        assert.notEqual(got.messages[shared], previous[shared]);
      }
      previous = got.messages;
    }
  }
});

test('a body that departs from a kept one is still read as JSON.parse reads it', () => {
  const memo = new BodyMemo(SMALL);
  const base = '{"model":"m","messages":[{"a":1},{"b":[1,2]},{"c":"x"}],"stream":true}';
  const variants = [
    base,
    // an edit inside the history, a rewind, and growth after the same prefix
    '{"model":"m","messages":[{"a":1},{"b":[1,3]},{"c":"x"}],"stream":true}',
    '{"model":"m","messages":[{"a":1}],"stream":true}',
    '{"model":"m","messages":[{"a":1},{"b":[1,2]},{"c":"x"},{"d":null}],"stream":false}',
    // whitespace where the rest begins, and a number element that goes on past a shared one
    '{"model":"m","messages":[{"a":1},{"b":[1,2]},{"c":"x"} , {"d":1} ] ,"stream":true}',
    '{"model":"m","messages":[{"a":1},{"b":[1,2]},{"c":"x"},5],"stream":true}',
    '{"model":"m","messages":[{"a":1},{"b":[1,2]},{"c":"x"},5.5],"stream":true}',
    // repeated keys after the history: the last value wins, in the first one's place
    '{"model":"m","messages":[{"a":1},{"b":[1,2]},{"c":"x"}],"model":"n","messages":[]}',
    '{"model":"m","messages":[{"a":1},{"b":[1,2]},{"c":"x"}],"__proto__":{"polluted":true},"x":1}',
    // the same history under another key is not the history
    '{"model":"m","input":[{"a":1},{"b":[1,2]},{"c":"x"}],"stream":true}',
  ];
  for (const text of variants) {
    // Each variant read after the base (kept), and again (itself kept).
    memo.parse(Buffer.from(base), 'messages');
    assertSameAsParse(memo.parse(Buffer.from(text), 'messages'), text);
    assertSameAsParse(memo.parse(Buffer.from(text), 'messages'), text);
  }
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

test('a body that is not JSON throws what JSON.parse throws, shared prefix or not', () => {
  const memo = new BodyMemo(SMALL);
  memo.parse(Buffer.from('{"model":"m","messages":[{"a":1},{"b":2}],"stream":true}'), 'messages');
  for (const text of ['{"model":"m","messages":[{"a":1},{"b":2}', '{"model":"m","messages":[{"a":1},{"b":2}],"stream":tru}', '{"model":"m","messages":[{"a":1},{"b":2}]}}', '{"model":"m","messages":[{"a":1}{"b":2}]}']) {
    assert.throws(
      () => memo.parse(Buffer.from(text), 'messages'),
      (err: unknown) => {
        assert.ok(err instanceof SyntaxError);
        assert.throws(() => JSON.parse(text), { message: err.message });
        return true;
      },
    );
  }
});

test('bodies are kept within the bounds: a body over the byte bound, or past the count, is not shared', () => {
  const memo = new BodyMemo({ minBytes: 0, maxEntries: 2, maxBytes: 200 });
  const conv = (tag: string, n: number): string => JSON.stringify({ messages: Array.from({ length: n }, (_, i) => ({ tag, i })) });
  const a = memo.parse(Buffer.from(conv('a', 2)), 'messages') as { messages: unknown[] };
  memo.parse(Buffer.from(conv('b', 2)), 'messages');
  memo.parse(Buffer.from(conv('c', 2)), 'messages');
  // `a` was the third most recent: dropped, so its next body shares nothing.
  const a2 = memo.parse(Buffer.from(conv('a', 3)), 'messages') as { messages: unknown[] };
  assert.notEqual(a2.messages[0], a.messages[0]);
  const c2 = memo.parse(Buffer.from(conv('c', 3)), 'messages') as { messages: unknown[] };
  const c3 = memo.parse(Buffer.from(conv('c', 4)), 'messages') as { messages: unknown[] };
  assert.equal(c3.messages[0], c2.messages[0]);
  // Over maxBytes alone: never kept.
  const big = conv('big', 20);
  const b1 = memo.parse(Buffer.from(big), 'messages') as { messages: unknown[] };
  const b2 = memo.parse(Buffer.from(big), 'messages') as { messages: unknown[] };
  assert.notEqual(b2.messages[0], b1.messages[0]);
  assertSameAsParse(b2, big);
});
