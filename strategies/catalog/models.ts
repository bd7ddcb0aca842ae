// The models catalog: the shipped models.json merged with the user's file, a forgiving id
// lookup, and the image facts strategies need (vision or not, images per request).
// Reading and watching the user's file is daemon/config.ts's job; this module only takes data.
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

/** The shape of both the shipped file and `$ALBEDO_HOME/models.json`. Ids must be unique. */
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

export interface Catalog {
  /** Every entry, shipped first (in file order), then user additions. */
  readonly models: readonly ModelEntry[];
  /** The entry for a request's model id, or undefined when nothing in the catalog fits. */
  lookup(modelId: string): ModelEntry | undefined;
}

let shipped: ModelsFile | undefined;

/** The catalog file this package ships, parsed once. A broken shipped file is a build bug. */
export function shippedModels(): ModelsFile {
  if (shipped === undefined) {
    const text = readFileSync(new URL('./models.json', import.meta.url), 'utf8');
    shipped = ModelsFile.parse(JSON.parse(text));
  }
  return shipped;
}

/**
 * Builds the catalog from the shipped list plus the user's file. A user entry whose id matches a
 * shipped one (ignoring case) replaces it entirely, in the shipped entry's position; any other
 * user entry is appended. Fields are never merged, so a user entry says everything about its model.
 */
export function loadCatalog(userFile?: ModelsFile | ModelsFileInput): Catalog {
  const user = userFile === undefined ? [] : ModelsFile.parse(userFile).models;
  const byId = new Map<string, ModelEntry>();
  for (const m of shippedModels().models) byId.set(m.id.toLowerCase(), m);
  for (const m of user) byId.set(m.id.toLowerCase(), m);
  return createCatalog([...byId.values()]);
}

const DATE_SUFFIX = /(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2})$/;
const ID_BOUNDARY = /[^a-z0-9]/;

/**
 * Lookup, first hit wins, all comparisons lower-cased:
 * 1. the id exactly as requested;
 * 2. without a provider prefix (everything up to the last `/`, as in `openrouter/anthropic/x`);
 * 3. then also without a trailing date (`-20250929`, `@20250929`, `-2025-04-14`);
 * 4. the longest catalog id that starts the remaining id and ends at a separator, so
 *    `gemini-2.5-pro-preview-06-05` finds `gemini-2.5-pro` but `o30` does not find `o3`.
 */
function createCatalog(models: readonly ModelEntry[]): Catalog {
  const byId = new Map(models.map((m) => [m.id.toLowerCase(), m] as const));
  const idsLongestFirst = [...byId.keys()].sort((a, b) => b.length - a.length);
  return {
    models,
    lookup(modelId) {
      const exact = modelId.trim().toLowerCase();
      const bare = exact.slice(exact.lastIndexOf('/') + 1);
      const undated = bare.replace(DATE_SUFFIX, '');
      for (const candidate of [exact, bare, undated]) {
        const hit = byId.get(candidate);
        if (hit !== undefined) return hit;
      }
      for (const id of idsLongestFirst) {
        if (undated.length > id.length && undated.startsWith(id) && ID_BOUNDARY.test(undated.charAt(id.length))) {
          return byId.get(id);
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
