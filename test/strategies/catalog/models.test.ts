// The models catalog: id lookup (provider prefixes, dates, longest prefix), user entries that
// replace or add models, the vision default for unknown models, and snapcompact's image caps.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  loadCatalog,
  ModelsFile,
  providerImageCap,
  readsImages,
  shippedModels,
} from '../../../strategies/catalog/models.ts';

test('the shipped catalog parses and covers the main providers', () => {
  const ids = shippedModels().models.map((m) => m.id);
  for (const id of ['claude-sonnet-4-5', 'gpt-5', 'gpt-4.1', 'o3', 'gemini-2.5-pro', 'gpt-oss-120b', 'deepseek-chat']) {
    assert.ok(ids.includes(id), id);
  }
  const c = loadCatalog();
  assert.equal(c.lookup('gpt-4.1')?.context_window, 1047576);
  assert.equal(c.lookup('gpt-4o')?.context_window, 128000);
  assert.equal(c.lookup('claude-opus-4-1')?.max_image_edge_px, 1568);
  assert.deepEqual(c.lookup('gpt-oss-120b')?.input, ['text']);
});

test('an exact id wins over any rewrite', () => {
  const c = loadCatalog();
  assert.equal(c.lookup('claude-sonnet-4-5')?.id, 'claude-sonnet-4-5');
  assert.equal(c.lookup('CLAUDE-SONNET-4-5')?.id, 'claude-sonnet-4-5');
});

test('a provider prefix is stripped, including nested router prefixes', () => {
  const c = loadCatalog();
  assert.equal(c.lookup('anthropic/claude-haiku-4-5')?.id, 'claude-haiku-4-5');
  assert.equal(c.lookup('openai/gpt-5-mini')?.id, 'gpt-5-mini');
  assert.equal(c.lookup('openrouter/google/gemini-2.5-flash')?.id, 'gemini-2.5-flash');
});

test('dated suffixes in dash, at-sign and ISO forms are stripped', () => {
  const c = loadCatalog();
  assert.equal(c.lookup('claude-sonnet-4-5-20250929')?.id, 'claude-sonnet-4-5');
  assert.equal(c.lookup('claude-sonnet-4-5@20250929')?.id, 'claude-sonnet-4-5');
  assert.equal(c.lookup('anthropic/claude-3-7-sonnet-20250219')?.id, 'claude-3-7-sonnet');
  assert.equal(c.lookup('gpt-4.1-2025-04-14')?.id, 'gpt-4.1');
});

test('the longest catalog id that prefixes the request at a separator is used', () => {
  const c = loadCatalog();
  assert.equal(c.lookup('gemini-2.5-pro-preview-06-05')?.id, 'gemini-2.5-pro');
  // claude-sonnet-4 and claude-sonnet-4-5 both prefix it; the longer one wins.
  assert.equal(c.lookup('claude-sonnet-4-5-thinking')?.id, 'claude-sonnet-4-5');
  assert.equal(c.lookup('gpt-5-codex-high')?.id, 'gpt-5-codex');
});

test('a prefix that does not end at a separator does not match', () => {
  const c = loadCatalog();
  assert.equal(c.lookup('o30'), undefined);
  assert.equal(c.lookup('totally-unknown-model'), undefined);
  assert.equal(c.lookup(''), undefined);
});

test('a user entry with a shipped id replaces it wholesale', () => {
  const c = loadCatalog({
    models: [{ id: 'gpt-4o', provider: 'azure', context_window: 64000, input: ['text'] }],
  });
  const hit = c.lookup('openai/gpt-4o-2024-08-06');
  assert.deepEqual(hit, { id: 'gpt-4o', provider: 'azure', context_window: 64000, input: ['text'] });
  assert.equal(c.models.filter((m) => m.id === 'gpt-4o').length, 1);
});

test('a user entry with a new id is added, and lookups use it', () => {
  const shippedCount = loadCatalog().models.length;
  const c = loadCatalog({
    models: [{ id: 'my-local-llm', provider: 'ollama', context_window: 32768, input: ['text'] }],
  });
  assert.equal(c.models.length, shippedCount + 1);
  assert.equal(c.lookup('ollama/my-local-llm:latest')?.context_window, 32768);
});

test('a models file with duplicate ids, unknown keys or no text modality is rejected', () => {
  const dup = ModelsFile.safeParse({
    models: [
      { id: 'x', provider: 'p', context_window: 1, input: ['text'] },
      { id: 'X', provider: 'p', context_window: 2, input: ['text'] },
    ],
  });
  assert.equal(dup.success, false);
  assert.equal(ModelsFile.safeParse({ models: [{ id: 'x', provider: 'p', context_window: 1, input: ['text'], windw: 3 }] }).success, false);
  assert.equal(ModelsFile.safeParse({ models: [{ id: 'x', provider: 'p', context_window: 1, input: ['image'] }] }).success, false);
  assert.equal(ModelsFile.safeParse({ models: [{ id: 'x', provider: 'p', context_window: 0, input: ['text'] }] }).success, false);
});

test('input lists are normalized to text first', () => {
  const c = loadCatalog({ models: [{ id: 'v', provider: 'p', context_window: 10, input: ['image', 'text'] }] });
  assert.deepEqual(c.lookup('v')?.input, ['text', 'image']);
});

test('readsImages: unknown models count as vision-capable, text-only entries do not', () => {
  const c = loadCatalog();
  assert.equal(readsImages(undefined), true);
  assert.equal(readsImages(c.lookup('no-such-model')), true);
  assert.equal(readsImages(c.lookup('claude-opus-4-5')), true);
  assert.equal(readsImages(c.lookup('deepseek-chat')), false);
  assert.equal(readsImages(c.lookup('gpt-oss-120b')), false);
});

test('provider image caps follow the per-provider table', () => {
  for (const p of ['anthropic', 'amazon-bedrock', 'openrouter', 'antigravity', 'google-antigravity']) {
    assert.equal(providerImageCap(p), 90, p);
  }
  for (const p of ['openai', 'openai-codex', 'google', 'google-vertex', 'google-gemini-cli']) {
    assert.equal(providerImageCap(p), 200, p);
  }
  assert.equal(providerImageCap('umans'), 10);
  assert.equal(providerImageCap('mistral'), 5);
  assert.equal(providerImageCap(undefined), 5);
  assert.equal(providerImageCap('Anthropic'), 90);
});

test('a declared upstream limit gives nine tenths of it, overriding the table', () => {
  assert.equal(providerImageCap('claude'), 90);
  assert.equal(providerImageCap('umans', 100), 90);
  assert.equal(providerImageCap('openai', 20), 18);
  assert.equal(providerImageCap(undefined, 5), 4);
  assert.equal(providerImageCap('x', 1), 1);
  assert.equal(providerImageCap('x', 0), 0);
});
