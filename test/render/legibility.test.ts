// The legibility proof: frames rendered to PNG, decoded by sharp, and read cell by cell against
// the glyph table give back exactly the laid-out text, in every shape DESIGN.md names (and in
// clamped and odd geometries, where glyphs straddle byte boundaries), for text with everything
// layout has a rule for: wrapped lines, tabs, CRLF, controls, CJK, emoji and combining marks.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clampGeometry, drawnText, layout, renderFrame, SHAPES, type Geometry } from '../../render/index.ts';
import { canonicalText, readFrame } from './read-frame.ts';

/** Text with every kind of character layout treats specially, repeated until it fills frames. */
function mixedText(minChars: number): string {
  const pieces = [
    '¶user: please fix the failing test in src/parse.ts\n',
    '→ read_file(path = "src/parse.ts", limit = 200)\n',
    '¶out call_1: export function parse(s: string) {\n\tif (s === "") {\n\t\treturn null;\n\t}\r\n}\n',
    `¶ai: ${'a long line that wraps over several rows of cells because it never breaks '.repeat(6)}\n`,
    'controls: bell\u0007 escape\u001b[0m nul\u0000 del\u007f c1\u0085 end\n',
    'CJK 日本語のテキスト and emoji 👍🏽 🎉 ❤️ 👨‍👩‍👧 zwsp\u200b!\n',
    'marks: café (composed by NFC), x\u0301 q\u0308\u0323 Ελληνικά Кириллица\n',
  ];
  let s = '';
  for (let i = 0; s.length < minChars; i++) s += pieces[i % pieces.length]!;
  return s;
}

const GEOMETRIES: Array<[string, Geometry]> = [
  ['claude (11, 16, 1568, 44)', SHAPES.claude],
  ['gpt (8, 22, 1568, 56)', SHAPES.gpt],
  ['gemini (8, 22, 2048, 64)', SHAPES.gemini],
  ['gemini clamped to a 1000 px edge', clampGeometry(SHAPES.gemini, 1000)],
  ['odd cells (9, 14, 500, 7)', { advance: 9, pitch: 14, frameWidth: 500, rows: 7 }],
];

describe('legibility: rendered frames read back as their laid-out text', () => {
  for (const [name, g] of GEOMETRIES) {
    test(name, async () => {
      const columns = Math.floor(g.frameWidth / g.advance);
      // Enough for three frames, the last one partial.
      const text = mixedText(Math.ceil(columns * g.rows * 2.4));
      const frames = layout(text, g);
      assert.ok(frames.length >= 3, `${frames.length} frames`);
      assert.equal(frames.map((f) => f.text).join(''), text.normalize('NFC'), 'the frames cover the text exactly');
      for (const f of frames) {
        const r = renderFrame(f);
        const read = await readFrame(r.png, g);
        assert.equal(read.width, f.width);
        assert.equal(read.height, f.height);
        assert.ok(read.width <= g.frameWidth && read.height <= g.pitch * g.rows);
        const cells = read.rows.join('');
        // The last row's unused cells read as blanks.
        const blanks = ' '.repeat(f.rows * f.columns - f.cells.length);
        assert.equal(cells, canonicalText(drawnText(f) + blanks), `frame ${f.index}`);
      }
    });
  }

  test('each rule reads back as written, in every shape', async () => {
    // NFC composes e + U+0301 into é and puts the dot below before the diaeresis (canonical
    // order); x and q have no precomposed forms, so their marks are
    // drawn over them; 日 and 👍 are missing (U+FFFD), the skin-tone modifier and the ZWSP have
    // no visible form and are left out; a tab is two blank cells; CR LF is one ⏎.
    const text = 'a\tb\r\nc\u0007d日👍🏽\u200be\u0301x\u0301q\u0308\u0323!';
    const expected = 'a  b⏎c␇d��éx\u0301q\u0323\u0308!';
    for (const g of [SHAPES.claude, SHAPES.gpt, SHAPES.gemini]) {
      const [f, ...rest] = layout(text, g);
      assert.equal(rest.length, 0);
      assert.equal(drawnText(f!), expected);
      const read = await readFrame(renderFrame(f!).png, g);
      assert.equal(read.rows.length, 1);
      assert.equal(read.rows[0]!.trimEnd(), canonicalText(expected));
      // x with an acute is no glyph of the font: the reader had to find base and mark.
      assert.match(read.rows[0]!, /x\u0301/);
    }
  });

  test('a line longer than a row wraps at the last whole cell, with nothing lost between rows', async () => {
    const g = SHAPES.claude;
    const line = Array.from({ length: 400 }, (_, i) => String.fromCharCode(0x41 + (i % 26))).join('');
    const [f] = layout(line, g);
    const read = await readFrame(renderFrame(f!).png, g);
    assert.deepEqual(read.rows.map((r) => r.length), [142, 142, 142]);
    assert.equal(read.rows.join('').trimEnd(), line);
  });
});
