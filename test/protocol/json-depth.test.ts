// The nesting bound on JSON values and the depth-safe copy: iterative, so no depth overflows them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_JSON_DEPTH, clampJsonDepth, depthMarker, stringifyJson, tooDeepPath } from '../../protocol/json-depth.ts';

function nested(levels: number): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  let at = root;
  for (let i = 1; i < levels; i++) {
    const next: Record<string, unknown> = {};
    at.a = next;
    at = next;
  }
  at.leaf = 1;
  return root;
}

test('a value at the limit passes and is returned as is; one level more is found with its path', () => {
  const ok = nested(MAX_JSON_DEPTH);
  assert.equal(tooDeepPath(ok), null);
  assert.equal(clampJsonDepth(ok), ok);
  assert.deepEqual(tooDeepPath(nested(MAX_JSON_DEPTH + 1)), Array(MAX_JSON_DEPTH).fill('a'));
  assert.deepEqual(tooDeepPath({ x: [1, [2, [3]]] }, 2), ['x', 1]);
});

test('100,000 levels are checked, clamped and stringified without a stack overflow', () => {
  const deep = nested(100_000);
  assert.equal(tooDeepPath(deep)?.length, MAX_JSON_DEPTH);
  assert.throws(() => JSON.stringify(deep), RangeError);
  const text = stringifyJson(deep);
  assert.equal(text, `${'{"a":'.repeat(MAX_JSON_DEPTH)}"${depthMarker()}"${'}'.repeat(MAX_JSON_DEPTH)}`);
  assert.equal(tooDeepPath(clampJsonDepth(deep)), null);
});

test('a clamped copy keeps keys, their order, arrays and __proto__ keys', () => {
  const value = JSON.parse('{"z":1,"__proto__":{"p":[1,{"q":[[2]]}]},"a":"s"}') as Record<string, unknown>;
  assert.equal(JSON.stringify(clampJsonDepth(value, 4)), '{"z":1,"__proto__":{"p":[1,{"q":"[nested deeper than 4 levels]"}]},"a":"s"}');
  assert.equal(Object.getPrototypeOf(clampJsonDepth(value, 4)), Object.prototype);
});

test('the bound counts every member, an own __proto__ key included, as a recursive walk does', () => {
  assert.deepEqual(tooDeepPath(JSON.parse('{"__proto__":[[[1]]]}'), 3), ['__proto__', 0, 0]);
  assert.equal(tooDeepPath(JSON.parse('{"__proto__":[[[1]]]}'), 4), null);
  // Seeded random values against the plain recursive definition of depth.
  let seed = 7;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const make = (left: number): unknown => {
    if (left === 0 || rnd() < 0.3) return rnd() < 0.5 ? 1 : 'x';
    const n = Math.floor(rnd() * 4);
    const kids = Array.from({ length: n }, () => make(left - 1));
    return rnd() < 0.5 ? kids : Object.fromEntries(kids.map((k, i) => [`k${i}`, k]));
  };
  const depth = (v: unknown): number => (typeof v === 'object' && v !== null ? 1 + Math.max(0, ...Object.values(v).map(depth)) : 0);
  for (let i = 0; i < 2000; i++) {
    const v = make(8);
    const limit = 1 + Math.floor(rnd() * 7);
    const path = tooDeepPath(v, limit);
    assert.equal(path === null, depth(v) <= limit, JSON.stringify({ v, limit }));
    if (path !== null) assert.equal(path.length, limit);
  }
});
