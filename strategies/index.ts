// What this build implements, by extension name: the strategies the engine can run, and the
// settings section each extension reads from extensions.json. Adding a strategy is its folder
// plus its lines here; config validation and the engine read only these tables.
import type { FoldPlugin, LayerFactory, Strategy } from './contract.ts';
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
