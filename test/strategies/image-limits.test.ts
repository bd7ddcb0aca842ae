// Which refusal limits a request gets: the client's declaration, then our table by provider,
// then the safe defaults, each limit on its own; the canonical key and the words of a reason.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { brokenLimits, imageLimits, limitsKey, SAFE_IMAGE_LIMITS, withinLimits } from '../../strategies/image-limits.ts';

test('each limit comes from the upstream when declared, else the provider table, else the safe defaults', () => {
  const claude = imageLimits({ provider: 'anthropic', model: 'claude-sonnet-4-5' });
  assert.deepEqual([claude.edgePx, claude.bytes, claude.pixels], [{ value: 8000, source: 'anthropic' }, { value: 3_932_160, source: 'anthropic' }, null]);

  const declared = imageLimits({ provider: 'anthropic', model: 'claude-sonnet-4-5', upstream: { max_image_accepted_edge_px: 2000, max_image_pixels: 1_000_000 } });
  assert.deepEqual(declared.edgePx, { value: 2000, source: 'the upstream' });
  assert.deepEqual(declared.pixels, { value: 1_000_000, source: 'the upstream' });
  assert.deepEqual(declared.bytes, { value: 3_932_160, source: 'anthropic' }, 'what the client did not declare still comes from the table');

  // OpenAI declares no refused edge: that one is the safe default.
  const gpt = imageLimits({ provider: 'openai', model: 'gpt-5' });
  assert.deepEqual([gpt.edgePx.source, gpt.bytes], ['the safe defaults', { value: 20 * 1024 * 1024, source: 'openai' }]);

  const unknown = imageLimits({ provider: 'somebody', model: 'm' });
  assert.deepEqual([unknown.edgePx.value, unknown.bytes.value], [SAFE_IMAGE_LIMITS.edgePx, SAFE_IMAGE_LIMITS.bytes]);
  assert.equal(unknown.bytes.source, 'the safe defaults');
});

test('the native edge the upstream declares (max_image_edge_px) is no refusal limit', () => {
  const l = imageLimits({ provider: 'anthropic', model: 'x', upstream: { max_image_edge_px: 1568 } });
  assert.equal(l.edgePx.value, 8000);
});

test('equal limits have equal keys whatever their sources; any different number changes the key', () => {
  const a = imageLimits({ provider: 'anthropic', model: 'a' });
  const b = imageLimits({ model: 'b', upstream: { max_image_accepted_edge_px: 8000, max_image_bytes: 3_932_160 } });
  assert.equal(limitsKey(a), limitsKey(b));
  assert.notEqual(limitsKey(a), limitsKey(imageLimits({ provider: 'anthropic', model: 'a', upstream: { max_image_pixels: 5 } })));
});

test('a reason names every limit broken and who set it', () => {
  const l = imageLimits({ provider: 'anthropic', model: 'claude-sonnet-4-5', upstream: { max_image_pixels: 1000 } });
  const img = { width: 9000, height: 10, bytes: 4_000_000 };
  assert.deepEqual(brokenLimits(l, img), [
    'over the 8000 px edge limit of claude-sonnet-4-5 (anthropic)',
    'over the 1000 pixel limit of the upstream',
    'over the 3932160 byte limit of claude-sonnet-4-5 (anthropic)',
  ]);
  assert.equal(withinLimits(l, img), false);
  assert.equal(withinLimits(l, { width: 40, height: 25, bytes: 10 }), true);
  assert.deepEqual(brokenLimits(l, { width: 40, height: 25, bytes: 10 }), []);
});
