// Resolves, for one session and one request, everything the compaction engine is handed:
// the session's enabled extensions and strategy, that strategy's settings, the model's
// catalog entry, the extension context and tools, and the summarizer for this connection.
import { AlbedoError } from '../protocol/errors.ts';
import { sessionChoices, saveSessionChoices } from '../storage/log/extension-choices.ts';
import type { Db } from '../storage/db.ts';
import { applySelection, globalChoices, resolve, type Choice, type Resolution, type SelectionChange } from '../strategies/extensions/selection.ts';
import { enabledMemoryTools, toolSpec } from '../strategies/extensions/tools.ts';
import type { WindowSettings } from '../strategies/harness/window.ts';
import type { Strategy } from '../strategies/contract.ts';
import { foldPluginsFor } from '../strategies/harness/prior.ts';
import type { EngineSetup } from '../strategies/prepare.ts';
import { createSummarizer } from '../strategies/summarizer/index.ts';
import { SummarizerConfig } from '../strategies/summarizer/types.ts';
import type { ModelEntry } from '../strategies/catalog/models.ts';
import type { ConfigSnapshot } from './config.ts';
import type { ConnectionState } from './context.ts';

/**
 * Resolutions already made, by the parsed extensions.json (a reload parses a new one; snapshots
 * of the same one are new objects per call) and session choices. A prepare resolves three times
 * (capabilities, image limits, engine setup), and every request of a session the same way until
 * a reload or an /extensions change; resolving walks the registry each time. Resolutions are
 * read-only. Bounded in entries per file.
 */
const resolutions = new WeakMap<ConfigSnapshot['extensions'], Map<string, Resolution>>();
const RESOLUTIONS_KEPT = 64;

/** The session's resolved extensions: defaults, then extensions.json, then its own choices. */
export function resolveExtensions(db: Db, config: ConfigSnapshot, sid: number | undefined): Resolution {
  const stored = sid === undefined ? [] : sessionChoices(db, sid);
  let made = resolutions.get(config.extensions);
  if (made === undefined) resolutions.set(config.extensions, made = new Map<string, Resolution>());
  const key = JSON.stringify(stored);
  let r = made.get(key);
  if (r === undefined) {
    r = resolve(config.modules.registry, globalChoices(config.extensions.extensions), stored.map((c) => ({ ...c, scope: 'session' as const })));
    made.set(key, r);
    if (made.size > RESOLUTIONS_KEPT) made.delete(made.keys().next().value!);
  }
  return r;
}

/** The session's choice list after an /extensions change, checked but not stored. */
function choicesAfter(db: Db, config: ConfigSnapshot, sid: number, change: SelectionChange, at: number): Choice[] {
  const current = resolveExtensions(db, config, sid);
  const existing = sessionChoices(db, sid).map((c) => ({ ...c, scope: 'session' as const }));
  return applySelection(config.modules.registry, current, existing, change, at);
}

/** Applies an /extensions change to one session and stores its new choice list. */
export function selectForSession(db: Db, config: ConfigSnapshot, sid: number, change: SelectionChange, at = Date.now()): Resolution {
  const next = choicesAfter(db, config, sid, change, at);
  saveSessionChoices(db, sid, next.map((c) => ({ name: c.name, enabled: c.enabled, at: c.at })));
  return resolveExtensions(db, config, sid);
}

function requireStrategy(config: ConfigSnapshot, strategy: string): void {
  const registry = config.modules.registry;
  const def = registry.get(strategy);
  if (def === undefined || def.kind !== 'strategy') {
    throw new AlbedoError('unknown_strategy', `"${strategy}" is not a compaction strategy (known: ${registry.strategies.map((s) => s.name).join(', ')})`, { strategy });
  }
}

/**
 * Makes `strategy` the session's own, as `/extensions enable <strategy>` would — also when it
 * is already the resolved one, so a strategy that is only the default becomes a session choice
 * a later default change cannot displace.
 */
export function chooseStrategy(db: Db, config: ConfigSnapshot, sid: number, strategy: string): Resolution {
  requireStrategy(config, strategy);
  return selectForSession(db, config, sid, { enable: [strategy] });
}

/**
 * The resolution `chooseStrategy` would leave, refused the same way, with nothing stored:
 * what a `/compact <strategy>` dry run plans with.
 */
export function previewStrategy(db: Db, config: ConfigSnapshot, sid: number, strategy: string, at = Date.now()): Resolution {
  requireStrategy(config, strategy);
  const session = choicesAfter(db, config, sid, { enable: [strategy] }, at);
  return resolve(config.modules.registry, globalChoices(config.extensions.extensions), session);
}

/**
 * The strategy's section of extensions.json, already parsed by the schema it registered (every
 * strategy's settings carry the window fields). Without a strategy, rolling's window applies to
 * the uncompacted requests' trigger.
 */
function settingsFor(config: ConfigSnapshot, strategy: Strategy | null): WindowSettings {
  const sections: Readonly<Record<string, unknown>> = config.extensions;
  return (strategy === null ? config.extensions.rolling : sections[strategy.name]) as WindowSettings;
}

/** The block the enabled extensions add to the system prompt: one line per extension that acts on the session. */
export function extensionContext(config: ConfigSnapshot, resolution: Resolution): string {
  const lines: string[] = [];
  for (const name of resolution.enabled) {
    const def = config.modules.registry.get(name);
    if (def !== undefined && def.kind !== 'catalog') lines.push(`- ${name}: ${def.description}`);
  }
  if (lines.length === 0) return '';
  return ['Context management (albedo-compactd) is active for this session:', ...lines].join('\n');
}

/**
 * What the observation should say about the summarizer a compaction used, or null when there is
 * nothing to explain: `via` is the connection asked for client summaries (SummarizeRoutes.route),
 * `caller` the one whose request runs the compaction.
 */
export function summarizerNote(config: ConfigSnapshot, via: ConnectionState | undefined, caller: ConnectionState): string | null {
  const provider = config.extensions.summarizer?.provider;
  if (provider !== undefined && provider !== 'client') return null;
  if (via === undefined) {
    return provider === undefined ? 'summarizer extractive: no connection that answers summarize is open for this session' : null;
  }
  if (via === caller) return null;
  const who = via.client === undefined ? '' : ` (${via.client.name} ${via.client.version})`;
  return `summarizer client: written by connection ${via.id}${who}, the agent connection that last prepared this session`;
}

/** The catalog's entry for a model; none with the `models` extension off (the catalog is not consulted). */
export function catalogEntry(config: ConfigSnapshot, resolution: Resolution, modelId: string | null): ModelEntry | undefined {
  return modelId === null || !resolution.enabled.includes('models') ? undefined : config.models.lookup(modelId);
}

export function engineSetup(args: {
  db: Db;
  config: ConfigSnapshot;
  configErrors: Array<{ file: string; message: string }>;
  sid: number;
  modelId: string | null;
  /** The connection asked for `client` summaries; undefined when none answers summarize. */
  conn: ConnectionState | undefined;
  /** Extensions to set up with instead of the session's stored ones (a dry run's previewStrategy). */
  resolution?: Resolution;
  env?: NodeJS.ProcessEnv;
}): EngineSetup {
  const resolution = args.resolution ?? resolveExtensions(args.db, args.config, args.sid);
  const tables = args.config.modules;
  const strategy = resolution.strategy === null ? null : (tables.strategies[resolution.strategy] ?? null);
  const conn = args.conn;
  const peer = conn?.peer;
  const clientCall = conn?.canSummarize === true && peer !== undefined
    ? (params: Record<string, unknown>, signal?: AbortSignal) => peer.request('summarize', params, { signal })
    : undefined;
  const summarizerConfig = args.config.extensions.summarizer ?? SummarizerConfig.parse({});
  return {
    strategy,
    settings: settingsFor(args.config, strategy),
    modelId: args.modelId,
    model: catalogEntry(args.config, resolution, args.modelId),
    extensionContext: extensionContext(args.config, resolution),
    extensionTools: enabledMemoryTools(tables, resolution.enabled).map(toolSpec),
    summarizer: createSummarizer(summarizerConfig, { env: args.env ?? process.env, clientCall }),
    configErrors: args.configErrors,
    layers: resolution.enabled.flatMap((name) => {
      const make = tables.layers[name];
      return make === undefined ? [] : [make((args.config.extensions as Readonly<Record<string, unknown>>)[name])];
    }),
    folds: foldPluginsFor(resolution.enabled, tables.folds, resolution.strategy),
  };
}
