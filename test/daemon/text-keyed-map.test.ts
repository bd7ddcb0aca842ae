// TextKeyedMap: long texts found by a probe of their length and ends, confirmed by the whole
// text, so texts that share a probe miss each other rather than answer for each other.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TextKeyedMap } from '../../daemon/text-keyed-map.ts';

const edge = 'x'.repeat(600);
/** Same length, same first and last 600 characters: one probe. */
const a = `${edge}middle A${edge}`;
const b = `${edge}middle B${edge}`;

test('a text is found as a new string with the same content, and only by its own content', () => {
  const m = new TextKeyedMap<number>();
  m.set(a, 1);
  assert.equal(m.get(a.slice(0, 50) + a.slice(50)), 1);
  assert.equal(m.get(b), undefined, 'same probe, other text');
  assert.equal(m.get(`${a}!`), undefined);
  m.set('short', 2);
  assert.equal(m.get('short'), 2);
  assert.equal(m.get('shorT'), undefined);
});

test('a text with the same probe displaces the entry and says which; shift takes the oldest first', () => {
  const m = new TextKeyedMap<number>();
  m.set(a, 1);
  m.set('other', 2);
  assert.deepEqual(m.set(b, 3), { text: a, value: 1 });
  assert.equal(m.get(a), undefined);
  assert.equal(m.get(b), 3);
  assert.equal(m.size, 2);
  // b was set last, so 'other' is now the oldest; setting it again makes it the newest.
  m.set('other', 4);
  assert.deepEqual(m.shift(), { text: b, value: 3 });
  assert.deepEqual(m.shift(), { text: 'other', value: 4 });
  assert.equal(m.shift(), undefined);
});
