// What this build implements, by extension name: the strategies the engine can run, and the
// settings section each extension reads from extensions.json. Adding a strategy is its folder
// plus its lines here; config validation and the engine read only these tables.
import type { z } from 'zod';
import type { FoldPlugin, LayerFactory, Strategy } from './contract.ts';
import { BUILTIN_EXTENSIONS, type ExtensionDef } from './extensions/catalog.ts';
import { lcm } from './lcm/lcm.ts';
import { lcmMemory } from './lcm/memory.ts';
import { notesLayer } from './notes/notes.ts';
import { NotesSettings } from './notes/settings.ts';
import { rolling } from './rolling/rolling.ts';
import { snapcompactMemory } from './snapcompact/memory.ts';
import { snapcompact } from './snapcompact/snapcompact.ts';

/** The strategies this build runs; an extension without an entry cannot be the active strategy. */
export const STRATEGIES: Readonly<Record<string, Strategy>> = { rolling, lcm, snapcompact };

/** The layers this build runs over the active strategy, by extension name; they run in registry order (notes first). */
export const LAYERS: Readonly<Record<string, LayerFactory>> = {
  notes: (section) => notesLayer(NotesSettings.parse(section ?? {})),
};

/** Fold plugins by the memory extension that registers them. */
export const FOLD_PLUGINS: Readonly<Record<string, FoldPlugin>> = { 'lcm-memory': lcmMemory, 'snapcompact-memory': snapcompactMemory };

/** Each extension's section of extensions.json (validated at load, defaults when absent). */
export const EXTENSION_SETTINGS = {
  rolling: rolling.settings,
  lcm: lcm.settings,
  snapcompact: snapcompact.settings,
  notes: NotesSettings,
} as const;

/** Strategies a script added (the eval's baselines); empty in the product. */
const added: ExtensionDef[] = [];
let sealed = false;

/**
 * For scripts only (scripts/eval/ registers its baselines, which the product does not ship):
 * adds strategies, each with its settings section, to this process's tables. Must run before
 * the daemon's modules load, since the configuration schema and the registry are built then;
 * once they are, it throws instead of being silently ignored.
 */
export function addStrategies(list: ReadonlyArray<{ strategy: Strategy; description: string }>): void {
  if (sealed) throw new Error('addStrategies: the extension registry was already built; add strategies before the daemon loads');
  for (const { strategy, description } of list) {
    if (strategy.name in STRATEGIES) throw new Error(`addStrategies: "${strategy.name}" is already registered`);
    (STRATEGIES as Record<string, Strategy>)[strategy.name] = strategy;
    (EXTENSION_SETTINGS as Record<string, z.ZodType>)[strategy.name] = strategy.settings;
    added.push({ name: strategy.name, kind: 'strategy', defaultEnabled: false, available: true, requires: [], description });
  }
}

/** The extension definitions this process runs: the shipped ones, then any a script added. Seals `addStrategies`. */
export function extensionDefs(): readonly ExtensionDef[] {
  sealed = true;
  return [...BUILTIN_EXTENSIONS, ...added];
}
