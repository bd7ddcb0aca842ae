// `npm start` as a terminal or a service manager runs it, in its own process group: signals
// sent to the whole group reach the daemon itself, with no wrapper in between that could die and
// orphan it. SIGHUP reloads and the daemon keeps serving; SIGTERM stops it in order. This runs
// the built package (bin/albedod.js -> dist/), which `npm install` builds.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { DAEMON_NODE_FLAGS } from '../../daemon/node-flags.ts';
import { AlbedoClient } from '../../protocol/client.ts';
import { tempHome } from './harness.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const groups: number[] = [];
after(() => {
  for (const g of groups) {
    try {
      process.kill(-g, 'SIGKILL');
    } catch {
      // the group is gone already
    }
  }
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(what: string, check: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** A process's command line, from /proc (Linux); undefined elsewhere. */
function commandLine(pid: number): string[] | undefined {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
  } catch {
    return undefined;
  }
}

/** The daemon's Node flags come before its script on its command line (daemon/node-flags.ts). */
function assertDaemonFlags(pid: number): void {
  const argv = commandLine(pid);
  if (argv === undefined) return;
  const script = argv.findIndex((a) => a.endsWith('albedod.js'));
  assert.ok(script > 0, `the daemon runs bin/albedod.js: ${argv.join(' ')}`);
  for (const flag of DAEMON_NODE_FLAGS) assert.ok(argv.slice(0, script).includes(flag), `${flag} is given to node: ${argv.join(' ')}`);
}

/** The parent pid of a process, from /proc (Linux). */
function parentOf(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

async function npmStart() {
  assert.ok(fs.existsSync(path.join(root, 'dist/daemon/main.js')), 'the package is not built: run npm run build (npm install does it)');
  const home = tempHome();
  const npm = spawn('npm', ['start', '--silent'], {
    cwd: root,
    detached: true,
    env: { ...process.env, ALBEDO_HOME: home, ALBEDO_LOG_LEVEL: 'info', ALBEDO_PROXY_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  groups.push(npm.pid!);
  let out = '';
  let err = '';
  npm.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  npm.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npm.on('exit', (code, signal) => resolve({ code, signal })));
  await until(`npm start to listen (stdout: ${out} stderr: ${err})`, () => out.includes('listening on'));
  const socket = path.join(home, 'albedod.sock');
  const status = async () => {
    const c = await AlbedoClient.connect(socket);
    try {
      return await c.call('daemon.status', {});
    } finally {
      await c.close();
    }
  };
  const daemonPid = (await status()).pid;
  const log = () => (fs.existsSync(path.join(home, 'albedod.log')) ? fs.readFileSync(path.join(home, 'albedod.log'), 'utf8') : '');
  return { npm, group: npm.pid!, home, socket, daemonPid, status, log, exited };
}

test("npm start: the daemon is npm's own child, a SIGHUP to the group reloads it, a SIGTERM stops it in order", async () => {
  const s = await npmStart();
  // No sh and no tsx between npm and the daemon: nothing that could exit on a signal and orphan it.
  const parent = parentOf(s.daemonPid);
  if (parent !== undefined) assert.equal(parent, s.npm.pid, 'the daemon runs directly under npm');
  assertDaemonFlags(s.daemonPid);

  process.kill(-s.group, 'SIGHUP');
  await until('the reload to be logged', () => s.log().includes('SIGHUP received: reloading configuration'));
  assert.ok(alive(s.daemonPid), 'SIGHUP must not stop the daemon');
  assert.equal((await s.status()).pid, s.daemonPid, 'the same daemon answers after SIGHUP');
  // npm itself has no SIGHUP handler and exits on it (that is npm's, not ours); the daemon stays
  // in the group, so the group's SIGTERM still reaches it.

  process.kill(-s.group, 'SIGTERM');
  await until('the daemon to exit', () => !alive(s.daemonPid));
  assert.match(s.log(), /"msg":"albedod stopped"/, 'an orderly stop logs its end');
  assert.equal(fs.existsSync(s.socket), false, 'an orderly stop removes the socket');
  assert.equal(fs.existsSync(path.join(s.home, 'albedod.pid')), false, 'and releases the lock');
});

test('npm start: a SIGTERM to the group stops the daemon in order and npm exits with it', async () => {
  const s = await npmStart();
  process.kill(-s.group, 'SIGTERM');
  const { code, signal } = await s.exited;
  assert.ok(code === 0 || signal === 'SIGTERM', `npm exited with ${code} / ${signal}`);
  await until('the daemon to exit', () => !alive(s.daemonPid));
  assert.match(s.log(), /"msg":"albedod stopped"/);
  assert.equal(fs.existsSync(s.socket), false);
});

test("albedod run by its own name starts node with the daemon's flags, from its first line", async () => {
  const home = tempHome();
  const proc = spawn(path.join(root, 'bin/albedod.js'), [], { env: { ...process.env, ALBEDO_HOME: home, ALBEDO_PROXY_PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  try {
    await until(`albedod to listen (${out})`, () => out.includes('listening on'));
    assertDaemonFlags(proc.pid!);
  } finally {
    proc.kill('SIGTERM');
  }
  assert.equal(await exited, 0);
});
