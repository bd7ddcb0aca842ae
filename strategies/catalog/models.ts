// The models catalog: the shipped models.json (generated from @pydantic/genai-prices by
// scripts/catalog.ts) merged with the user's file, a forgiving id lookup, and the image facts
// strategies need (vision or not, images per request). Reading and watching the user's file is
// daemon/config.ts's job; this module only takes data.
import { readFileSync } from 'node:fs';
import { z } from 'zod';

const Modality = z.enum(['text', 'image']);

/** One model the daemon knows. Units: tokens for the window, pixels for the image edge. */
export const ModelEntry = z
  .strictObject({
    /** Catalog id, matched case-insensitively (see `Catalog.lookup`). */
    id: z.string().min(1),
    /** Provider name as the client reports it (`anthropic`, `openai`, `google`, ...). */
    provider: z.string().min(1),
    /** Context window in tokens. */
    context_window: z.number().int().positive(),
    /** Input modalities; text is mandatory, image optional. */
    input: z.array(Modality).min(1).max(2),
    /** Longest image edge (pixels) the model reads at native resolution. */
    max_image_edge_px: z.number().int().positive().optional(),
    /** Images one request may carry, when the upstream declares a limit. */
    max_images_per_request: z.number().int().positive().optional(),
    /** List prices in US dollars per million tokens (the eval's cost figures read them). */
    price: z
      .strictObject({
        input: z.number().nonnegative(),
        output: z.number().nonnegative(),
        cache_read: z.number().nonnegative().optional(),
        cache_write: z.number().nonnegative().optional(),
      })
      .optional(),
  })
  .refine((m) => m.input.includes('text'), { message: 'input must include "text"', path: ['input'] })
  .refine((m) => new Set(m.input).size === m.input.length, { message: 'input lists a modality twice', path: ['input'] })
  .transform((m) => ({
    ...m,
    input: m.input.includes('image') ? (['text', 'image'] as const) : (['text'] as const),
  }));
export type ModelEntry = z.output<typeof ModelEntry>;

/** The shape of `$ALBEDO_HOME/models.json` (the user's entries). Ids must be unique. */
export const ModelsFile = z
  .strictObject({ models: z.array(ModelEntry) })
  .superRefine((file, ctx) => {
    const seen = new Set<string>();
    file.models.forEach((m, i) => {
      const key = m.id.toLowerCase();
      if (seen.has(key)) ctx.addIssue({ code: 'custom', message: `duplicate model id "${m.id}"`, path: ['models', i, 'id'] });
      seen.add(key);
    });
  });
export type ModelsFile = z.output<typeof ModelsFile>;
/** What a caller may hand to `loadCatalog` before parsing (e.g. a test literal). */
export type ModelsFileInput = z.input<typeof ModelsFile>;

/** The shipped file: the entries, the other ids the package knows them by, and where they came from. */
export const ShippedModelsFile = z
  .strictObject({
    source: z.strictObject({
      /** The npm package the facts come from, its version, and its licence and copyright notice. */
      package: z.string().min(1),
      version: z.string().min(1),
      license: z.string().min(1),
      /** Day (YYYY-MM-DD) whose prices are listed, for prices that change on a date. */
      prices_as_of: z.string().regex(/^\d{4}-\d{2}-\d{2}$/),
    }),
    models: z.array(ModelEntry),
    /** Another id (lower case) -> the catalog id it names, e.g. `claude-sonnet-4.5` -> `claude-sonnet-4-5`. */
    aliases: z.record(z.string().min(1), z.string().min(1)),
  })
  .superRefine((file, ctx) => {
    const ids = new Set<string>();
    file.models.forEach((m, i) => {
      if (ids.has(m.id)) ctx.addIssue({ code: 'custom', message: `duplicate model id "${m.id}"`, path: ['models', i, 'id'] });
      if (m.id !== m.id.toLowerCase()) ctx.addIssue({ code: 'custom', message: `model id "${m.id}" is not lower case`, path: ['models', i, 'id'] });
      ids.add(m.id);
    });
    for (const [alias, id] of Object.entries(file.aliases)) {
      if (ids.has(alias)) ctx.addIssue({ code: 'custom', message: `alias "${alias}" is also a model id`, path: ['aliases', alias] });
      if (!ids.has(id)) ctx.addIssue({ code: 'custom', message: `alias "${alias}" names no model ("${id}")`, path: ['aliases', alias] });
      if (alias !== alias.toLowerCase()) ctx.addIssue({ code: 'custom', message: `alias "${alias}" is not lower case`, path: ['aliases', alias] });
    }
  });
export type ShippedModelsFile = z.output<typeof ShippedModelsFile>;

export interface Catalog {
  /** Every entry, shipped first (in file order), then user additions. */
  readonly models: readonly ModelEntry[];
  /** The entry for a request's model id, or undefined when nothing in the catalog fits. */
  lookup(modelId: string): ModelEntry | undefined;
}

let shipped: ShippedModelsFile | undefined;

/** The catalog file this package ships, parsed once. A broken shipped file is a build bug. */
export function shippedModels(): ShippedModelsFile {
  if (shipped === undefined) {
    const text = readFileSync(new URL('./models.json', import.meta.url), 'utf8');
    shipped = ShippedModelsFile.parse(JSON.parse(text));
  }
  return shipped;
}

/**
 * Builds the catalog from the shipped list plus the user's file. A user entry whose id is a
 * shipped id or alias (ignoring case) replaces that shipped entry entirely, in its position, and
 * the shipped entry's other ids then find the user's; any other user entry is appended. Fields
 * are never merged, so a user entry says everything about its model.
 *
 * The user's file is checked now (its errors belong to the reload that read it); the shipped file
 * is parsed, and the merged table built, on the first lookup, so a daemon start or a reload that
 * no request follows does not pay for them.
 */
export function loadCatalog(userFile?: ModelsFile | ModelsFileInput): Catalog {
  const user = userFile === undefined ? [] : ModelsFile.parse(userFile).models;
  let built: Catalog | undefined;
  const catalog = (): Catalog => (built ??= mergeWithShipped(user));
  return {
    get models() {
      return catalog().models;
    },
    lookup: (modelId) => catalog().lookup(modelId),
  };
}

function mergeWithShipped(user: readonly ModelEntry[]): Catalog {
  const base = shippedModels();
  const models: ModelEntry[] = [...base.models];
  const keys = new Map<string, number>(models.map((m, i) => [m.id, i] as const));
  for (const [alias, id] of Object.entries(base.aliases)) {
    const at = keys.get(id);
    if (at !== undefined) keys.set(alias, at);
  }
  for (const m of user) {
    const key = m.id.toLowerCase();
    const at = keys.get(key);
    if (at === undefined) {
      keys.set(key, models.length);
      models.push(m);
    } else {
      models[at] = m;
    }
  }
  return createCatalog(models, keys);
}

const DATE_SUFFIX = /(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2})$/;
const ID_BOUNDARY = /[^a-z0-9]/;

/**
 * Lookup, first hit wins, all comparisons lower-cased, each against the catalog ids and the
 * aliases (`keys`, lower case, each naming an index into `models`):
 * 1. the id exactly as requested;
 * 2. without a provider prefix (everything up to the last `/`, as in `openrouter/anthropic/x`);
 * 3. then also without a trailing date (`-20250929`, `@20250929`, `-2025-04-14`);
 * 4. the longest key that starts the remaining id and ends at a separator, so
 *    `gemini-2.5-pro-preview-06-05` finds `gemini-2.5-pro` but `o30` does not find `o3`.
 */
function createCatalog(models: readonly ModelEntry[], keys: ReadonlyMap<string, number>): Catalog {
  const keysLongestFirst = [...keys.keys()].sort((a, b) => b.length - a.length);
  const at = (key: string): ModelEntry | undefined => {
    const i = keys.get(key);
    return i === undefined ? undefined : models[i];
  };
  return {
    models,
    lookup(modelId) {
      const exact = modelId.trim().toLowerCase();
      const bare = exact.slice(exact.lastIndexOf('/') + 1);
      const undated = bare.replace(DATE_SUFFIX, '');
      for (const candidate of [exact, bare, undated]) {
        const hit = at(candidate);
        if (hit !== undefined) return hit;
      }
      for (const key of keysLongestFirst) {
        if (undated.length > key.length && undated.startsWith(key) && ID_BOUNDARY.test(undated.charAt(key.length))) {
          return at(key);
        }
      }
      return undefined;
    },
  };
}

/** Whether the model reads image input. A model the catalog does not know is assumed to. */
export function readsImages(entry: ModelEntry | undefined): boolean {
  return entry === undefined || (entry.input as readonly string[]).includes('image');
}

/** Images per request that upstreams declare themselves (the `claude` upstream uploads files). */
const DECLARED_BY_UPSTREAM: Readonly<Record<string, number>> = { claude: 100 };

/**
 * How many images snapcompact may put in one request for a provider. When the upstream declares
 * its limit (argument `declared`, or the small built-in table above), nine tenths of it, rounded
 * down but at least one; otherwise oh-my-pi's per-provider caps: 90 for anthropic,
 * amazon-bedrock, openrouter and antigravity (any provider named with "antigravity"), 200 for
 * openai, openai-codex and every google* provider, 10 for umans, and 5 for anything else,
 * including an unknown provider. The result is a count of images.
 */
export function providerImageCap(provider: string | undefined, declared?: number): number {
  const name = provider?.trim().toLowerCase() ?? '';
  const limit = declared ?? DECLARED_BY_UPSTREAM[name];
  if (limit !== undefined) return limit <= 0 ? 0 : Math.max(1, Math.floor((limit * 9) / 10));
  if (name === 'anthropic' || name === 'amazon-bedrock' || name === 'openrouter' || name.includes('antigravity')) {
    return 90;
  }
  if (name === 'openai' || name === 'openai-codex' || name.startsWith('google')) return 200;
  if (name === 'umans') return 10;
  return 5;
}
