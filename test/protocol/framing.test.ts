// LineDecoder in isolation: chunk boundaries, UTF-8 splits, CRLF and the
// per-line byte cap. The socket-level behaviour of an over-long line is in rpc-peer.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_MAX_LINE_BYTES, LineDecoder } from '../../protocol/framing.ts';

function decoder(maxLineBytes?: number) {
  const lines: string[] = [];
  const overflows: number[] = [];
  const invalid = { n: 0 };
  const d = new LineDecoder({
    maxLineBytes,
    onLine: (l) => lines.push(l),
    onOverflow: (n) => overflows.push(n),
    onInvalidUtf8: () => invalid.n++,
  });
  return { d, lines, overflows, invalid };
}

/** Feeds `bytes` in chunks of `size` bytes. */
function feed(d: LineDecoder, bytes: Buffer, size: number): void {
  for (let i = 0; i < bytes.length; i += size) d.push(bytes.subarray(i, i + size));
}

// issue 11, defect 2: `c3 28 ff` inside a string was decoded with U+FFFD and stored altered.
test('a line that is not valid UTF-8 is reported and dropped, its neighbours come through', () => {
  const { d, lines, invalid } = decoder();
  const bad = Buffer.concat([Buffer.from('{"text":"bad'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from(' end"}')]);
  // A truncated character at the end of a line, and an overlong encoding of "/", are invalid too.
  const truncated = Buffer.concat([Buffer.from('"x'), Buffer.from([0xe2, 0x82])]);
  const overlong = Buffer.from([0x22, 0xc0, 0xaf, 0x22]);
  feed(d, Buffer.concat([Buffer.from('ok1\n'), bad, Buffer.from('\r\n'), truncated, Buffer.from('\n'), overlong, Buffer.from('\nok2 €\n')]), 3);
  assert.deepEqual(lines, ['ok1', 'ok2 €']);
  assert.equal(invalid.n, 3);
});

test('several messages in one chunk come out as separate lines, in order', () => {
  const { d, lines } = decoder();
  d.push(Buffer.from('{"a":1}\n{"b":2}\n{"c":'));
  assert.deepEqual(lines, ['{"a":1}', '{"b":2}']);
  d.push(Buffer.from('3}\n'));
  assert.deepEqual(lines, ['{"a":1}', '{"b":2}', '{"c":3}']);
});

test('a long line split across many small chunks is reassembled exactly', () => {
  const { d, lines } = decoder();
  const long = 'x'.repeat(200_000);
  feed(d, Buffer.from(long + '\nshort\n'), 7);
  assert.deepEqual(lines, [long, 'short']);
});

test('multibyte UTF-8 characters split at every byte decode intact', () => {
  const { d, lines } = decoder();
  const text = 'héllo € 𝄞 日本 🙂';
  feed(d, Buffer.from(`${text}\n${text}\n`), 1);
  assert.deepEqual(lines, [text, text]);
});

test('a trailing carriage return is dropped and empty lines are still reported', () => {
  const { d, lines } = decoder();
  d.push(Buffer.from('one\r\n\r\ntwo\n'));
  assert.deepEqual(lines, ['one', '', 'two']);
});

test('a line of exactly the cap is accepted', () => {
  const { d, lines, overflows } = decoder(5);
  d.push(Buffer.from('12345\n'));
  assert.deepEqual(lines, ['12345']);
  assert.deepEqual(overflows, []);
});

test('an over-long line reports overflow once, before its newline, and is dropped up to it', () => {
  const { d, lines, overflows } = decoder(10);
  d.push(Buffer.from('ok\n123456'));
  d.push(Buffer.from('789012'));
  assert.deepEqual(overflows, [12]);
  d.push(Buffer.from('more bytes of the same line'));
  d.push(Buffer.from('still\nafter\n'));
  assert.deepEqual(overflows, [12]);
  assert.deepEqual(lines, ['ok', 'after']);
});

test('a second over-long line reports its own overflow', () => {
  const { d, overflows } = decoder(3);
  d.push(Buffer.from('abcd\nefghi\n'));
  assert.deepEqual(overflows, [4, 5]);
});

test('the default cap is 64 MiB', () => {
  assert.equal(DEFAULT_MAX_LINE_BYTES, 64 * 1024 * 1024);
});

test('with onBytesLine, lines over bytesLineAbove come as their bytes, shorter ones decoded, bad UTF-8 refused', () => {
  const strings: string[] = [];
  const bytes: Buffer[] = [];
  const invalid = { n: 0 };
  const d = new LineDecoder({
    onLine: (l) => strings.push(l),
    onBytesLine: (b) => bytes.push(Buffer.from(b)),
    bytesLineAbove: 8,
    onOverflow: () => assert.fail('no line is over the cap'),
    onInvalidUtf8: () => invalid.n++,
  });
  const long = '["é",1,"𝄞"]';
  const bad = Buffer.concat([Buffer.from('"long enough'), Buffer.from([0xc3, 0x28]), Buffer.from('"')]);
  feed(d, Buffer.concat([Buffer.from(`12345678\n${long}\r\n123456789\n`), bad, Buffer.from('\nshort\n')]), 2);
  assert.deepEqual(strings, ['12345678', 'short']);
  assert.deepEqual(bytes.map((b) => b.toString('utf8')), [long, '123456789']);
  assert.equal(invalid.n, 1);
});
