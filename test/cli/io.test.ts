// The CLI's small output helpers: thousands separators without ICU, and when colour is on.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { colourWanted, n } from '../../cli/io.ts';

test('n groups thousands as en-US does', () => {
  for (const x of [0, 7, 999, 1000, 12_345, 1_234_567, -4321, 1e9, 12.5, 1234.25]) {
    assert.equal(n(x), x.toLocaleString('en-US', { maximumFractionDigits: 20 }), String(x));
  }
});

test('colour: a terminal without NO_COLOR; FORCE_COLOR turns it on elsewhere; NO_COLOR always wins', () => {
  assert.equal(colourWanted({ isTTY: true }, {}), true);
  assert.equal(colourWanted({ isTTY: true }, { TERM: 'dumb' }), false);
  assert.equal(colourWanted({ isTTY: false }, {}), false);
  assert.equal(colourWanted({}, { FORCE_COLOR: '1' }), true);
  assert.equal(colourWanted({ isTTY: true }, { NO_COLOR: '1', FORCE_COLOR: '1' }), false);
  // An empty NO_COLOR does not count (no-color.org).
  assert.equal(colourWanted({ isTTY: true }, { NO_COLOR: '' }), true);
});
