// encodeJson against JSON.stringify: hand-written edge cases (what JSON.stringify leaves out or
// writes as null, toJSON, boxed primitives, lone surrogates) and seeded random documents with
// kept objects at random places, encoded twice so that the second encoding reads kept bytes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeJson, keepJson } from '../../protocol/kept-json.ts';
import { Prng } from '../../scripts/stress/prng.ts';

const same = (v: object): void => assert.equal(encodeJson(v).toString(), JSON.stringify(v));

test('encodeJson writes what JSON.stringify writes for the values it treats specially', () => {
  same({ a: undefined, b: () => 1, c: Symbol('s'), d: 1 });
  same([undefined, () => 1, Symbol('s'), NaN, Infinity, -0, null]);
  // eslint-disable-next-line no-sparse-arrays
  same([1, , 3]);
  same({ when: new Date(0), n: Object(3) as number, s: Object('x') as string, b: Object(false) as boolean });
  same({ custom: { toJSON: () => ({ shown: true }) } });
  same({ 'quote"key\n': 'lone \ud800 surrogate', emoji: '😀', ctl: '\u0001\u2028' });
  same({ nested: [[[]], {}, [{}]], empty: '' });
  same([]);
  same({});
});

/** A random JSON-ish value; some objects are kept. */
function randomValue(r: Prng, depth: number, kept: object[]): unknown {
  const k = r.int(0, depth > 3 ? 3 : 6);
  switch (k) {
    case 0:
      return r.pick(['', 'plain', 'é ü 😀', 'quote " backslash \\', 'line\nbreak', '\ud83d']);
    case 1:
      return r.pick([0, -1.5, 1e21, 123456789, NaN]);
    case 2:
      return [true, false, null, undefined][r.int(0, 3)];
    case 3:
      return 'x'.repeat(r.int(0, 40_000));
    case 4:
    case 5: {
      const o: Record<string, unknown> = {};
      for (let i = r.int(0, 5); i > 0; i--) o[r.pick(['a', 'b', 'type', 'text', 'k"', '😀'])] = randomValue(r, depth + 1, kept);
      if (r.next() < 0.3) kept.push(keepJson(o));
      return o;
    }
    default: {
      const a: unknown[] = [];
      for (let i = r.int(0, 5); i > 0; i--) a.push(randomValue(r, depth + 1, kept));
      if (r.next() < 0.3) kept.push(keepJson(a));
      return a;
    }
  }
}

test('encodeJson equals JSON.stringify on random documents with kept objects, first and again', () => {
  const r = new Prng(20261205);
  let keptSeen = 0;
  for (let i = 0; i < 300; i++) {
    const kept: object[] = [];
    const doc = { messages: [randomValue(r, 0, kept), randomValue(r, 0, kept)], model: 'm' };
    keptSeen += kept.length;
    const expected = JSON.stringify(doc);
    assert.equal(encodeJson(doc).toString(), expected);
    // The second time, every kept object is written from its kept bytes.
    assert.equal(encodeJson(doc).toString(), expected);
  }
  assert.ok(keptSeen > 100, `the documents held kept objects (${keptSeen})`);
});

test('a kept object is written with the bytes it had when first encoded', () => {
  const block = keepJson({ type: 'text', text: 'first' });
  const body = { messages: [block] };
  const before = encodeJson(body).toBuffer();
  // What keepJson promises the encoder: nobody changes a kept object. One that is changed anyway
  // still goes out as it was, which is how a test can tell the bytes were kept.
  block.text = 'changed';
  assert.equal(encodeJson(body).toString(), before.toString());
  assert.equal(before.toString(), '{"messages":[{"type":"text","text":"first"}]}');
});
