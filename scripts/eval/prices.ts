// Prices for the eval's cost figures: the model catalog's `price` when the entry has one
// (strategies/catalog/models.ts), else this eval-side table of list prices (USD per million
// tokens), else the default model's. Which one was used is reported with every run.
import { loadCatalog, type ModelEntry } from '../../strategies/catalog/models.ts';

export type EvalPrice = NonNullable<ModelEntry['price']>;

/** Eval-side defaults for models the catalog has no price for; list prices, not the catalog's. */
export const EVAL_DEFAULT_PRICES: Readonly<Record<string, EvalPrice>> = {
  'claude-sonnet-4-5': { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 },
  'claude-opus-4-5': { input: 5, output: 25, cache_read: 0.5, cache_write: 6.25 },
  'claude-haiku-4-5': { input: 1, output: 5, cache_read: 0.1, cache_write: 1.25 },
  'gpt-5': { input: 1.25, output: 10, cache_read: 0.125 },
  'gpt-5-codex': { input: 1.25, output: 10, cache_read: 0.125 },
};
export const FALLBACK_MODEL = 'claude-sonnet-4-5';

export interface PriceChoice {
  price: EvalPrice;
  /** Where it came from: `catalog` (entry id), `eval-default` (table key) or `eval-fallback`. */
  source: 'catalog' | 'eval-default' | 'eval-fallback';
  /** The model id the price is for. */
  model: string;
}

const catalog = loadCatalog();

/** The price of `model`: catalog first, then the eval table by the longest matching prefix, then the fallback model's. */
export function priceFor(model: string): PriceChoice {
  const entry = catalog.lookup(model);
  if (entry?.price !== undefined) return { price: entry.price, source: 'catalog', model: entry.id };
  const id = model.toLowerCase();
  const key = Object.keys(EVAL_DEFAULT_PRICES)
    .filter((k) => id === k || id.startsWith(`${k}-`) || id.startsWith(`${k}.`) || id.startsWith(`${k}@`))
    .sort((a, b) => b.length - a.length)[0];
  if (key !== undefined) return { price: EVAL_DEFAULT_PRICES[key]!, source: 'eval-default', model: key };
  return { price: EVAL_DEFAULT_PRICES[FALLBACK_MODEL]!, source: 'eval-fallback', model: FALLBACK_MODEL };
}
