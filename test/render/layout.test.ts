// Layout rules one at a time, on a small grid where the cells can be counted by hand, plus the
// geometry helpers: shapes per model family and the clamp to an upstream's image edge.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clampGeometry, drawnText, frameKey, layout, layoutFrames, SHAPES, shapeFor, shapeNameFor, type Geometry } from '../../render/index.ts';

/** 10 cells across (8-px cells in 80 px), 3 rows: 30 cells a frame. */
const SMALL: Geometry = { advance: 8, pitch: 13, frameWidth: 80, rows: 3 };

describe('layout', () => {
  test('text is NFC-normalized before it is laid out, and the frames cover all of it', () => {
    const [f] = layout('e\u0301 A\u030a', SMALL);
    assert.equal(f!.text, 'é Å');
    assert.equal(drawnText(f!), 'é Å');
    assert.equal(f!.cells.length, 3);
  });

  test('cells wrap at the last whole cell and frames hold rows × columns cells', () => {
    const text = 'abcdefghijklmnopqrstuvwxyz0123456789';
    const frames = layout(text, SMALL);
    assert.deepEqual(frames.map((f) => f.text), [text.slice(0, 30), text.slice(30)]);
    assert.deepEqual(frames.map((f) => [f.columns, f.rows, f.width, f.height]), [[10, 3, 80, 39], [10, 1, 80, 13]]);
    assert.deepEqual(frames.map((f) => f.start), [0, 30]);
    // 85 px across still holds 10 whole cells: the frame is as wide as its cells.
    assert.equal(layout(text, { ...SMALL, frameWidth: 87 })[0]!.width, 80);
  });

  test('a newline is a ⏎ cell in the flow, not a row break; CR LF is one', () => {
    const [f] = layout('ab\ncd\r\nef', SMALL);
    assert.equal(drawnText(f!), 'ab⏎cd⏎ef');
    assert.equal(f!.rows, 1);
  });

  test('a tab is two blank cells, cut short where the row ends', () => {
    assert.equal(drawnText(layout('a\tb', SMALL)[0]!), 'a  b');
    // 'x' fills cells 0..8; the tab has one cell left in the row and takes only that one.
    const [f] = layout('xxxxxxxxx\ty', SMALL);
    assert.equal(drawnText(f!), 'xxxxxxxxx y');
    assert.equal(f!.cells.length, 11);
  });

  test('controls draw as their pictures; C1 controls, which have none, as U+FFFD', () => {
    assert.equal(drawnText(layout('\u0000\u0007\u001b\u007f\u0085\u009b', SMALL)[0]!), '␀␇␛␡��');
  });

  test('characters the font lacks draw as U+FFFD; invisible ones are left out', () => {
    // 日, 🎉 and 👍 are missing; ZWJ, VS16, the skin-tone modifier and ZWSP have no visible form.
    assert.equal(drawnText(layout('日🎉\u200d👍🏽\ufe0f\u200b.', SMALL)[0]!), '���.');
    const [f] = layout('日🎉\u200d👍🏽\ufe0f\u200b.', SMALL);
    assert.equal(f!.text, '日🎉\u200d👍🏽\ufe0f\u200b.', 'the frame still covers the left-out characters');
  });

  test('a lone surrogate draws as U+FFFD', () => {
    assert.equal(drawnText(layout('a\ud800b\udc00', SMALL)[0]!), 'a�b�');
  });

  test('a combining mark with no precomposed form is drawn over the cell before it', () => {
    const [f] = layout('x\u0301y', SMALL);
    assert.deepEqual([...f!.cells], [0x78, 0x79]);
    assert.deepEqual(f!.marks, [{ cell: 0, mark: 0x301 }]);
  });

  test('a mark with no cell before it gets a cell of its own', () => {
    const [f] = layout('\u0301a', SMALL);
    assert.deepEqual([...f!.cells], [0x301, 0x61]);
    assert.deepEqual(f!.marks, []);
  });

  test('a mark over the last cell of a frame belongs to that frame', () => {
    const text = `${'a'.repeat(29)}x\u0301b`;
    const [first, second] = layout(text, SMALL);
    assert.deepEqual(first!.marks, [{ cell: 29, mark: 0x301 }]);
    assert.ok(first!.text.endsWith('x\u0301'));
    assert.equal(second!.text, 'b');
  });

  test("a character left out after a full frame stays in that frame's text; the next frame starts at the next drawn one", () => {
    const text = `${'a'.repeat(30)}\u200d\u200db${'c'.repeat(5)}`;
    const [first, second, ...rest] = layout(text, SMALL);
    assert.equal(rest.length, 0);
    assert.equal(first!.text, `${'a'.repeat(30)}\u200d\u200d`);
    assert.equal(second!.start, 32);
    assert.equal(drawnText(second!), 'bccccc');
  });

  test('a text longer than a normalization segment comes out normalized whole, each frame starting where the last ended', () => {
    // Decomposed characters all through, so segments that broke a composition would show.
    const text = 'line e\u0301 A\u030a\tx\r\n'.repeat(12_000);
    const frames = layout(text, SMALL);
    assert.equal(frames.map((f) => f.text).join(''), text.normalize('NFC'));
    let at = 0;
    for (const f of frames) {
      assert.equal(f.start, at);
      at += f.text.length;
    }
  });

  test('text in pieces is laid out as if joined, a CR LF split between two pieces included', () => {
    const pieces = ['¶user: fix it e\u0301\r', '\n¶ai: done\ttwo\r', '\n¶out: ok\n', 'x'.repeat(70)];
    const joined = pieces.join('');
    const whole = layout(joined, SMALL);
    const inPieces = [...layoutFrames(pieces, SMALL)];
    assert.deepEqual(inPieces, whole);
    const drawn = inPieces.map(drawnText).join('');
    assert.equal(drawn.split('⏎').length - 1, 3, 'each CR LF and the LF are one newline cell each');
    assert.ok(!drawn.includes('\u240d'), 'no CR drawn on its own');
  });

  test('pieces read one at a time (any iterable) lay out the same, a CR ending the last piece included', () => {
    const pieces = ['¶user: fix it\r', '\n¶ai: done\r', '\n¶out: ok', ' and a CR at the very end\r'];
    function* oneAtATime(): Generator<string> {
      yield* pieces;
    }
    const whole = layout(pieces.join(''), SMALL);
    assert.deepEqual([...layoutFrames(oneAtATime(), SMALL)], whole);
    assert.ok(whole.map(drawnText).join('').endsWith('\u240d'), 'the last CR, with no LF after it, is drawn as a control picture');
  });

  test('layoutFrames gives the same frames one at a time, and stops where its caller stops', () => {
    const text = 'one\ttwo\nthree x\u0301 日本\u0007 '.repeat(9);
    const all = layout(text, SMALL);
    assert.ok(all.length > 4);
    const taken = [];
    for (const f of layoutFrames(text, SMALL)) {
      taken.push(f);
      if (taken.length === 3) break;
    }
    assert.deepEqual(taken, all.slice(0, 3));
  });

  test('empty text has no frames', () => {
    assert.deepEqual(layout('', SMALL), []);
  });

  test("a frame's layout depends on its own text only: laid out alone it comes out the same", () => {
    const text = 'one\ttwo\nthree x\u0301 日本\u0007 '.repeat(9);
    for (const f of layout(text, SMALL)) {
      const [alone, ...more] = layout(f.text, SMALL);
      assert.equal(more.length, 0);
      assert.deepEqual([...alone!.cells], [...f.cells]);
      assert.deepEqual(alone!.marks, f.marks);
    }
  });

  test('appending text keeps every full frame, and so its key', () => {
    const text = '¶user: line of the archive\n'.repeat(20);
    const before = layout(text, SMALL);
    const after = layout(`${text}¶ai: and more of it\n`, SMALL);
    const full = before.slice(0, -1);
    assert.ok(full.length > 3);
    for (const f of full) assert.equal(frameKey(after[f.index]!.geometry, after[f.index]!.text), frameKey(f.geometry, f.text));
  });

  test('maxEdgePx clamps the geometry the frames are laid out with', () => {
    const frames = layout('z'.repeat(5000), SHAPES.gemini, { maxEdgePx: 1000 });
    assert.deepEqual(frames[0]!.geometry, { advance: 8, pitch: 22, frameWidth: 1000, rows: 45 });
    assert.ok(frames.every((f) => f.width <= 1000 && f.height <= 1000));
  });

  test('a geometry with cells smaller than the glyph is refused', () => {
    assert.throws(() => layout('a', { advance: 7, pitch: 13, frameWidth: 100, rows: 1 }));
    assert.throws(() => layout('a', { advance: 8, pitch: 12, frameWidth: 100, rows: 1 }));
  });
});

describe('geometry', () => {
  test('clamping narrows and shortens, never touches the cell, and never refuses', () => {
    assert.deepEqual(clampGeometry(SHAPES.gemini, 1568), { advance: 8, pitch: 22, frameWidth: 1568, rows: 64 });
    assert.deepEqual(clampGeometry(SHAPES.claude, 600), { advance: 11, pitch: 16, frameWidth: 600, rows: 37 });
    assert.deepEqual(clampGeometry(SHAPES.gpt, 10_000), SHAPES.gpt, 'a larger edge changes nothing');
    assert.deepEqual(clampGeometry(SHAPES.claude, 5), { advance: 11, pitch: 16, frameWidth: 11, rows: 1 }, 'one cell at the least');
    assert.throws(() => clampGeometry(SHAPES.claude, 0));
  });

  test('shapes follow the model family, and an unknown model reads as Claude', () => {
    assert.equal(shapeNameFor('anthropic', 'claude-sonnet-4-5'), 'claude');
    assert.equal(shapeNameFor('openrouter', 'anthropic/claude-opus-4-1'), 'claude');
    assert.equal(shapeNameFor('amazon-bedrock', 'us.anthropic.claude-haiku-4-5'), 'claude');
    assert.equal(shapeNameFor('openai', 'gpt-5'), 'gpt');
    assert.equal(shapeNameFor('openai', 'o4-mini'), 'gpt');
    assert.equal(shapeNameFor('openrouter', 'openai/o3'), 'gpt');
    assert.equal(shapeNameFor('openai-codex', 'gpt-5-codex'), 'gpt');
    assert.equal(shapeNameFor('openai', 'some-future-model'), 'gpt');
    assert.equal(shapeNameFor('google', 'gemini-2.5-pro'), 'gemini');
    assert.equal(shapeNameFor('google-vertex', 'a-model'), 'gemini');
    assert.equal(shapeNameFor('openrouter', 'google/gemini-2.5-flash'), 'gemini');
    assert.equal(shapeNameFor('deepseek', 'deepseek-chat'), 'claude');
    assert.equal(shapeNameFor(undefined, undefined), 'claude');
    assert.deepEqual(shapeFor('google', 'gemini-2.5-pro'), SHAPES.gemini);
  });

  test('the shapes are the ones DESIGN.md names', () => {
    assert.deepEqual(SHAPES, {
      claude: { advance: 11, pitch: 16, frameWidth: 1568, rows: 44 },
      gpt: { advance: 8, pitch: 22, frameWidth: 1568, rows: 56 },
      gemini: { advance: 8, pitch: 22, frameWidth: 2048, rows: 64 },
    });
  });
});
