// The committed glyph table: intact (its hash is the version every cache key carries), holding
// what layout relies on, decoded right, and exactly what the build script makes of the font
// file committed beside it (scripts/font/8x13.pcf.gz), so the check runs on every machine.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { DEFAULT_FONT, glyphTable } from '../../scripts/font/build-glyph-table.ts';
import { parsePcf } from '../../scripts/font/pcf.ts';
import { GLYPH_HEIGHT, GLYPH_ROWS, GLYPH_TABLE_BYTES, GLYPH_TABLE_VERSION, glyphCodePoints, glyphIndex, hasGlyph, isFontMark } from '../../render/glyphs.ts';

function picture(cp: number): string[] {
  const base = glyphIndex(cp) * GLYPH_HEIGHT;
  return [...GLYPH_ROWS.subarray(base, base + GLYPH_HEIGHT)].map((b) => b.toString(2).padStart(8, '0').replaceAll('0', '.').replaceAll('1', '#'));
}

describe('glyph table', () => {
  test('its sha256 is the version constant (an edited table must come with a new version)', () => {
    assert.equal(createHash('sha256').update(GLYPH_TABLE_BYTES).digest('hex').slice(0, 16), GLYPH_TABLE_VERSION);
  });

  test('it has every printable ASCII character, U+FFFD, ⏎ and the control pictures, and no controls', () => {
    for (let cp = 0x20; cp < 0x7f; cp++) assert.ok(hasGlyph(cp), `U+${cp.toString(16)}`);
    for (let cp = 0x2400; cp <= 0x241f; cp++) assert.ok(hasGlyph(cp), `U+${cp.toString(16)}`);
    for (const cp of [0xfffd, 0x23ce, 0x2421]) assert.ok(hasGlyph(cp), `U+${cp.toString(16)}`);
    for (let cp = 0; cp < 0x20; cp++) assert.ok(!hasGlyph(cp), `control U+${cp.toString(16)} is drawn as a picture, not from the table`);
    for (let cp = 0x7f; cp < 0xa0; cp++) assert.ok(!hasGlyph(cp));
    assert.ok(!hasGlyph(0x65e5), 'no CJK');
    assert.ok(!hasGlyph(0x1f44d), 'nothing past the BMP');
    // The font's 3,703 glyphs less its one control (U+0000).
    assert.equal(glyphCodePoints().length, 3702);
  });

  test('glyphs decode as the font draws them', () => {
    assert.deepEqual(picture(0x41), ['........', '........', '...##...', '..#..#..', '.#....#.', '.#....#.', '.#....#.', '.######.', '.#....#.', '.#....#.', '.#....#.', '........', '........']);
    assert.deepEqual(picture(0x20), Array(13).fill('........'));
    assert.ok(isFontMark(0x301) && isFontMark(0x308), 'combining acute and diaeresis are marks');
    assert.ok(!isFontMark(0x41) && !isFontMark(0xb4), 'A and the spacing acute are not');
  });

  // issue 30, defect 11: this test was skipped wherever xfonts-base was not installed, CI included.
  test('the build script rebuilds the committed table byte for byte from the committed font', () => {
    const rebuilt = glyphTable(parsePcf(gunzipSync(readFileSync(DEFAULT_FONT))));
    assert.ok(rebuilt.equals(GLYPH_TABLE_BYTES));
  });
});
