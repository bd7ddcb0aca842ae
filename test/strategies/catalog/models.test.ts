// The models catalog: id lookup (provider prefixes, dates, the package's aliases, longest prefix),
// user entries that replace or add models, the vision default for unknown models, and
// snapcompact's image caps. The shipped file's agreement with its generator is tested in
// test/scripts/catalog/generate.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadCatalog, ModelsFile, providerImageCap, readsImages, shippedModels } from '../../../strategies/catalog/models.ts';

test('the shipped catalog parses and covers what people run today', () => {
  const ids = shippedModels().models.map((m) => m.id);
  for (
    const id of [
      'claude-sonnet-4-5',
      'claude-haiku-4-5',
      'claude-opus-4-1',
      'claude-opus-4-5',
      'gpt-5',
      'gpt-5-mini',
      'gpt-5.1',
      'gpt-4.1',
      'o3',
      'gpt-oss-120b',
      'gemini-2.5-pro',
      'gemini-2.5-flash',
      'deepseek-chat',
      'deepseek-reasoner',
      'qwen3-coder',
    ]
  ) {
    assert.ok(ids.includes(id), id);
  }
  const c = loadCatalog();
  assert.equal(c.lookup('gpt-4.1')?.context_window, 1047576, "our figure (OpenAI's), not the package's rounded one");
  assert.equal(c.lookup('gpt-4o')?.context_window, 128000);
  assert.equal(c.lookup('claude-sonnet-4-5')?.context_window, 200000);
  assert.equal(c.lookup('gemini-2.5-pro')?.context_window, 1048576, "from OpenRouter's entry: the package's Google entry has none");
  assert.equal(c.lookup('claude-opus-4-1')?.max_image_edge_px, 1568);
  assert.deepEqual(c.lookup('gpt-oss-120b')?.input, ['text']);
  assert.deepEqual(c.lookup('qwen3-coder')?.input, ['text']);
  assert.equal(c.lookup('qwen3-coder')?.provider, 'qwen');
});

test("entries carry the package's list prices in USD per million tokens", () => {
  const c = loadCatalog();
  assert.deepEqual(c.lookup('claude-sonnet-4-5')?.price, { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 });
  assert.deepEqual(c.lookup('gpt-5')?.price, { input: 1.25, output: 10, cache_read: 0.125 });
  // o3's price changed on 2025-06-10; the later one is listed.
  assert.deepEqual(c.lookup('o3')?.price, { input: 2, output: 8, cache_read: 0.5 });
});

test('the request forms clients send find the same entry', () => {
  const c = loadCatalog();
  const forms: Record<string, string[]> = {
    'claude-sonnet-4-5': ['claude-sonnet-4-5', 'anthropic/claude-sonnet-4-5', 'claude-sonnet-4-5-20250929', 'anthropic/claude-sonnet-4-5-20250929', 'Claude-Sonnet-4-5', 'claude-sonnet-4.5', 'openrouter/anthropic/claude-sonnet-4.5'],
    'claude-haiku-4-5': ['claude-haiku-4-5-20251001', 'anthropic/claude-haiku-4.5'],
    'claude-opus-4-1': ['claude-opus-4-1-20250805', 'claude-opus-4.1'],
    'claude-sonnet-4-0': ['claude-sonnet-4', 'claude-sonnet-4-20250514', 'claude-sonnet-4@20250514'],
    'gpt-5': ['gpt-5', 'openai/gpt-5', 'GPT-5', 'gpt-5-2025-08-07', 'gpt-5-codex'],
    'gemini-2.5-pro': ['gemini-2.5-pro', 'google/gemini-2.5-pro', 'GEMINI-2.5-PRO', 'gemini-2.5-pro-preview-06-05'],
    'deepseek-reasoner': ['deepseek-reasoner', 'deepseek/deepseek-r1'],
    'qwen3-coder': ['qwen/qwen3-coder', 'openrouter/qwen/qwen3-coder'],
  };
  for (const [id, requests] of Object.entries(forms)) {
    for (const r of requests) assert.equal(c.lookup(r)?.id, id, r);
  }
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
  // gpt-5-codex is one of the package's names for gpt-5 (same window and price).
  assert.equal(c.lookup('gpt-5-codex-high')?.id, 'gpt-5');
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

test("a user entry named by a shipped alias replaces that entry, and every form of it finds the user's", () => {
  const mine = { id: 'claude-sonnet-4.5', provider: 'bedrock', context_window: 1_000_000, input: ['text', 'image'] as const };
  const c = loadCatalog({ models: [mine] });
  for (const r of ['claude-sonnet-4-5', 'anthropic/claude-sonnet-4-5-20250929', 'CLAUDE-SONNET-4.5']) {
    assert.deepEqual(c.lookup(r), { ...mine, input: ['text', 'image'] }, r);
  }
  assert.equal(c.models.length, loadCatalog().models.length, 'replaced, not added');
  assert.equal(c.lookup('claude-sonnet-4-0')?.context_window, 200000, 'other models keep the shipped facts');
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
