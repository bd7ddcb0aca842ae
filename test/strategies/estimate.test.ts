// Estimates of what a provider will see: images at the size after the provider's resize rule.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { StoredRow } from '../../protocol/rows.ts';
import { imageTokens, inputTokens, providerImageSize } from '../../strategies/estimate.ts';
import { plainTarget, rowTokens } from '../../strategies/projection.ts';

describe('image estimates at the provider size', () => {
  test('a 1 x 4,000,000 image is estimated as the 1 x 1568 strip the provider will see', () => {
    assert.deepEqual(providerImageSize(1, 4_000_000), { width: 1, height: 1568 });
    assert.equal(imageTokens(1, 4_000_000), 85 + 170 * 4 + 20);
  });

  test('scaling keeps the aspect ratio, never enlarges, and stops at 1 px', () => {
    assert.deepEqual(providerImageSize(3136, 1000), { width: 1568, height: 500 });
    assert.deepEqual(providerImageSize(1000, 800), { width: 1000, height: 800 });
    assert.deepEqual(providerImageSize(100_000, 10), { width: 1568, height: 1 });
    assert.deepEqual(providerImageSize(4096, 4096, 2048), { width: 2048, height: 2048 });
  });

  test("a row's images are estimated at the target's edge", () => {
    const row: StoredRow = {
      session: 's',
      seq: 1,
      row_class: 'user',
      key: null,
      created_at: 0,
      body: { kind: 'user', origin: 'user', content: [{ type: 'image', hash: 'a'.repeat(64), media_type: 'image/png', width: 4096, height: 4096 }] },
    };
    const image = { type: 'image' as const, hash: 'h', media_type: 'image/png', width: 4096, height: 4096 };
    assert.equal(rowTokens(row, plainTarget('s')), inputTokens({ role: 'user', content: [image] }));
    assert.equal(rowTokens(row, plainTarget('s')), 12 + 85 + 170 * 16 + 20, 'default edge 1568: 4 x 4 tiles');
    assert.equal(rowTokens(row, { ...plainTarget('s'), maxImageEdgePx: 1024 }), 12 + 85 + 170 * 4 + 20);
  });
});
