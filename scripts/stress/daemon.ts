// Starts and stops real albedod processes for the stress parts: `node --import tsx
// daemon/main.ts` with ALBEDO_HOME set to a temp home under the run's scratch folder, waits for
// its listening line, reads its RSS from /proc, and kills it (SIGKILL for the crash part).
// Removing the homes is the runner's job (it deletes the scratch folder).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DAEMON_NODE_FLAGS } from '../../daemon/node-flags.ts';
import { AlbedoClient, type ClientOptions } from '../../protocol/client.ts';

/** Every row of a session (the client's helper, re-exported for these callers). */
export { allRows } from '../../protocol/client.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Longest wait for a daemon's listening line (ms). */
const START_TIMEOUT_MS = 30_000;

export interface StressDaemon {
  home: string;
  socket: string;
  proc: ChildProcess;
  pid: number;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  alive(): boolean;
  stderr(): string;
  connect(opts?: ClientOptions): Promise<AlbedoClient>;
  /** Resident set size from /proc/<pid>/status, in bytes (0 once the process is gone). */
  rss(): number;
  /** SIGKILL, resolved once the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM (SIGKILL after 10 s), resolved once the process is gone. */
  stop(): Promise<void>;
  /** After a full garbage collection: process.memoryUsage() (bytes). Only with `probe`. */
  liveMemory(): Promise<NodeJS.MemoryUsage>;
}

/** A fresh home under `tmp`, with an extensions.json when given. */
export function makeHome(tmp: string, name: string, extensions?: Record<string, unknown>): string {
  const home = fs.mkdtempSync(path.join(tmp, `${name}-`));
  if (extensions !== undefined) fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify(extensions));
  return home;
}

/**
 * Spawns the daemon; with `waitListening` false it resolves at once (the start-up part polls).
 * With `probe` it loads gc-probe.ts, which liveMemory() asks.
 */
export async function startDaemon(home: string, opts: { env?: Record<string, string>; waitListening?: boolean; probe?: boolean } = {}): Promise<StressDaemon> {
  const probe = opts.probe === true ? ['--import', path.join(root, 'scripts/stress/gc-probe.ts')] : [];
  const proc = spawn(process.execPath, [...DAEMON_NODE_FLAGS, '--import', 'tsx', ...probe, path.join(root, 'daemon/main.ts')], {
    cwd: root,
    env: { ...process.env, ALBEDO_HOME: home, ALBEDO_LOG_LEVEL: 'warn', ALBEDO_PROXY_PORT: '0', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-200_000)));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const alive = (): boolean => proc.exitCode === null && proc.signalCode === null;
  const socket = path.join(home, 'albedod.sock');
  if (opts.waitListening !== false) {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`albedod did not listen within ${START_TIMEOUT_MS} ms: ${err}`)), START_TIMEOUT_MS);
      const onData = (): void => {
        if (out.includes('listening on')) {
          clearTimeout(timer);
          proc.stdout.off('data', onData);
          resolve();
        }
      };
      proc.stdout.on('data', onData);
      onData();
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`albedod exited with ${code} before listening: ${err}`));
      });
    });
  }
  const gone = async (signal: NodeJS.Signals, after: number): Promise<void> => {
    if (!alive()) return;
    proc.kill(signal);
    const timer = after > 0 ? setTimeout(() => proc.kill('SIGKILL'), after) : undefined;
    await exited;
    clearTimeout(timer);
  };
  return {
    home,
    socket,
    proc,
    pid: proc.pid ?? -1,
    exited,
    alive,
    stderr: () => err,
    connect: (copts) => AlbedoClient.connect(socket, { client: { name: 'albedo-stress', version: '1' }, ...copts }),
    rss: () => rssOf(proc.pid ?? -1),
    kill: () => gone('SIGKILL', 0),
    stop: () => gone('SIGTERM', 10_000),
    liveMemory: async () => {
      if (opts.probe !== true) throw new Error('liveMemory needs a daemon started with probe');
      const file = path.join(home, 'memory.json');
      fs.rmSync(file, { force: true });
      proc.kill('SIGUSR2');
      for (let i = 0; i < 500 && !fs.existsSync(file); i++) await sleep(10);
      return JSON.parse(fs.readFileSync(file, 'utf8')) as NodeJS.MemoryUsage;
    },
  };
}

export function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? 0 : Number(m[1]) * 1024;
  } catch {
    return 0;
  }
}

export const MB = 1024 * 1024;

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Percentile of sorted numbers (nearest rank). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
