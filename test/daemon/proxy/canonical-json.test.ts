// The canonical form every proxy wire hashes its messages in. Stored chains are hashes of this
// text, so these outputs are pinned: a change here would make every stored session fork.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { canonicalJson } from '../../../daemon/proxy/client-prompt.ts';

test('keys are sorted at every depth; cache_control and undefined fields are left out', () => {
  const v = { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }, { z: 1, a: { y: [2, { d: null, c: undefined, b: true }], x: 'é\n"' } }], meta: undefined };
  assert.equal(canonicalJson(v), '{"content":[{"text":"hi","type":"text"},{"a":{"x":"é\\n\\"","y":[2,{"b":true,"d":null}]},"z":1}],"role":"user"}');
});

test('scalars and arrays read as JSON.stringify writes them; undefined in an array is null', () => {
  assert.equal(canonicalJson('a\u2028b'), JSON.stringify('a\u2028b'));
  assert.equal(canonicalJson(1.5e-7), '1.5e-7');
  assert.equal(canonicalJson(null), 'null');
  assert.equal(canonicalJson(undefined), 'null');
  assert.equal(canonicalJson([]), '[]');
  assert.equal(canonicalJson({}), '{}');
  assert.equal(canonicalJson([undefined, 1, { cache_control: 1 }]), '[null,1,{}]');
});

test('an object whose only key is left out, first or not, leaves no stray comma', () => {
  assert.equal(canonicalJson({ a: undefined, b: 1 }), '{"b":1}');
  assert.equal(canonicalJson({ b: 1, cache_control: { type: 'ephemeral' }, c: 2 }), '{"b":1,"c":2}');
  assert.equal(canonicalJson({ b: 1, c: undefined }), '{"b":1}');
});
