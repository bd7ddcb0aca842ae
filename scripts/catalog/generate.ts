// Builds the shipped models catalog (strategies/catalog/models.json) from @pydantic/genai-prices'
// bundled data and our own facts (./facts.ts). Pure over the data handed in: reading the package
// and writing the file is scripts/catalog.ts's job, and a test checks the shipped file is what
// this produces from the installed package, so the two cannot drift apart silently.
import { calcPrice, type MatchLogic, type ModelInfo, type ModelPrice, type Provider } from '@pydantic/genai-prices';
import type { ModelEntry, ShippedModelsFile } from '../../strategies/catalog/models.ts';
import { FACTS, type CatalogFacts } from './facts.ts';

export interface GenerateOptions {
  /** The installed package's version and licence notice, recorded in the file. */
  readonly version: string;
  readonly license: string;
  /** Day (YYYY-MM-DD, UTC) whose prices the file lists, for prices that change on a date. */
  readonly pricesAsOf: string;
}

export interface Generated {
  readonly file: ShippedModelsFile;
  /** Package models left out, with the reason (for the generator's log). */
  readonly skipped: readonly { id: string; reason: string }[];
}

export const PACKAGE_NAME = '@pydantic/genai-prices';

/**
 * The catalog, in four steps:
 * 1. take each source provider's models that its `include` pattern accepts and that are text
 *    chat models (NOT_CHAT), in SOURCES order; the first source to give an id keeps it;
 * 2. the catalog id is the package id after its last `/`, without a `-latest` suffix unless
 *    that would collide with another model of the provider;
 * 3. the window is ours (CONTEXT_WINDOWS) when we state one, else the package's, else the same
 *    model's on OpenRouter; a model with none is skipped. Modalities and the image edge come
 *    from MODALITIES, the price from `listPrice`;
 * 4. aliases are the other ids the package's own match rules name (`equals` and `starts_with`
 *    values, also inside `or`), minus any that is a catalog id, looks like no chat model
 *    (NOT_CHAT) or is named by two models.
 * Facts of ours that the package now gives the same, or that name no model, stop the generator:
 * the table must shrink as the package grows.
 */
export function generateCatalog(providers: readonly Provider[], opts: GenerateOptions, facts: CatalogFacts = FACTS): Generated {
  const openrouter = providers.find((p) => p.id === 'openrouter');
  const models: ModelEntry[] = [];
  const taken = new Set<string>();
  const aliasClaims = new Map<string, Set<string>>();
  const skipped: { id: string; reason: string }[] = [];
  const windowsUsed = new Set<string>();

  for (const source of facts.sources) {
    const provider = providers.find((p) => p.id === source.id);
    if (provider === undefined) throw new Error(`${PACKAGE_NAME} has no provider "${source.id}"`);
    const chosen = provider.models.filter((m) => source.include.test(m.id.toLowerCase()) && !facts.notChat.test(m.id.toLowerCase()));
    const rawIds = new Set(chosen.map((m) => bareId(m.id)));
    for (const m of chosen) {
      const raw = bareId(m.id);
      const unlatest = raw.replace(/-latest$/, '');
      const id = unlatest !== raw && !rawIds.has(unlatest) ? unlatest : raw;
      if (taken.has(id)) {
        skipped.push({ id: m.id, reason: `id "${id}" already given by an earlier source` });
        continue;
      }
      const window = contextWindow(facts.contextWindows[id], m, source.openrouterPrefix, openrouter);
      if (facts.contextWindows[id] !== undefined) windowsUsed.add(id);
      if (window === undefined) {
        skipped.push({ id: m.id, reason: 'no context window' });
        continue;
      }
      const rule = facts.modalities.find((r) => r.match.test(id));
      if (rule === undefined) throw new Error(`no modality rule in scripts/catalog/facts.ts matches "${id}"`);
      const price = listPrice(provider, m, opts.pricesAsOf);
      models.push({
        id,
        provider: source.provider,
        context_window: window,
        input: rule.input.length === 2 ? ['text', 'image'] : ['text'],
        ...(rule.max_image_edge_px === undefined ? {} : { max_image_edge_px: rule.max_image_edge_px }),
        ...(price === undefined ? {} : { price }),
      });
      taken.add(id);
      for (const alias of [raw, ...matchNames(m.match)]) {
        if (alias === id || facts.notChat.test(alias)) continue;
        const claims = aliasClaims.get(alias) ?? new Set<string>();
        claims.add(id);
        aliasClaims.set(alias, claims);
      }
    }
  }
  for (const id of Object.keys(facts.contextWindows)) {
    if (!windowsUsed.has(id)) throw new Error(`CONTEXT_WINDOWS names "${id}", which is not in the catalog`);
  }

  const aliases: Record<string, string> = {};
  for (const alias of [...aliasClaims.keys()].sort()) {
    const claims = [...(aliasClaims.get(alias) ?? [])];
    if (claims.length === 1 && claims[0] !== undefined && !taken.has(alias)) aliases[alias] = claims[0];
  }
  return {
    file: { source: { package: PACKAGE_NAME, version: opts.version, license: opts.license, prices_as_of: opts.pricesAsOf }, models, aliases },
    skipped,
  };
}

/** The file text: one model and one alias per line, so a package update reads as a small diff. */
export function serializeCatalog(file: ShippedModelsFile): string {
  const lines = [
    '{',
    `  "source": ${JSON.stringify(file.source)},`,
    '  "models": [',
    file.models.map((m) => `    ${JSON.stringify(m)}`).join(',\n'),
    '  ],',
    '  "aliases": {',
    Object.entries(file.aliases)
      .map(([alias, id]) => `    ${JSON.stringify(alias)}: ${JSON.stringify(id)}`)
      .join(',\n'),
    '  }',
    '}',
  ];
  return `${lines.join('\n')}\n`;
}

function bareId(id: string): string {
  const lower = id.trim().toLowerCase();
  return lower.slice(lower.lastIndexOf('/') + 1);
}

function contextWindow(
  ours: number | undefined,
  m: ModelInfo,
  openrouterPrefix: string | undefined,
  openrouter: Provider | undefined,
): number | undefined {
  if (ours !== undefined) {
    if (ours === m.context_window) throw new Error(`CONTEXT_WINDOWS for "${m.id}" repeats the package's ${ours}: remove it`);
    return ours;
  }
  if (m.context_window !== undefined) return m.context_window;
  if (openrouterPrefix === undefined || openrouter === undefined) return undefined;
  const routed = `${openrouterPrefix}${m.id.toLowerCase()}`;
  return openrouter.models.find((o) => o.id.toLowerCase() === routed)?.context_window;
}

/** `equals` and `starts_with` values of a match rule, also under `or` (an `and` narrows, so not). */
function matchNames(match: MatchLogic): string[] {
  if ('or' in match) return match.or.flatMap(matchNames);
  const value = 'equals' in match ? match.equals : 'starts_with' in match ? match.starts_with : undefined;
  if (value === undefined) return [];
  const name = bareId(value).replace(/[-@.:_]+$/, '');
  return /^[a-z0-9][a-z0-9._:@-]*$/.test(name) && name.length >= 3 ? [name] : [];
}

/**
 * List prices in USD per million tokens: input, output, and the cache read and (five-minute)
 * write rates when the package has them. A tiered price gives its base tier (below the long
 * context threshold). Where prices change over time, the package's own rule (`calcPrice` with a
 * timestamp) picks them at each half hour of `asOf` (UTC), and the price that holds for most of
 * that day is listed: the standard rate beside a shorter off-peak discount, or the off-peak rate
 * beside shorter peak windows. No input or output rate means no price.
 */
function listPrice(provider: Provider, m: ModelInfo, asOf: string): ModelEntry['price'] {
  let chosen: ModelPrice | undefined;
  if (!Array.isArray(m.prices)) chosen = m.prices;
  else {
    const alone: Provider = { ...provider, models: [m], fallback_model_providers: [] };
    const seen = new Map<string, { price: ModelPrice; count: number }>();
    for (let half = 0; half < 48; half++) {
      const at = new Date(`${asOf}T00:15:00Z`);
      at.setUTCMinutes(at.getUTCMinutes() + half * 30);
      const result = calcPrice({}, m.id, { provider: alone, timestamp: at });
      if (result === null) throw new Error(`${PACKAGE_NAME} prices no "${m.id}" by its own id`);
      const key = JSON.stringify(result.model_price);
      const slot = seen.get(key) ?? { price: result.model_price, count: 0 };
      slot.count += 1;
      seen.set(key, slot);
    }
    for (const slot of seen.values()) {
      if (chosen === undefined || slot.count > (seen.get(JSON.stringify(chosen))?.count ?? 0)) chosen = slot.price;
    }
  }
  if (chosen === undefined) return undefined;
  const input = rate(chosen.input_mtok);
  const output = rate(chosen.output_mtok);
  if (input === undefined || output === undefined) return undefined;
  const cacheRead = rate(chosen.cache_read_mtok);
  const cacheWrite = rate(chosen.cache_write_mtok);
  return {
    input,
    output,
    ...(cacheRead === undefined ? {} : { cache_read: cacheRead }),
    ...(cacheWrite === undefined ? {} : { cache_write: cacheWrite }),
  };
}

function rate(value: ModelPrice[string]): number | undefined {
  if (value === undefined) return undefined;
  return typeof value === 'number' ? value : value.base;
}
