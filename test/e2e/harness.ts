// Spawns the real albedod in a temporary home and connects clients over its real socket.
// Every e2e test uses this: no in-process shortcuts, so what passes here is what users get.
// The temporary homes it creates are removed when the test process exits.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { after } from 'node:test';
import { AlbedoClient, type ClientOptions } from '../../protocol/client.ts';
import { DomainCode } from '../../protocol/errors.ts';
import { RpcRemoteError } from '../../protocol/rpc-message.ts';

/** Every row of a session (the client's helper, re-exported for these callers). */
export { allRows } from '../../protocol/client.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface DaemonHandle {
  home: string;
  socket: string;
  proc: ChildProcess;
  /** Everything the process wrote to stderr so far. */
  stderr(): string;
  connect(opts?: ClientOptions): Promise<AlbedoClient>;
  /** Sends a signal and waits for the exit; returns the exit code (null when killed). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Homes made by tempHome in this process, removed at exit (after every daemon has stopped). */
const createdHomes = new Set<string>();
process.on('exit', () => {
  for (const home of createdHomes) fs.rmSync(home, { recursive: true, force: true });
});

/** A fresh private directory under the system temp dir; it is deleted when the process exits. */
export function tempHome(): string {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-e2e-'));
  createdHomes.add(home);
  return home;
}

export interface StartOptions {
  home?: string;
  env?: Record<string, string>;
  /** Another entry module than daemon/main.ts (one that starts the daemon with extensions added). */
  entry?: string;
}

/** Resolves once the daemon prints its listening line; rejects with stderr if it exits first. */
export async function startDaemon(opts: StartOptions = {}): Promise<DaemonHandle> {
  const home = opts.home ?? tempHome();
  const { proc, exited, stderr, stdout } = spawnDaemon(home, opts.env, opts.entry);
  await new Promise<void>((resolve, reject) => {
    const onData = () => {
      if (stdout().includes('listening on')) {
        proc.stdout?.off('data', onData);
        resolve();
      }
    };
    proc.stdout?.on('data', onData);
    void exited.then((code) => reject(new Error(`albedod exited with ${code} before listening: ${stderr()}`)));
  });
  const socket = opts.env?.ALBEDO_SOCKET ?? path.join(home, 'albedod.sock');
  const clients: AlbedoClient[] = [];
  return {
    home,
    socket,
    proc,
    stderr,
    async connect(copts) {
      const c = await AlbedoClient.connect(socket, { client: { name: 'e2e', version: '1' }, ...copts });
      clients.push(c);
      return c;
    },
    async stop(signal = 'SIGTERM') {
      await Promise.all(clients.map((c) => c.close()));
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill(signal);
      return exited;
    },
  };
}

/**
 * A `startDaemon` for one test file whose daemons are all killed (SIGKILL) when the file's
 * tests end, for files that start daemons inside their tests.
 */
export function startEach(): (opts?: StartOptions) => Promise<DaemonHandle> {
  const running: DaemonHandle[] = [];
  after(async () => {
    await Promise.all(running.map((d) => d.stop('SIGKILL')));
  });
  return async (opts) => {
    const d = await startDaemon(opts);
    running.push(d);
    return d;
  };
}

/**
 * The daemon's log once it has a line with `text` (pino writes asynchronously, so a request's
 * reply can arrive before its log line); fails at once if the daemon exits instead.
 */
export async function loggedLine(d: DaemonHandle, text: string): Promise<string> {
  const file = path.join(d.home, 'albedod.log');
  for (;;) {
    const log = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    if (log.includes(text)) return log;
    assert.ok(d.proc.exitCode === null && d.proc.signalCode === null, `albedod exited (${d.proc.signalCode ?? d.proc.exitCode}) instead of logging "${text}"`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Spawns the daemon without waiting, for tests of start-up refusals. */
export function spawnDaemon(home: string, env: Record<string, string> = {}, entry = path.join(root, 'daemon/main.ts')) {
  const proc = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: root,
    env: { ...process.env, ALBEDO_HOME: home, ALBEDO_LOG_LEVEL: 'debug', ALBEDO_PROXY_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return { proc, exited, stdout: () => out, stderr: () => err };
}

/**
 * A raw socket speaking NDJSON by hand, for bad-input tests the typed client cannot send.
 * `next()` resolves with the next parsed line.
 */
export async function rawConnection(socketPath: string) {
  const sock = net.createConnection(socketPath);
  await new Promise<void>((resolve, reject) => {
    sock.once('connect', resolve);
    sock.once('error', reject);
  });
  let buf = '';
  const lines: unknown[] = [];
  const waiters: Array<(v: unknown) => void> = [];
  let closed = false;
  const closeWaiters: Array<() => void> = [];
  sock.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const v: unknown = JSON.parse(line);
      const w = waiters.shift();
      if (w) w(v);
      else lines.push(v);
    }
  });
  sock.on('close', () => {
    closed = true;
    for (const w of closeWaiters.splice(0)) w();
  });
  sock.on('error', () => undefined);
  return {
    sock,
    write(data: string | Buffer) {
      sock.write(data);
    },
    send(obj: unknown) {
      sock.write(`${JSON.stringify(obj)}\n`);
    },
    next(): Promise<unknown> {
      const v = lines.shift();
      if (v !== undefined) return Promise.resolve(v);
      return new Promise((resolve) => waiters.push(resolve));
    },
    closed(): Promise<void> {
      if (closed) return Promise.resolve();
      return new Promise((resolve) => closeWaiters.push(resolve));
    },
    async initialize() {
      this.send({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocol: 1, client: { name: 'raw', version: '1' } } });
      return this.next();
    },
    end() {
      sock.destroy();
    },
  };
}

/** Awaits a rejection with this `data.code` (and its wire code) and returns the error. */
export async function failsWith(p: Promise<unknown>, dataCode: string, wireCode?: number): Promise<RpcRemoteError> {
  let caught: unknown;
  try {
    await p;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof RpcRemoteError, `expected an error response with data.code ${dataCode}, got ${String(caught)}`);
  const data = caught.data as { code?: string } | undefined;
  assert.equal(data?.code, dataCode, caught.message);
  const expected = wireCode ?? (DomainCode as Record<string, number>)[dataCode];
  if (expected !== undefined) assert.equal(caught.code, expected);
  return caught;
}
