// The catalog generator: the shipped models.json is exactly what it makes from the installed
// @pydantic/genai-prices (so neither can change without the other), and its rules on a small
// hand-made provider list: ids, aliases, windows, modalities and prices.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { ModelInfo, Provider } from '@pydantic/genai-prices';
import type { CatalogFacts } from '../../../scripts/catalog/facts.ts';
import { generateCatalog, serializeCatalog } from '../../../scripts/catalog/generate.ts';
import { readInstalledPackage } from '../../../scripts/catalog/package-data.ts';
import { ShippedModelsFile } from '../../../strategies/catalog/models.ts';

const shippedPath = new URL('../../../strategies/catalog/models.json', import.meta.url);

test('the shipped models.json is what the generator makes from the installed package', async () => {
  const text = readFileSync(shippedPath, 'utf8');
  const shipped = ShippedModelsFile.parse(JSON.parse(text));
  const pkg = await readInstalledPackage();
  assert.equal(shipped.source.version, pkg.version, 'the installed package is not the one the file was made from: run `npm run catalog`');
  const { file } = generateCatalog(pkg.providers, { version: pkg.version, license: pkg.license, pricesAsOf: shipped.source.prices_as_of });
  assert.equal(text, serializeCatalog(file), "strategies/catalog/models.json differs from the generator's output: run `npm run catalog`");
});

function model(id: string, extra: Partial<ModelInfo> = {}): ModelInfo {
  return { id, match: { equals: id }, context_window: 100_000, prices: { input_mtok: 1, output_mtok: 2 }, ...extra };
}

function provider(id: string, models: ModelInfo[]): Provider {
  return { id, name: id, api_pattern: id, models };
}

const facts: CatalogFacts = {
  sources: [
    { id: 'acme', include: /^acme-/, provider: 'acme', openrouterPrefix: 'acme/' },
    { id: 'openrouter', include: /^bolt\//, provider: 'bolt' },
  ],
  notChat: /tts/,
  modalities: [
    { match: /^acme-vision/, input: ['text', 'image'], max_image_edge_px: 1000 },
    { match: /^(?:acme|bolt)-/, input: ['text'] },
  ],
  contextWindows: {},
};

const opts = { version: '9.9.9', license: 'MIT, Copyright (c) Acme', pricesAsOf: '2026-01-15' };

test('ids lose their router prefix and a -latest suffix; match rules become aliases', () => {
  const { file } = generateCatalog(
    [
      provider('acme', [
        model('acme-vision-latest', { match: { or: [{ starts_with: 'acme-vision-' }, { equals: 'acme-vision-1.0' }, { regex: '^x' }] } }),
        model('acme-tts'),
      ]),
      provider('openrouter', [model('bolt/bolt-coder'), model('other/thing')]),
    ],
    opts,
    facts,
  );
  assert.deepEqual(file.source, { package: '@pydantic/genai-prices', version: '9.9.9', license: 'MIT, Copyright (c) Acme', prices_as_of: '2026-01-15' });
  assert.deepEqual(file.models, [
    { id: 'acme-vision', provider: 'acme', context_window: 100_000, input: ['text', 'image'], max_image_edge_px: 1000, price: { input: 1, output: 2 } },
    { id: 'bolt-coder', provider: 'bolt', context_window: 100_000, input: ['text'], price: { input: 1, output: 2 } },
  ]);
  // `acme-vision-` loses its trailing dash and is then the id itself, so it is no alias.
  assert.deepEqual(file.aliases, { 'acme-vision-1.0': 'acme-vision', 'acme-vision-latest': 'acme-vision' });
  assert.doesNotThrow(() => ShippedModelsFile.parse(JSON.parse(serializeCatalog(file))));
});

test('a name two models claim is no alias; a -latest id that would collide keeps its suffix', () => {
  const { file } = generateCatalog(
    [
      provider('acme', [
        model('acme-a', { match: { or: [{ equals: 'acme-a' }, { equals: 'acme-shared' }] } }),
        model('acme-b', { match: { or: [{ equals: 'acme-b' }, { equals: 'acme-shared' }] } }),
        model('acme-b-latest'),
      ]),
      provider('openrouter', []),
    ],
    opts,
    facts,
  );
  assert.deepEqual(file.models.map((m) => m.id), ['acme-a', 'acme-b', 'acme-b-latest']);
  assert.deepEqual(file.aliases, {});
});

test("the window: ours first, then the package's, then OpenRouter's entry; without one the model is left out", () => {
  const { file, skipped } = generateCatalog(
    [
      provider('acme', [
        model('acme-ours', { context_window: 1_000_000 }),
        model('acme-routed', { context_window: undefined }),
        model('acme-none', { context_window: undefined }),
      ]),
      provider('openrouter', [model('acme/acme-routed', { context_window: 131_072 })]),
    ],
    opts,
    { ...facts, contextWindows: { 'acme-ours': 1_047_576 } },
  );
  assert.deepEqual(file.models.map((m) => [m.id, m.context_window]), [['acme-ours', 1_047_576], ['acme-routed', 131_072]]);
  assert.deepEqual(skipped, [{ id: 'acme-none', reason: 'no context window' }]);
});

test('our facts must earn their place: a window the package now gives, a window for no model, a model no modality rule covers', () => {
  const providers = [provider('acme', [model('acme-x')]), provider('openrouter', [])];
  assert.throws(() => generateCatalog(providers, opts, { ...facts, contextWindows: { 'acme-x': 100_000 } }), /repeats the package's 100000/);
  assert.throws(() => generateCatalog(providers, opts, { ...facts, contextWindows: { 'acme-gone': 5 } }), /"acme-gone", which is not in the catalog/);
  assert.throws(() => generateCatalog(providers, opts, { ...facts, modalities: [] }), /no modality rule .* matches "acme-x"/);
  assert.throws(() => generateCatalog([], opts, facts), /has no provider "acme"/);
});

test('prices: the base tier, cache rates when given, none without an output rate', () => {
  const { file } = generateCatalog(
    [
      provider('acme', [
        model('acme-tiered', {
          prices: { input_mtok: { base: 3, tiers: [{ start: 200_000, price: 6 }] }, output_mtok: 15, cache_read_mtok: 0.3, cache_write_mtok: 3.75 },
        }),
        model('acme-embed', { prices: { input_mtok: 0.1 } }),
      ]),
      provider('openrouter', []),
    ],
    opts,
    facts,
  );
  assert.deepEqual(file.models.map((m) => m.price), [{ input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 }, undefined]);
});

test("prices that change: the one in force on the day, and of a day's windows the one that holds longest", () => {
  const { file } = generateCatalog(
    [
      provider('acme', [
        model('acme-dated', {
          prices: [
            { prices: { input_mtok: 10, output_mtok: 40 } },
            { constraint: { type: 'start_date', start_date: '2026-01-01' }, prices: { input_mtok: 2, output_mtok: 8 } },
            { constraint: { type: 'start_date', start_date: '2027-01-01' }, prices: { input_mtok: 1, output_mtok: 4 } },
          ],
        }),
        // Standard rate for 16 hours, a discount for the other 8: the standard rate is listed.
        model('acme-peak', {
          prices: [
            { prices: { input_mtok: 0.135, output_mtok: 0.55 } },
            { constraint: { type: 'time_of_date', start_time: '00:30:00Z', end_time: '16:30:00Z' }, prices: { input_mtok: 0.27, output_mtok: 1.1 } },
          ],
        }),
        // Off-peak all day but for two short peak windows: the off-peak rate is listed.
        model('acme-offpeak', {
          prices: [
            { prices: { input_mtok: 0.22, output_mtok: 0.66 } },
            { constraint: { type: 'time_of_date', start_time: '01:00:00Z', end_time: '04:00:00Z' }, prices: { input_mtok: 0.44, output_mtok: 1.32 } },
            { constraint: { type: 'time_of_date', start_time: '06:00:00Z', end_time: '10:00:00Z' }, prices: { input_mtok: 0.44, output_mtok: 1.32 } },
          ],
        }),
      ]),
      provider('openrouter', []),
    ],
    opts,
    facts,
  );
  assert.deepEqual(file.models.map((m) => [m.id, m.price]), [
    ['acme-dated', { input: 2, output: 8 }],
    ['acme-peak', { input: 0.27, output: 1.1 }],
    ['acme-offpeak', { input: 0.22, output: 0.66 }],
  ]);
});
