// What this build implements: one list of extension modules, each exported by its own folder
// (strategies/extensions/module.ts says what a module holds). Everything else the build knows
// about its extensions is read off this list: the registry and its order, each extension's
// section of extensions.json, the strategies, layers and fold plugins the engine runs, and the
// memory tools with how each one runs. Adding an extension is its folder, one line in
// BUILTIN_MODULES and, when it stores tables, a migration (docs/compaction.md). A daemon runs
// the set built from this list plus whatever its starter adds (`extensionSet`).
import type { z } from 'zod';
import { lcmExtension, lcmMemoryExtension } from './lcm/extension.ts';
import { modelsExtension } from './catalog/extension.ts';
import type { FoldPlugin, LayerFactory, Strategy } from './contract.ts';
import { withFallback } from './harness/fallback.ts';
import { createRegistry, type ExtensionDef, type Registry } from './extensions/catalog.ts';
import type { ExtensionModule, MemoryToolDef } from './extensions/module.ts';
import { notesExtension } from './notes/extension.ts';
import { rollingExtension } from './rolling/extension.ts';
import { snapcompactExtension, snapcompactMemoryExtension } from './snapcompact/extension.ts';

/** The shipped extensions, in registry order: the order layers and fold providers run in. */
const BUILTIN_MODULES = [rollingExtension, lcmExtension, snapcompactExtension, notesExtension, lcmMemoryExtension, snapcompactMemoryExtension, modelsExtension] as const;

/** Each shipped extension's section of extensions.json, typed by name. */
type SectionsOf<M extends ExtensionModule> = { [E in M as E extends { settings: z.ZodType } ? E['name'] : never]: E extends { settings: infer S } ? S : never };
export type ExtensionSections = SectionsOf<(typeof BUILTIN_MODULES)[number]>;

/** A memory tool with the extension that provides it. */
export interface MemoryTool extends MemoryToolDef {
  readonly extension: string;
}

/** Everything read off the list of one daemon's extension modules. */
export interface ExtensionSet {
  /** The modules, the shipped ones first. */
  readonly modules: readonly ExtensionModule[];
  /** The registry's view of each: name, kind, default and requirements. */
  readonly defs: readonly ExtensionDef[];
  /** The registry built from `defs`: what selections resolve against. */
  readonly registry: Registry;
  /** Each extension's section of extensions.json (validated at load, defaults when absent). */
  readonly settings: ExtensionSections;
  /** The strategies by name; an extension without one cannot be the active strategy. */
  readonly strategies: Readonly<Record<string, Strategy>>;
  /** The layers run over the active strategy, by name, in registry order (notes first). */
  readonly layers: Readonly<Record<string, LayerFactory>>;
  /** Fold plugins by the memory extension that registers them. */
  readonly folds: Readonly<Record<string, FoldPlugin>>;
  /** Every memory tool, in registry order. */
  readonly tools: readonly MemoryTool[];
  /** The tables the extensions' saved state lives in. */
  readonly stateTables: readonly string[];
}

function defOf(m: ExtensionModule): ExtensionDef {
  return { name: m.name, kind: m.kind, defaultEnabled: m.defaultEnabled, available: true, requires: m.requires, description: m.description };
}

/** Checks what the type cannot: one name each, one role each, a strategy exactly where the kind says. */
function checked(modules: readonly ExtensionModule[]): readonly ExtensionModule[] {
  const names = new Set<string>();
  for (const m of modules) {
    if (names.has(m.name)) throw new Error(`extension modules: "${m.name}" is registered twice`);
    names.add(m.name);
    if ([m.strategy, m.layer, m.fold].filter((r) => r !== undefined).length > 1) throw new Error(`extension modules: "${m.name}" is more than one of strategy, layer and fold`);
    if ((m.kind === 'strategy') !== (m.strategy !== undefined)) throw new Error(`extension modules: "${m.name}" is of kind ${m.kind} but ${m.strategy === undefined ? 'has no' : 'has a'} strategy`);
    if (m.strategy !== undefined && m.strategy.name !== m.name) throw new Error(`extension modules: "${m.name}" carries the strategy "${m.strategy.name}"`);
  }
  return Object.freeze([...modules]);
}

/** Each strategy as the engine runs it: with its fallback, if it names one, resolved by name. */
function resolveFallbacks(byName: Record<string, Strategy>): Record<string, Strategy> {
  return Object.fromEntries(Object.entries(byName).map(([name, s]) => [name, withFallback(s, byName)]));
}

/**
 * The extensions one daemon runs: the shipped ones, then `added` (the eval's baselines, a test's
 * fixture), checked and read off once. The daemon is handed this value (daemon/start.ts); nothing
 * in the process is changed by building one.
 */
export function extensionSet(added: readonly ExtensionModule[] = []): ExtensionSet {
  const modules = checked([...BUILTIN_MODULES, ...added]);
  const by = <T>(pick: (m: ExtensionModule) => T | undefined): Record<string, T> => Object.fromEntries(modules.flatMap((m) => (pick(m) === undefined ? [] : [[m.name, pick(m)!]])));
  const defs = modules.map(defOf);
  return {
    modules,
    defs,
    registry: createRegistry(defs),
    settings: by((m) => m.settings) as ExtensionSections,
    strategies: resolveFallbacks(by((m) => m.strategy)),
    layers: by((m) => m.layer),
    folds: by((m) => m.fold),
    tools: modules.flatMap((m) => (m.tools ?? []).map((t) => ({ ...t, extension: m.name }))),
    stateTables: modules.flatMap((m) => m.tables ?? []),
  };
}

/** The shipped build's extensions: what albedod runs unless its starter adds some. */
export const BUILTIN_SET: ExtensionSet = extensionSet();
