// /extensions and /reload: list and select extensions per session or globally, and re-read
// the configuration files. Global choices live in extensions.json, so a selection without a
// session rewrites that file's `extensions` section (atomically) and reloads it.
import fs from 'node:fs';
import { AlbedoError } from '../../protocol/errors.ts';
import { commitOwed, durable } from '../../storage/db.ts';
import { requireSession } from '../../storage/transcript/sessions.ts';
import { validateSelection } from '../../strategies/extensions/selection.ts';
import type { DaemonServices, Handler } from '../context.ts';
import { resolveExtensions, selectForSession } from '../engine-setup.ts';

export const extensionsList: Handler<'extensions.list'> = (params, { daemon }) => {
  const sid = params.session === undefined ? undefined : requireSession(daemon.db, params.session).sid;
  const config = daemon.config();
  const resolution = resolveExtensions(daemon.db, config, sid);
  return {
    strategy: resolution.strategy,
    extensions: config.modules.registry.defs.map((d) => ({
      name: d.name,
      kind: d.kind,
      enabled: resolution.enabled.includes(d.name),
      available: d.available,
      default_enabled: d.defaultEnabled,
      chosen_by: resolution.explicit[d.name] ?? 'default',
      description: d.description,
    })),
  };
};

/** Rewrites the `extensions` section of extensions.json with the change applied. */
async function writeGlobalSelection(daemon: DaemonServices, change: { enable: string[]; disable: string[] }): Promise<void> {
  const file = daemon.paths.extensions;
  const problem = daemon.configProblems().find((p) => p.file === 'extensions.json');
  if (problem !== undefined) {
    throw new AlbedoError('invalid_config', `extensions.json is invalid (${problem.message}); fix it before changing the global selection`);
  }
  let raw: Record<string, unknown> = {};
  if (fs.existsSync(file)) raw = JSON.parse(fs.readFileSync(file, 'utf8') || '{}') as Record<string, unknown>;
  const { registry } = daemon.config().modules;
  const current = daemon.config().extensions.extensions;
  const touched = new Set([...change.enable, ...change.disable]);
  const enabling = change.enable.map((n) => registry.get(n));
  const strategyEnabled = enabling.some((d) => d?.kind === 'strategy');
  raw.extensions = {
    // Enabling a strategy globally replaces the global choice of any other strategy.
    enable: [
      ...current.enable.filter((n) => !touched.has(n) && !(strategyEnabled && registry.get(n)?.kind === 'strategy')),
      ...change.enable,
    ],
    disable: [...current.disable.filter((n) => !touched.has(n)), ...change.disable],
  };
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(raw, null, 2)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, file);
  await daemon.reloadConfig();
}

export const extensionsSelect: Handler<'extensions.select'> = async (params, { daemon }) => {
  const change = { enable: params.enable, disable: params.disable };
  if (params.session === undefined) {
    validateSelection(daemon.config().modules.registry, resolveExtensions(daemon.db, daemon.config(), undefined), change);
    await writeGlobalSelection(daemon, change);
    const r = resolveExtensions(daemon.db, daemon.config(), undefined);
    return { strategy: r.strategy, enabled: [...r.enabled] };
  }
  const session = params.session;
  return daemon.kernels.run(session, async () => {
    const s = requireSession(daemon.db, session);
    // Owed, paid off the event loop before the reply (storage/db.ts commitOwed).
    const r = commitOwed(daemon.db, () => selectForSession(daemon.db, daemon.config(), s.sid, change));
    await durable(daemon.db);
    return { strategy: r.strategy, enabled: [...r.enabled] };
  });
};

export const reload: Handler<'reload'> = async (_params, { daemon }) => {
  await daemon.reloadConfig();
  return { version: daemon.config().version, config_errors: daemon.configProblems() };
};
