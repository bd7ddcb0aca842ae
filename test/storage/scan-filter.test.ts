// The first look a search's scan takes at a row's raw JSON (storage/search/scan-filter.ts): it may
// keep a row that does not match, never drop one that does, and it must drop most that do not.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StoredBody } from '../../protocol/rows.ts';
import { fold } from '../../storage/search/fold.ts';
import { bodyMayMatch, FOLDS_TO_ASCII } from '../../storage/search/scan-filter.ts';
import { renderedWords, rowText } from '../../storage/transcript/row-text.ts';

test('FOLDS_TO_ASCII holds exactly the code points above ASCII whose fold has an ASCII letter or digit', () => {
  const expected: number[] = [];
  const listed: number[] = [];
  for (let cp = 0x80; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const ch = String.fromCodePoint(cp);
    if (/[a-z0-9]/.test(fold(ch))) expected.push(cp);
    if (FOLDS_TO_ASCII.test(ch)) listed.push(cp);
  }
  assert.deepEqual(listed.map((c) => c.toString(16)), expected.map((c) => c.toString(16)));
});

/** A small deterministic generator (mulberry32), so a failure repeats. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Pieces of text that stress what the JSON spells otherwise than the folded text: case, letters
// that fold to ASCII, decomposed accents, escapes, the words markers and notices write.
const PIECES = [
  'Error',
  'ERROR',
  'error:',
  'npm',
  'TEST',
  'Straße',
  'STRASSE',
  'ﬁle',
  'ﬀ',
  '\u212Aelvin',
  'İstanbul',
  'ſ',
  'ŉ',
  'ǰ',
  'ẖ',
  'ẞ',
  'e\u0301cole',
  'école',
  'naïve',
  'Ωmega',
  '"quoted"',
  'back\\slash',
  'tab\there',
  'line\nbreak',
  '\u001b[31mred\u001b[0m',
  'image',
  'fitted',
  'elided',
  'available',
  'kept as sent',
  'nested',
  'levels',
  'branch',
  'excursion',
  'capabilities',
  '1024',
  'x',
  '768',
  '12x34',
  'a',
  'b',
  '0',
  '42',
  ' ',
  '-',
  '_',
  '/',
  '→',
  '(',
  ')',
  '😀',
  '中文',
];

function words(rnd: () => number, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += PIECES[Math.floor(rnd() * PIECES.length)];
  return s;
}

function hash(rnd: () => number): string {
  let h = '';
  for (let i = 0; i < 64; i++) h += '0123456789abcdef'[Math.floor(rnd() * 16)];
  return h;
}

function image(rnd: () => number, elided: boolean) {
  return { type: 'image' as const, hash: hash(rnd), media_type: 'image/png', width: 1 + Math.floor(rnd() * 2000), height: 1 + Math.floor(rnd() * 2000), ...(elided ? { elided: true } : {}) };
}

function nested(rnd: () => number, depth: number): Record<string, unknown> {
  let v: Record<string, unknown> = { [words(rnd, 1)]: words(rnd, 2), n: Math.floor(rnd() * 1e6) / 100 };
  for (let i = 0; i < depth; i++) v = { [words(rnd, 1)]: v };
  return v;
}

function body(rnd: () => number): StoredBody {
  const text = () => ({ type: 'text' as const, text: words(rnd, 1 + Math.floor(rnd() * 6)) });
  const opaque = () => ({ type: 'opaque' as const, wire: 'anthropic', label: words(rnd, 2), data: { x: words(rnd, 1) } });
  switch (Math.floor(rnd() * 8)) {
    case 0:
      return { kind: 'user', origin: 'user', content: [text(), image(rnd, rnd() < 0.5), opaque()] };
    case 1:
      return {
        kind: 'assistant',
        content: [text(), { type: 'reasoning', text: words(rnd, 3) }, { type: 'tool_call', id: 'c', name: words(rnd, 1).trim() || 'run', arguments: nested(rnd, rnd() < 0.2 ? 70 : 2) }, opaque()],
      };
    case 2:
      return { kind: 'tool_result', call_id: 'c', is_error: false, content: [text(), image(rnd, false)] };
    case 3:
      return { kind: 'notice', body: { notice: 'image_fit', from_hash: hash(rnd), to: image(rnd, false), reason: words(rnd, 3) } };
    case 4:
      return { kind: 'notice', body: { notice: 'capabilities_changed', context: words(rnd, 3), ...(rnd() < 0.5 ? { instructions: words(rnd, 3) } : {}) } };
    case 5:
      return { kind: 'notice', body: { notice: 'excursion', branch: words(rnd, 1) } };
    case 6:
      return { kind: 'notice', body: { notice: 'excursion_return', branch: words(rnd, 1), marker_seq: 3, outcome: words(rnd, 4) } };
    default:
      return { kind: 'user', origin: 'notes', content: [text(), text()] };
  }
}

test('a row whose text holds the pattern is always kept: markers, notices, folding, escapes, over-deep arguments', () => {
  const rnd = random(35);
  let checked = 0;
  let filtered = 0;
  for (let i = 0; i < 3000; i++) {
    const b = body(rnd);
    const json = JSON.stringify(b);
    const folded = fold(rowText(b));
    // Needles cut from the row's own folded text (so they match), in several lengths.
    for (let k = 0; k < 6; k++) {
      const start = Math.floor(rnd() * folded.length);
      const needle = folded.slice(start, start + 3 + Math.floor(rnd() * 12));
      if (!folded.includes(needle) || needle === '') continue;
      const mayMatch = bodyMayMatch(needle);
      checked++;
      if (mayMatch === null) continue;
      filtered++;
      assert.ok(mayMatch(json), `dropped a matching row: needle ${JSON.stringify(needle)} in ${JSON.stringify(folded)}, JSON ${json}`);
    }
  }
  assert.ok(checked > 10_000 && filtered > checked / 3, `${filtered} of ${checked} needles were filtered`);
});

test('rows without the pattern are ruled out from their JSON, unless it spells a letter that folds to ASCII', () => {
  const row = (text: string) => JSON.stringify({ kind: 'user', origin: 'user', content: [{ type: 'text', text }] });
  const mayMatch = bodyMayMatch(fold('QuillWort-Needle'));
  assert.ok(mayMatch !== null);
  assert.equal(mayMatch(row('an ordinary line of output')), false);
  assert.equal(mayMatch(row('see quillwort-NEEDLE here')), true);
  // The anchor is the longest run of letters and digits ("needle" is shorter than "quillwort").
  assert.equal(mayMatch(row('quillwor t-needle')), false);
  assert.equal(mayMatch(row('die Straße')), true, 'ß folds to ss: derived, not trusted');
});

test('a pattern whose anchor only the rendering could write, or too short, is not filtered', () => {
  for (const word of fold(renderedWords()).match(/[a-z0-9]{3,}/g) ?? []) assert.equal(bodyMayMatch(word), null, word);
  assert.equal(bodyMayMatch('4x7'), null, "part of an image's width x height");
  assert.equal(bodyMayMatch('024x768'), null);
  assert.equal(bodyMayMatch('ab'), null);
  assert.equal(bodyMayMatch('a.b.c'), null);
  assert.ok(bodyMayMatch('1024') !== null, 'digits alone are in the JSON as numbers');
  assert.match(renderedWords(), /kept as sent/);
  assert.match(renderedWords(), /nested deeper than 64 levels/);
  assert.match(renderedWords(), /excursion on branch {2}returned/);
});
