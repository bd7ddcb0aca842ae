// The raw member tokens of a JSON line: what JSON.parse cannot give back (`1.0` and `1` parse alike).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { topLevelMemberTokens } from '../../protocol/json-tokens.ts';

test('the id token of a top-level object is its text as written, whatever precedes and nests', () => {
  assert.deepEqual(topLevelMemberTokens('{"jsonrpc":"2.0","id":1.0000000000000000001,"method":"m"}', 'id'), ['1.0000000000000000001']);
  assert.deepEqual(topLevelMemberTokens(' { "id" :\t-0 , "x":1}', 'id'), ['-0']);
  // Members nested in params, and "id" inside strings (escaped quotes, backslash runs), are not the top-level id.
  const line = String.raw`{"params":{"id":1,"rows":[{"id":"c1","text":"say \"id\":2 \\","a":[[{"id":3}]]}]},"s":"\\\"id\":4","id":1e0}`;
  JSON.parse(line); // the scanner is only handed lines JSON.parse accepted
  assert.deepEqual(topLevelMemberTokens(line, 'id'), ['1e0']);
});

test('a repeated name gives the last token, as JSON.parse keeps; an escaped key is the same name', () => {
  const dup = '{"id":1,"method":"m","id":1.0}';
  assert.equal((JSON.parse(dup) as { id: number }).id, 1);
  assert.deepEqual(topLevelMemberTokens(dup, 'id'), ['1.0']);
  assert.deepEqual(topLevelMemberTokens('{"\\u0069d":10E-1}', 'id'), ['10E-1']);
  assert.deepEqual(topLevelMemberTokens('{"idx":1,"i":2}', 'id'), [undefined]);
  assert.deepEqual(topLevelMemberTokens('{}', 'id'), [undefined]);
});

test('a batch gives one entry per element; other values give none', () => {
  assert.deepEqual(topLevelMemberTokens('[{"id":1},2,{"x":{"id":3}},[{"id":4}],{"id":"s"},{"a":null,"id":5.00}]', 'id'), ['1', undefined, undefined, undefined, '"s"', '5.00']);
  assert.deepEqual(topLevelMemberTokens('[]', 'id'), []);
  assert.deepEqual(topLevelMemberTokens('"id"', 'id'), []);
  assert.deepEqual(topLevelMemberTokens('12', 'id'), []);
});
