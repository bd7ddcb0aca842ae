// parseJsonBytes against JSON.parse: hand-written edge cases and seeded random documents, each
// with random one-byte corruptions, at small thresholds so that the split path (containers over
// the threshold built, the members between them parsed in runs) runs on small inputs; then the
// default threshold on lines the size the socket sees, and nesting no recursion would survive.
import assert from 'node:assert/strict';
import { isUtf8 } from 'node:buffer';
import { test, type TestContext } from 'node:test';
import { JSON_BYTES_THRESHOLD, parseJsonBytes, parseJsonBytesWithTokens } from '../../protocol/json-bytes.ts';
import { topLevelMemberTokens } from '../../protocol/json-tokens.ts';
import { Prng } from '../../scripts/stress/prng.ts';

/** Own keys in order and prototypes, level by level (deepStrictEqual ignores key order). */
function assertSameShape(actual: unknown, expected: unknown): void {
  const stack: Array<[unknown, unknown]> = [[actual, expected]];
  for (let pair = stack.pop(); pair !== undefined; pair = stack.pop()) {
    const [a, e] = pair;
    if (typeof e !== 'object' || e === null) continue;
    assert.ok(typeof a === 'object' && a !== null);
    assert.equal(Object.getPrototypeOf(a), Object.getPrototypeOf(e));
    assert.deepEqual(Reflect.ownKeys(a), Reflect.ownKeys(e));
    for (const k of Reflect.ownKeys(e)) stack.push([(a as Record<string | symbol, unknown>)[k], (e as Record<string | symbol, unknown>)[k]]);
  }
}

/** Tokens as parseJsonBytesWithTokens documents them: none for a container over the threshold. */
function expectedTokens(text: string, threshold: number): Array<string | undefined> {
  return topLevelMemberTokens(text, 'id').map((t) => (t !== undefined && /^[[{]/.test(t) && Buffer.byteLength(t) > threshold ? undefined : t));
}

/** Both throw a SyntaxError, or both return the same value (and the same id tokens). */
function agree(input: string | Buffer, thresholdBytes: number): 'parsed' | 'threw' {
  const buf = typeof input === 'string' ? Buffer.from(input) : input;
  const text = buf.toString('utf8');
  const what = `${JSON.stringify(text.length > 300 ? text.slice(0, 300) + '…' : text)} at threshold ${thresholdBytes}`;
  let expected: unknown;
  try {
    expected = JSON.parse(text);
  } catch {
    assert.throws(() => parseJsonBytes(buf, { thresholdBytes }), SyntaxError, what);
    assert.throws(() => parseJsonBytesWithTokens(buf, 'id', { thresholdBytes }), SyntaxError, what);
    return 'threw';
  }
  const actual = parseJsonBytes(buf, { thresholdBytes });
  assert.deepStrictEqual(actual, expected, what);
  assertSameShape(actual, expected);
  const withTokens = parseJsonBytesWithTokens(buf, 'id', { thresholdBytes });
  assert.deepStrictEqual(withTokens.value, expected, what);
  assert.deepEqual(withTokens.tokens, expectedTokens(text, thresholdBytes), what);
  return 'parsed';
}

/** Every threshold from 0 (every container split) to past the input (parsed whole). */
function agreeAtAll(input: string): 'parsed' | 'threw' {
  const n = Buffer.byteLength(input);
  const outcome = agree(input, 0);
  for (let t = 1; t <= n; t++) assert.equal(agree(input, t), outcome);
  return outcome;
}

test('hand-written valid documents parse as JSON.parse parses them, at every threshold', () => {
  const cases = [
    String.raw`{"a":"say \"hi\"","b":"ends in a backslash \\","c":"\\\"","d":"\\\\"}`,
    String.raw`["\u0041\u00e9\u20ac","\ud834\udd1e","\ud83d\ude00 and a lone \ud800 and \udc00","\/\b\f\n\r\t"]`,
    '["é€𝄞日本🙂", {"ключ": "значение", "𝄞": ["🙂🙂", "ab€"]}, "ü"]',
    '[-0, 0, 1e400, -1e400, 1E-400, 12345678901234567890, 1.0, 1e0, 0.1, -12.5e+3, 9007199254740993]',
    '[[], {}, [[]], [{}], {"a":[]}, {"a":{}}, [ ], { }, [\t\n\r ], {\r\n}]',
    ' \t\n\r{ "a" \t:\n 1 \r, \t"b"  :  [ 1 ,\t2 ,\n3 ] , "c" : { "d" : null } }\r\n\t ',
    '{"__proto__": {"polluted": true}, "a": 1}',
    '{"a": {"__proto__": [1, 2]}, "__proto__": null}',
    '{"a":1,"b":2,"a":3,"b":{"x":1},"b":[4]}',
    '{"b":1,"2":2,"a":3,"1":4,"01":5,"-1":6,"4294967294":7,"4294967295":8,"1.5":9,"0":10}',
    '[true, false, null, "true", "null", [true], {"t": false}]',
    '{"id": 5, "method": "m", "params": {"id": 6, "rows": [{"id": 7}]}}',
    '{"\\u0069d": 1.0, "id2": 3}',
    '[{"id": 1}, 2, {"x": {"id": 3}}, [{"id": 4}], {"id": "s"}, {"a": null, "id": 5.00}, {"id": 1, "id": 2}]',
    '"a top-level string with \\"escapes\\" and é"',
    '12345',
    '  null  ',
    `{"deep":${'['.repeat(30)}1${']'.repeat(30)}, "after": {"x": [1, {"y": "z"}]}}`,
  ];
  for (const c of cases) assert.equal(agreeAtAll(c), 'parsed', c);
});

test('hand-written invalid documents throw a SyntaxError, at every threshold', () => {
  const cases = [
    '[1,2,]',
    '{"a":1,}',
    '[,1]',
    '[1,,2]',
    '{,"a":1}',
    '[1 2]',
    '{"a":1 "b":2}',
    '{"a" 1}',
    '{"a"::1}',
    '{"a":1:2}',
    '{1:2}',
    '{a:1}',
    "{'a':1}",
    '{"a":}',
    '{:1}',
    '[1]]',
    '[[1]',
    '[1}',
    '{"a":1]',
    '{"a":[1}]',
    '[1] x',
    'x [1]',
    '[1] [2]',
    '{"a":1}{"b":2}',
    '["unterminated]',
    '["bad escape \\x"]',
    '["raw\ttab"]',
    '["raw\nnewline"]',
    '[01]',
    '[1.]',
    '[.5]',
    '[-]',
    '[+1]',
    '[NaN]',
    '[Infinity]',
    '[tru]',
    '[nul]',
    '["a" "b"]',
    '{"a":[1] "b":2}',
    '{"a":[1],"b"}',
    '[[1]:2]',
    '{"a":1,"b":[2],}',
    '[\f1]',
    '[\u00a01]',
    '\ufeff[1]',
    '[\ufeff1]',
    '{"a":\ufeff1}',
    '[1]\u2028',
    // Around members that are built (over a small threshold) rather than parsed in runs.
    '[1:[2]]',
    '[1:{"a":2}]',
    '{"a",[1]}',
    '{"a":1,"b",[2]}',
    '{"a":"b":[1]}',
    '{1:[2]}',
    '{[1]:[2]}',
    '{"x":{[1]}}',
    '{"a" [0] :[1]}',
    '[\f[1]]',
    '[[1]\f]',
    '[[1] [2]]',
    '[[1],,[2]]',
    '[[1],]',
    '[,[1]]',
    '{"a":[1],}',
    '{"a":[1] 2}',
    '{"a":\f[1]}',
    '{"a"\f:[1]}',
    '[1]\f',
    '\f[1]',
    '',
    '   ',
    ']',
    '}',
  ];
  for (const c of cases) assert.equal(agreeAtAll(c), 'threw', c);
});

/** What `f` hands to JSON.parse: how many pieces, and the longest in UTF-8 bytes. */
function pieces<T>(t: TestContext, f: () => T): { result: T; calls: number; longest: number } {
  const parse = JSON.parse;
  let longest = 0;
  let calls = 0;
  t.mock.method(JSON, 'parse', (text: string) => {
    longest = Math.max(longest, Buffer.byteLength(text));
    calls++;
    return parse(text) as unknown;
  });
  try {
    return { result: f(), calls, longest };
  } finally {
    t.mock.restoreAll();
  }
}

test('a line over the default threshold is split, and no piece handed to JSON.parse is much longer than it', (t) => {
  const row = (i: number) => ({ kind: 'user', key: `k${i}`, content: [{ type: 'text', text: `row ${i}: é€𝄞 "quoted" \\ ${'x'.repeat(1500)}` }] });
  const value = { jsonrpc: '2.0', id: 7, method: 'transcript.append', params: { session: 's', rows: Array.from({ length: 200 }, (_, i) => row(i)) } };
  const buf = Buffer.from(JSON.stringify(value));
  assert.ok(buf.length > 4 * JSON_BYTES_THRESHOLD);
  const { result, calls, longest } = pieces(t, () => parseJsonBytesWithTokens(buf, 'id'));
  assert.deepStrictEqual(result.value, value);
  assert.deepEqual(result.tokens, ['7']);
  // Runs of rows go to JSON.parse wrapped in their array's brackets: two bytes more.
  assert.ok(calls > 4, `${calls} pieces`);
  assert.ok(longest <= JSON_BYTES_THRESHOLD + 2, `longest piece ${longest} bytes`);
});

test('many tiny members over the default threshold: every element and key in order, in pieces under it', (t) => {
  const numbers = Array.from({ length: 30_000 }, (_, i) => (i % 7 === 0 ? -i / 8 : i));
  const mixed = Array.from({ length: 20_000 }, (_, i) => (i % 3 === 0 ? { id: i } : i % 3 === 1 ? [i] : `s${i}`));
  const keys = Object.fromEntries(Array.from({ length: 12_000 }, (_, i) => [i % 5 === 0 ? String(i) : `k${i}`, i]));
  for (const value of [numbers, mixed, keys, { a: numbers, b: keys, c: mixed }]) {
    const text = JSON.stringify(value);
    assert.ok(Buffer.byteLength(text) > JSON_BYTES_THRESHOLD);
    assert.equal(agree(text, JSON_BYTES_THRESHOLD), 'parsed');
    const { longest } = pieces(t, () => parseJsonBytes(Buffer.from(text)));
    assert.ok(longest <= JSON_BYTES_THRESHOLD + 2, `longest piece ${longest} bytes`);
  }
});

test('nesting far deeper than the call stack allows is parsed without recursion', () => {
  const depth = 200_000;
  const deep = '['.repeat(depth) + '"bottom"' + ']'.repeat(depth);
  let v = parseJsonBytes(Buffer.from(deep), { thresholdBytes: 0 });
  for (let d = 0; d < depth; d++) {
    assert.ok(Array.isArray(v) && v.length === 1);
    v = v[0];
  }
  assert.equal(v, 'bottom');
  // Unbalanced at that depth is a SyntaxError, as JSON.parse says, not a RangeError.
  assert.throws(() => parseJsonBytes(Buffer.from(deep.slice(0, -1)), { thresholdBytes: 0 }), SyntaxError);
  assert.throws(() => parseJsonBytes(Buffer.from('['.repeat(depth)), { thresholdBytes: 0 }), SyntaxError);
});

// ---- random documents ----

const SPACES = [' ', '\t', '\n', '\r'];
const NUMBERS = ['0', '-0', '1', '-1', '1.0', '1e0', '1E+2', '2.5e-3', '1e400', '-1e400', '12345678901234567890', '0.1', '9007199254740993', '42'];
const KEYS = ['id', 'a', 'b', '__proto__', '0', '1', '10', '01', '-1', '4294967294', '4294967295', 'ключ', '𝄞', '', 'a"b', 'a\\b', 'i\u0064'];
const PIECES = ['a', 'é', '€', '𝄞', '🙂', ' ', '\\"', '\\\\', '\\n', '\\t', '\\/', '\\u00e9', '\\ud83d\\ude00', '\\ud800', '"', '\\', '{', '}', '[', ']', ',', ':'];

function generate(next: () => number): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
  const ws = (): string => (next() < 0.7 ? '' : Array.from({ length: 1 + Math.floor(next() * 3) }, () => pick(SPACES)).join(''));
  const str = (): string => {
    let s = '';
    const n = Math.floor(next() * 8);
    for (let i = 0; i < n; i++) {
      const p = pick(PIECES);
      // Raw quotes and backslashes would end or break the string; written escaped instead.
      s += p === '"' ? '\\"' : p === '\\' ? '\\\\' : p;
    }
    return `"${s}"`;
  };
  const key = (): string => (next() < 0.8 ? JSON.stringify(pick(KEYS)) : str());
  const value = (depth: number): string => {
    const r = next();
    if (depth > 5 || r < 0.35) {
      const k = next();
      return k < 0.4 ? str() : k < 0.8 ? pick(NUMBERS) : pick(['true', 'false', 'null']);
    }
    const n = Math.floor(next() * 6);
    const members = Array.from({ length: n }, () => (r < 0.65 ? ws() + value(depth + 1) + ws() : ws() + key() + ws() + ':' + ws() + value(depth + 1) + ws()));
    return r < 0.65 ? `[${members.join(',') || ws()}]` : `{${members.join(',') || ws()}}`;
  };
  return ws() + value(0) + ws();
}

const CORRUPTION_BYTES = Buffer.from(' \t\n\r\f{}[],:"\\0123456789-+.eEtrfnulax/');

/** One byte deleted, inserted or replaced; undefined when that leaves invalid UTF-8. */
function corrupt(buf: Buffer, next: () => number): Buffer | undefined {
  const at = Math.floor(next() * (buf.length + 1));
  const byte = Buffer.from([CORRUPTION_BYTES[Math.floor(next() * CORRUPTION_BYTES.length)]!]);
  const kind = next();
  const out = kind < 1 / 3
    ? Buffer.concat([buf.subarray(0, at), buf.subarray(at + 1)])
    : kind < 2 / 3
    ? Buffer.concat([buf.subarray(0, at), byte, buf.subarray(at)])
    : Buffer.concat([buf.subarray(0, at), byte, buf.subarray(at + 1)]);
  return isUtf8(out) ? out : undefined;
}

test('seeded random documents and one-byte corruptions of them: both parse alike or both throw', () => {
  const prng = new Prng(0x5eed);
  const next = (): number => prng.next();
  const seen = { parsed: 0, threw: 0 };
  for (let i = 0; i < 2500; i++) {
    const doc = Buffer.from(generate(next));
    const threshold = Math.floor(next() * 48);
    seen[agree(doc, threshold)]++;
    for (let k = 0; k < 4; k++) {
      const bad = corrupt(doc, next);
      if (bad !== undefined) seen[agree(bad, threshold)]++;
    }
  }
  // The generator must reach both outcomes often, or the comparison proves little.
  assert.ok(seen.parsed > 3000 && seen.threw > 3000, JSON.stringify(seen));
});
