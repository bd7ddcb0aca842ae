// albedod as a process: checks the home, takes its lock before touching the socket, starts the
// daemon with its extension set and wires the signals (TERM/INT stop in order, HUP is the reload
// signal). daemon/main.ts calls it with the shipped extensions; the eval and the extension test
// call it with theirs added, so no module-level table is ever changed.
import v8 from 'node:v8';
import { extensionSet } from '../strategies/index.ts';
import type { ExtensionModule } from '../strategies/extensions/module.ts';
import { Daemon, DEFAULT_SETTINGS } from './daemon.ts';
import { acquireHomeLock, prepareHome, resolvePaths, StartupError } from './home.ts';
import { createLogger } from './logger.ts';
import { settingsFromEnv } from './settings.ts';

/** How far past what survived a major collection the lean heap lets the old generation grow. */
const HEAP_GROWING_PERCENT = 40;

export interface StartOptions {
  /** Extension modules run after the shipped ones (the eval's baselines, a test's fixture). */
  readonly extensions?: readonly ExtensionModule[];
}

async function run(opts: StartOptions): Promise<void> {
  const modules = extensionSet(opts.extensions);
  const paths = resolvePaths();
  const settings = settingsFromEnv();
  // A daemon serving many sessions churns through short-lived request data, and left to its
  // defaults V8 lets the old generation grow to several times what is live before collecting it
  // again. The lean heap bounds that growth: each major collection sets the next limit at most
  // HEAP_GROWING_PERCENT above what survived. The young generation keeps its default size, so a
  // request's data and a compaction's decoded rows still die young. --optimize-for-size, used
  // before, shrank the young generation too: that data then reached the old generation, whose
  // collections ran far more often and paused longer, other sessions' requests waiting behind
  // them (docs/performance.md, stop 46). A tighter bound (20%) kept the same peaks but ran a
  // full collection every few hundred milliseconds of a long compaction (stop 47). V8 reads the
  // flag as it sizes the heap after each collection, so setting it here, after start, applies.
  if (settings.leanHeap ?? DEFAULT_SETTINGS.leanHeap) v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  prepareHome(paths.home);
  const lock = acquireHomeLock(paths);
  const { log, flush } = createLogger(paths.log);
  let daemon: Daemon;
  try {
    daemon = await Daemon.start(paths, log, settings, modules);
  } catch (err) {
    lock.release();
    await flush();
    throw err;
  }

  let exiting = false;
  const stop = async (reason: string, code: number): Promise<void> => {
    if (exiting) return;
    exiting = true;
    try {
      await daemon.shutdown(reason);
    } catch (err) {
      log.error({ err }, 'shutdown failed');
      code = 1;
    }
    lock.release();
    await flush();
    process.exit(code);
  };
  daemon.onStopped = () => void stop('daemon.shutdown', 0);
  process.on('SIGTERM', () => void stop('SIGTERM', 0));
  process.on('SIGINT', () => void stop('SIGINT', 0));
  // SIGHUP is /reload: re-read extensions.json and models.json, and tell live sessions.
  process.on('SIGHUP', () => {
    log.info('SIGHUP received: reloading configuration');
    daemon.reloadConfig().then(
      () => log.info({ method: 'reload' }, 'SIGHUP reload done'),
      (err: unknown) => log.error({ err, method: 'reload' }, 'SIGHUP reload failed'),
    );
  });
  process.on('uncaughtException', (err) => {
    log.fatal({ err }, 'uncaught exception');
    void stop('uncaught exception', 1);
  });
  process.on('unhandledRejection', (err) => {
    log.fatal({ err }, 'unhandled rejection');
    void stop('unhandled rejection', 1);
  });
  process.stdout.write(`albedod ${daemon.version} listening on ${paths.socket}\n`);
}

/** Runs albedod in this process until a signal or daemon.shutdown; a failed start exits 1 with the reason. */
export function startDaemon(opts: StartOptions = {}): void {
  run(opts).catch((err: unknown) => {
    const message = err instanceof StartupError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err);
    process.stderr.write(`albedod: ${message}\n`);
    process.exit(1);
  });
}
