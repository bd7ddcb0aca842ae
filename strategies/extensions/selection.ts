// Extension selection as pure functions: resolve a session's enabled set from registry defaults,
// global choices (extensions.json) and session choices, and check and apply an /extensions change.
// Storing session choices and reading extensions.json belong to the daemon; this file does no I/O.
import { AlbedoError } from '../../protocol/errors.ts';
import type { ExtensionDef, Registry } from './catalog.ts';

export type ChoiceScope = 'global' | 'session';

/** One recorded decision to switch an extension on or off. */
export interface Choice {
  readonly name: string;
  readonly enabled: boolean;
  readonly scope: ChoiceScope;
  /** When it was made (ms since the epoch, or any increasing counter); orders choices of one scope. */
  readonly at: number;
}

/** Where an extension's resulting state came from. */
export type ChoiceSource = ChoiceScope | 'default';

export interface Resolution {
  /** Enabled extension names, in registry order. */
  readonly enabled: readonly string[];
  /** The one enabled strategy, or null when the registry has no usable strategy. */
  readonly strategy: string | null;
  /** For every registry name: the scope of the choice that decided its state, or `default`. */
  readonly explicit: Readonly<Record<string, ChoiceSource>>;
}

/** An `/extensions` request (or the `extensions` section of extensions.json). */
export interface SelectionChange {
  readonly enable?: readonly string[];
  readonly disable?: readonly string[];
}

/**
 * Whether an extension can be switched on in this build: it is available and so is everything it
 * requires, transitively (a cycle counts as usable once every member is available).
 */
export function isUsable(registry: Registry, def: ExtensionDef, seen: Set<string> = new Set()): boolean {
  if (!def.available) return false;
  if (seen.has(def.name)) return true;
  seen.add(def.name);
  return def.requires.every((r) => {
    const req = registry.get(r);
    return req !== undefined && isUsable(registry, req, seen);
  });
}

function byTime(choices: readonly Choice[]): Choice[] {
  return [...choices].sort((a, b) => a.at - b.at); // stable: equal times keep list order
}

/**
 * Resolves which extensions are on for a session.
 *
 * 1. Defaults first: every usable extension marked `defaultEnabled` is on; anything unavailable
 *    (or needing something unavailable) is off whatever anyone chose.
 * 2. Global choices are replayed in time order, then session choices in time order. Replaying
 *    session choices last is what lets a session choice beat a global one, however old it is.
 *    The scope comes from the list a choice arrives in. Choices naming an extension the registry
 *    lacks, or enabling one that is not usable, are skipped (they may predate this build).
 * 3. Enabling a strategy switches every other strategy off in the same step. So an explicit
 *    choice displaces a default strategy it did not pick, and a strategy that later becomes the
 *    default still loses to the older explicit choice replayed over it.
 * 4. When the registry has a usable strategy, exactly one stays on. Several left on (only
 *    possible from defaults) keep the first chosen explicitly, else the first in registry order;
 *    none left on brings back the registry's first usable default strategy, else its first usable
 *    strategy. A registry without a usable strategy resolves to `strategy: null`, and requests then
 *    go out uncompacted.
 * 5. Finally every enabled extension switches on what it requires, transitively, even if that
 *    was disabled by a choice; the requirement takes the source of the extension needing it.
 */
export function resolve(
  registry: Registry,
  globalChoices: readonly Choice[],
  sessionChoices: readonly Choice[],
): Resolution {
  const on = new Map<string, boolean>();
  const source = new Map<string, ChoiceSource>();
  const usable = new Map(registry.defs.map((d) => [d.name, isUsable(registry, d)] as const));

  for (const d of registry.defs) {
    on.set(d.name, d.defaultEnabled && usable.get(d.name) === true);
    source.set(d.name, 'default');
  }

  const replay = (choices: readonly Choice[], scope: ChoiceScope): void => {
    for (const c of byTime(choices)) {
      const def = registry.get(c.name);
      if (def === undefined) continue;
      if (!c.enabled) {
        on.set(def.name, false);
        source.set(def.name, scope);
        continue;
      }
      if (usable.get(def.name) !== true) continue;
      on.set(def.name, true);
      source.set(def.name, scope);
      if (def.kind !== 'strategy') continue;
      for (const other of registry.strategies) {
        if (other.name !== def.name && on.get(other.name) === true) {
          on.set(other.name, false);
          source.set(other.name, scope);
        }
      }
    }
  };
  replay(globalChoices, 'global');
  replay(sessionChoices, 'session');

  const enabledStrategies = registry.strategies.filter((s) => on.get(s.name) === true);
  if (enabledStrategies.length > 1) {
    const keep = enabledStrategies.find((s) => source.get(s.name) !== 'default') ?? enabledStrategies[0];
    for (const s of enabledStrategies) if (s !== keep) on.set(s.name, false);
  } else if (enabledStrategies.length === 0) {
    const usableStrategies = registry.strategies.filter((s) => usable.get(s.name) === true);
    const fallback = usableStrategies.find((s) => s.defaultEnabled) ?? usableStrategies[0];
    if (fallback !== undefined) {
      on.set(fallback.name, true);
      source.set(fallback.name, 'default');
    }
  }

  const pending = registry.defs.filter((d) => on.get(d.name) === true);
  for (let d = pending.pop(); d !== undefined; d = pending.pop()) {
    for (const r of d.requires) {
      const req = registry.get(r);
      if (req === undefined || on.get(r) === true) continue;
      on.set(r, true);
      source.set(r, source.get(d.name) ?? 'default');
      pending.push(req);
    }
  }

  const enabled = registry.defs.filter((d) => on.get(d.name) === true).map((d) => d.name);
  const strategy = registry.strategies.find((s) => on.get(s.name) === true)?.name ?? null;
  return { enabled, strategy, explicit: Object.fromEntries(source) };
}

/**
 * Checks an `/extensions` change against the registry and the session's current resolution,
 * throwing an AlbedoError for the first problem found:
 * - a name the registry lacks: `unknown_extension`;
 * - enabling an extension this build cannot run (or whose requirement it cannot run):
 *   `unknown_extension`, saying it is not available in this build;
 * - the same name both enabled and disabled, or two strategies enabled at once: `invalid_config`;
 * - disabling the session's strategy without enabling another: `invalid_config` (a session keeps
 *   exactly one strategy, so the way to leave one is to enable its replacement);
 * - disabling an extension that something staying enabled requires: `invalid_config`.
 * Disabling something already off, or enabling something already on, is fine.
 */
export function validateSelection(registry: Registry, current: Resolution, change: SelectionChange): void {
  const enable = change.enable ?? [];
  const disable = change.disable ?? [];
  for (const name of [...enable, ...disable]) {
    if (registry.get(name) === undefined) {
      throw new AlbedoError('unknown_extension', `unknown extension "${name}"`, { name });
    }
  }
  for (const name of enable) {
    if (disable.includes(name)) {
      throw new AlbedoError('invalid_config', `"${name}" is both enabled and disabled`, { name });
    }
  }
  for (const name of enable) {
    const def = registry.get(name) as ExtensionDef;
    if (!def.available) {
      throw new AlbedoError('unknown_extension', `extension "${name}" is not available in this build`, { name });
    }
    if (!isUsable(registry, def)) {
      const missing = def.requires.filter((r) => {
        const req = registry.get(r);
        return req === undefined || !isUsable(registry, req);
      });
      throw new AlbedoError(
        'unknown_extension',
        `extension "${name}" needs ${missing.map((m) => `"${m}"`).join(', ')}, which is not available in this build`,
        { name, missing },
      );
    }
  }
  const strategiesEnabled = enable.filter((n) => registry.get(n)?.kind === 'strategy');
  if (strategiesEnabled.length > 1) {
    throw new AlbedoError(
      'invalid_config',
      `a session uses one compaction strategy at a time; enable only one of ${strategiesEnabled.join(', ')}`,
      { strategies: strategiesEnabled },
    );
  }
  const active = current.strategy;
  if (active !== null && disable.includes(active) && strategiesEnabled.length === 0) {
    throw new AlbedoError(
      'invalid_config',
      `a session keeps one compaction strategy; enable another to replace ${active}`,
      { strategy: active },
    );
  }

  const after = new Set(current.enabled);
  for (const n of disable) after.delete(n);
  if (strategiesEnabled.length > 0) { for (const s of registry.strategies) after.delete(s.name); }
  for (const n of enable) after.add(n);
  for (const n of after) {
    for (const r of registry.get(n)?.requires ?? []) {
      if (disable.includes(r)) {
        throw new AlbedoError('invalid_config', `"${r}" cannot be disabled while "${n}" is enabled; it requires it`, {
          name: r,
          requiredBy: n,
        });
      }
    }
  }
}

/**
 * Validates a change (see `validateSelection`) and returns the session's new choice list: earlier
 * choices for the names the change mentions are dropped, then the change's disables and enables
 * are appended at time `at` (disables first, so a requirement an enable pulls in wins).
 */
export function applySelection(
  registry: Registry,
  current: Resolution,
  sessionChoices: readonly Choice[],
  change: SelectionChange,
  at: number,
): Choice[] {
  validateSelection(registry, current, change);
  const enable = change.enable ?? [];
  const disable = change.disable ?? [];
  const touched = new Set([...enable, ...disable]);
  return [
    ...sessionChoices.filter((c) => !touched.has(c.name)),
    ...disable.map((name): Choice => ({ name, enabled: false, scope: 'session', at })),
    ...enable.map((name): Choice => ({ name, enabled: true, scope: 'session', at })),
  ];
}

/** The global choices an `extensions` section of extensions.json stands for (disables first). */
export function globalChoices(section: SelectionChange | undefined, at = 0): Choice[] {
  return [
    ...(section?.disable ?? []).map((name): Choice => ({ name, enabled: false, scope: 'global', at })),
    ...(section?.enable ?? []).map((name): Choice => ({ name, enabled: true, scope: 'global', at })),
  ];
}
