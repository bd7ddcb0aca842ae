// The extension registry: which extensions a build knows, their kind, whether they are on by
// default, whether their implementation has landed, and what each one needs enabled beside it.
// The shipped definitions are read off the extension modules (strategies/index.ts); selection
// rules live in selection.ts; the daemon decides which registry to install.

export type ExtensionKind = 'strategy' | 'layer' | 'memory' | 'catalog';

export interface ExtensionDef {
  /** Name used in extensions.json, `/extensions` and `/compact <name>`. */
  readonly name: string;
  /** `strategy`: compacts a session (one at a time); `layer`: runs over the active strategy;
   *  `memory`: stored folds and read-only tools; `catalog`: model facts. */
  readonly kind: ExtensionKind;
  /** On when nobody chose otherwise. */
  readonly defaultEnabled: boolean;
  /** False while this build lacks the implementation; such an extension cannot be enabled. */
  readonly available: boolean;
  /** Extensions switched on together with this one (never strategies). */
  readonly requires: readonly string[];
  readonly description: string;
}

export interface Registry {
  /** Every definition, in registry order. */
  readonly defs: readonly ExtensionDef[];
  get(name: string): ExtensionDef | undefined;
  /** Strategy definitions in registry order (possibly none, for a custom host). */
  readonly strategies: readonly ExtensionDef[];
  /** Position of a name in registry order, or -1. */
  indexOf(name: string): number;
}

/**
 * Builds a registry from definitions. Throws on a duplicate name, on a requirement that names no
 * definition, and on a requirement that is a strategy (a strategy must never switch another on).
 */
export function createRegistry(defs: readonly ExtensionDef[]): Registry {
  const byName = new Map<string, ExtensionDef>();
  const index = new Map<string, number>();
  defs.forEach((d, i) => {
    if (byName.has(d.name)) throw new Error(`extension registry: duplicate name "${d.name}"`);
    byName.set(d.name, d);
    index.set(d.name, i);
  });
  for (const d of defs) {
    for (const r of d.requires) {
      const req = byName.get(r);
      if (req === undefined) throw new Error(`extension registry: "${d.name}" requires unknown "${r}"`);
      if (req.kind === 'strategy') throw new Error(`extension registry: "${d.name}" requires the strategy "${r}"`);
    }
  }
  const frozen = Object.freeze([...defs]);
  return {
    defs: frozen,
    strategies: Object.freeze(frozen.filter((d) => d.kind === 'strategy')),
    get: (name) => byName.get(name),
    indexOf: (name) => index.get(name) ?? -1,
  };
}
