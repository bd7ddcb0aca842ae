// The proxy's outgoing body is written in pieces; its bytes must be JSON.stringify's exactly.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jsonBody, parseJsonBody } from '../../../daemon/proxy/json-body.ts';

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

/** A small deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PIECES = ['a', 'Z', ' ', '"', '\\', '\n', '\u001b', 'é', 'ß', 'ÿ', '\u0080', '中', '—', '🚀', '\ufffd', '__proto__', '\\u00e9', '\\\\u2014', 'u00ff'];

/** The same body with some characters written as \u escapes (JSON allows any to be), or with raw bytes that are not UTF-8 inside a string. */
function variants(json: string, r: () => number): Buffer[] {
  const hex = (unit: string): string => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`;
  // Any character over 0x7f, an astral one as its two escaped halves, half the time.
  const escaped = json.replace(/[^ -~]/gu, (c) => (r() < 0.5 ? c : [...c.split('')].map(hex).join('')));
  const lowEscaped = json.replaceAll('\u001b', '\\u001b');
  const raw = Buffer.from(json);
  const quote = raw.indexOf(0x22, Math.floor(r() * raw.length));
  const broken = quote < 1 ? raw : Buffer.concat([raw.subarray(0, quote), Buffer.from([0xff, 0xc3]), raw.subarray(quote)]);
  return [raw, Buffer.from(escaped), Buffer.from(lowEscaped), broken];
}

test('a body read as Latin-1 and decoded after gives what JSON.parse of its UTF-8 gives, errors included', () => {
  const r = rng(7);
  const str = (): string => Array.from({ length: Math.floor(r() * 6) }, () => PIECES[Math.floor(r() * PIECES.length)]).join('');
  const value = (depth: number): unknown => {
    const x = r();
    if (depth > 3 || x < 0.3) return str();
    if (x < 0.4) return Math.floor(r() * 1000) / 7;
    if (x < 0.45) return r() < 0.5 ? null : true;
    if (x < 0.7) return Array.from({ length: Math.floor(r() * 4) }, () => value(depth + 1));
    const o: Record<string, unknown> = {};
    for (let i = Math.floor(r() * 4); i > 0; i--) Object.defineProperty(o, str(), { value: value(depth + 1), enumerable: true, writable: true, configurable: true });
    return o;
  };
  let parsed = 0;
  let refused = 0;
  for (let n = 0; n < 3000; n++) {
    for (const body of variants(JSON.stringify({ messages: [value(0), value(0)], k: value(1) }), r)) {
      let expected: unknown;
      let error: string | null = null;
      try {
        expected = JSON.parse(body.toString('utf8'));
      } catch (e) {
        error = (e as Error).name;
      }
      if (error === null) {
        assert.deepStrictEqual(parseJsonBody(body), expected, body.toString('utf8'));
        parsed++;
      } else {
        assert.throws(() => parseJsonBody(body), { name: error });
        refused++;
      }
    }
  }
  assert.ok(parsed > 5000 && refused >= 0, `${parsed} parsed, ${refused} refused`);
});

test('a key to decode keeps its place, and one named __proto__ stays an own property', () => {
  const body = Buffer.from('{"a":1,"ключ":2,"__proto__":{"x":"é"},"z":[3,"中"]}');
  const got = parseJsonBody(body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(got), ['a', 'ключ', '__proto__', 'z']);
  assert.deepStrictEqual(got, JSON.parse(body.toString('utf8')));
  assert.equal(Object.getPrototypeOf(got), Object.prototype);
  assert.throws(() => parseJsonBody(Buffer.from('{"a": é}')), SyntaxError);
});
