// Grapheme counting agrees with Intl.Segmenter on every path: ASCII, the per-character tables,
// and text that needs the segmenter, whole or cut into pieces after LFs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { countGraphemes } from '../../storage/transcript/graphemes.ts';

const seg = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
const truth = (s: string): number => [...seg.segment(s)].length;

test('counts match the segmenter on hand-picked text', () => {
  for (
    const s of [
      '',
      'plain',
      'a\r\nb\rc\n',
      '\r\r\n\n',
      'größe → │ 漢字 한국어',
      'e\u0301 combining',
      '👍 📋 emoji alone',
      '👍🏽 skin tone, 👩‍👩‍👧 family, 🇫🇷 flag, #️⃣ keycap',
      'ส้ม Thai, नमस्ते Devanagari, \u0600\u0661 prepend',
      '\u1100\u1161\u11a8 jamo',
      'lone \ud800 surrogate',
      // U+FE0F after a character joins it, but not after a control or at the start.
      '⚠️ warning, ✅️ done, ❤️ and 👍️',
      '\ufe0f start, \n\ufe0f after LF, \r\ufe0f after CR, \u200b\ufe0f after a format character, a\ufe0f\ufe0f twice',
      '#\ufe0f\u20e3 keycap, ❤\ufe0f\u200d🔥 joined',
    ]
  ) {
    assert.equal(countGraphemes(s), truth(s), JSON.stringify(s));
  }
});

test('counts match the segmenter on random text from a mixed alphabet, short and long', () => {
  const alphabet = ['a', ' ', '\n', '\r', 'é', 'e\u0301', '漢', '👍', '\u{1F3FD}', '\u200d', '🇫', '\u0e33', 'ก', '\u0600', '\u1100', '\u{1D11E}', '\u{113D1}', '\ufe0f', '⚠', '\u200b', '\u00ad'];
  let seed = 1;
  const rnd = (n: number) => ((seed = (seed * 48271) % 2147483647) % n);
  for (let t = 0; t < 3000; t++) {
    const len = t < 2900 ? 1 + rnd(30) : 2000 + rnd(3000);
    let s = '';
    for (let i = 0; i < len; i++) s += alphabet[rnd(alphabet.length)];
    assert.equal(countGraphemes(s), truth(s), JSON.stringify(s.slice(0, 60)));
  }
});

test('U+FE0F after any BMP character counts as the segmenter counts it', () => {
  // The tables let U+FE0F join the unit before it unless that unit is a control; check the
  // rule for every BMP character (pieces the tables refuse go to the segmenter anyway).
  const bad: string[] = [];
  for (let c = 0; c < 0x10000; c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const s = `x${String.fromCharCode(c)}\ufe0fy`;
    if (countGraphemes(s) !== truth(s)) bad.push(c.toString(16));
  }
  assert.deepEqual(bad, []);
});
