// Process settings from the environment: ALBEDO_SEARCH_INDEXER turns the background indexer
// on or off, ALBEDO_LEAN_HEAP the memory-first heap sizing, and anything else is refused at start.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StartupError } from '../../daemon/home.ts';
import { settingsFromEnv } from '../../daemon/settings.ts';

test('ALBEDO_SEARCH_INDEXER is on or off; unset leaves the default', () => {
  assert.deepEqual(settingsFromEnv({ ALBEDO_SEARCH_INDEXER: 'off' }), { searchIndexer: false });
  assert.deepEqual(settingsFromEnv({ ALBEDO_SEARCH_INDEXER: 'on' }), { searchIndexer: true });
  assert.deepEqual(settingsFromEnv({}), {});
  assert.throws(() => settingsFromEnv({ ALBEDO_SEARCH_INDEXER: 'no' }), StartupError);
});

test('ALBEDO_LEAN_HEAP is on or off; unset leaves the default', () => {
  assert.deepEqual(settingsFromEnv({ ALBEDO_LEAN_HEAP: 'off' }), { leanHeap: false });
  assert.deepEqual(settingsFromEnv({ ALBEDO_LEAN_HEAP: 'on' }), { leanHeap: true });
  assert.throws(() => settingsFromEnv({ ALBEDO_LEAN_HEAP: 'yes' }), StartupError);
});
