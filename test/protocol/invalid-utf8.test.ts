// Reading a line that is not valid UTF-8 far enough to answer it: the bad bytes are found
// wherever they are, and text the sender really wrote (noncharacters, U+FFFD, escapes of
// either) is never taken for them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { findInvalidText, parseMarked } from '../../protocol/invalid-utf8.ts';

const line = (...parts: Array<string | number[]>) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));

test('each kind of ill-formed sequence is found in the string that holds it', () => {
  for (const bad of [[0xc3, 0x28, 0xff], [0xed, 0xa0, 0x80], [0xf8, 0x88], [0xc0, 0xaf], [0xe2, 0x82], [0xf4, 0x90, 0x80, 0x80]]) {
    const m = parseMarked(line('{"a":"fine","b":["x', bad, 'y"]}'));
    assert.ok(m !== undefined, bad.join(' '));
    const found = findInvalidText(m.value, m.marker);
    assert.deepEqual(found?.path, ['b', 0], bad.join(' '));
    assert.equal(found?.key, false);
    assert.match(found.text, /^x\uFFFD.*y$/u);
  }
});

test('noncharacters, U+FFFD and their escapes that the sender wrote are not taken for bad bytes', () => {
  const m = parseMarked(line('{"real":"\uFDD0 \uFFFD \\ufdd1 \\uFFFD","bad":"', [0xff], '"}'));
  assert.ok(m !== undefined);
  assert.deepEqual(findInvalidText(m.value, m.marker), { path: ['bad'], key: false, text: '\uFFFD' });
  assert.equal((m.value as { real: string }).real, '\uFDD0 \uFFFD \uFDD1 \uFFFD');
});

test('a bad key is named by its path; a line that is not JSON even so gives nothing', () => {
  const m = parseMarked(line('{"p":{"k', [0xff], '":1}}'));
  assert.deepEqual(findInvalidText(m!.value, m!.marker), { path: ['p', 'k\uFFFD'], key: true, text: 'k\uFFFD' });
  assert.equal(parseMarked(line('{"a":1', [0xff], '}')), undefined);
});
