// The extension registry: which extensions this build knows, their kind, whether they are on by
// default, whether their implementation has landed, and what each one needs enabled beside it.
// Plain data only; selection rules live in selection.ts, the daemon decides which registry to install.

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

/** The extensions this build ships, in registry order (the order fold providers run in). */
export const BUILTIN_EXTENSIONS: readonly ExtensionDef[] = [
  {
    name: 'rolling',
    kind: 'strategy',
    defaultEnabled: true,
    available: true,
    requires: [],
    description: 'one running summary of evicted history, a short recap of recent user messages, then the verbatim tail',
  },
  {
    name: 'lcm',
    kind: 'strategy',
    defaultEnabled: false,
    available: false,
    requires: [],
    description: 'a tree of source-backed summaries stored in SQLite, then the verbatim tail',
  },
  {
    name: 'snapcompact',
    kind: 'strategy',
    defaultEnabled: false,
    available: false,
    requires: ['snapcompact-memory'],
    description: 'evicted history archived as rendered text frames a vision model reads, then the verbatim tail',
  },
  {
    name: 'notes',
    kind: 'layer',
    defaultEnabled: true,
    available: false,
    requires: [],
    description: 'session notes rewritten at every compaction and sent at the top of each request',
  },
  {
    name: 'lcm-memory',
    kind: 'memory',
    defaultEnabled: true,
    // Its four tools work now; the folds it provides after a switch arrive with lcm.
    available: true,
    requires: [],
    description: "keeps LCM's stored summaries readable after a switch and provides the lcm_* tools",
  },
  {
    name: 'snapcompact-memory',
    kind: 'memory',
    defaultEnabled: true,
    // Its transcript tools work now; the archive it reads arrives with snapcompact.
    available: true,
    requires: [],
    description: 'keeps the snapcompact archive readable after a switch and provides transcript_grep and transcript_read',
  },
  {
    name: 'models',
    kind: 'catalog',
    defaultEnabled: true,
    available: true,
    requires: [],
    description: 'context windows and image input of known models, from the shipped list and models.json',
  },
];

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

/** The registry of the shipped build. */
export const BUILTIN_REGISTRY: Registry = createRegistry(BUILTIN_EXTENSIONS);
