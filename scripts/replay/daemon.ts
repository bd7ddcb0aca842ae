// A throwaway daemon for a replay: a fresh temp home with an extensions.json that sets the
// rolling window, `node --import tsx daemon/main.ts` (or another entry; or, with `built`, the
// built daemon bin/albedod.js as `npm start` runs it, without tsx) spawned with ALBEDO_HOME, a
// connected client, and a stop() that shuts it down and deletes the home.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DAEMON_NODE_FLAGS } from '../../daemon/node-flags.ts';
import { AlbedoClient } from '../../protocol/client.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface ReplayDaemon {
  home: string;
  /** The daemon's process id (its CPU time can be read from /proc). */
  pid: number;
  client: AlbedoClient;
  stderr(): string;
  /** Closes the client, stops the daemon (SIGTERM, then SIGKILL after 5 s) and deletes the home it made. */
  stop(): Promise<void>;
}

/**
 * `home`: an existing folder to run in (a benchmark's database as its albedo.db), kept on stop;
 * by default a fresh one under `tmp`, deleted on stop.
 */
export async function startReplayDaemon(
  opts: { window: number; tmp?: string; home?: string; extensions?: Record<string, unknown>; env?: Record<string, string>; nodeArgs?: string[]; entry?: string; built?: boolean },
): Promise<ReplayDaemon> {
  const home = opts.home ?? fs.mkdtempSync(path.join(opts.tmp ?? os.tmpdir(), 'albedo-replay-'));
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify(opts.extensions ?? { rolling: { contextWindowTokens: opts.window } }));
  const entry = opts.built === true ? [path.join(root, 'bin/albedod.js')] : ['--import', 'tsx', opts.entry ?? path.join(root, 'daemon/main.ts')];
  const proc = spawn(process.execPath, [...DAEMON_NODE_FLAGS, ...(opts.nodeArgs ?? []), ...entry], {
    cwd: root,
    env: { ...process.env, ALBEDO_HOME: home, ALBEDO_LOG_LEVEL: 'warn', ALBEDO_PROXY_PORT: '0', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr.setEncoding('utf8').on('data', (d: string) => (err += d.length + err.length > 1_000_000 ? '' : d));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const removeHome = (): void => {
    if (opts.home === undefined) fs.rmSync(home, { recursive: true, force: true });
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const onData = (): void => {
        if (out.includes('listening on')) {
          proc.stdout.off('data', onData);
          resolve();
        }
      };
      proc.stdout.on('data', onData);
      void exited.then(() => reject(new Error(`albedod exited before listening: ${err}`)));
    });
  } catch (e) {
    removeHome();
    throw e;
  }
  const client = await AlbedoClient.connect(path.join(home, 'albedod.sock'), { client: { name: 'albedo-replay', version: '1' } });
  return {
    home,
    pid: proc.pid ?? -1,
    client,
    stderr: () => err,
    async stop() {
      await client.close();
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      removeHome();
    },
  };
}
