// Where the daemon keeps its state ($ALBEDO_HOME) and the one-daemon-per-home lock.
// The lock is an exclusive SQLite transaction on a side file: the kernel drops it when the
// process dies, so a crashed daemon never leaves a home locked.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';

/** A start-up refusal: printed to the operator, never sent over the wire. */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}

export interface HomePaths {
  home: string;
  db: string;
  socket: string;
  lock: string;
  pid: string;
  log: string;
  extensions: string;
  models: string;
}

export function resolvePaths(env: NodeJS.ProcessEnv = process.env): HomePaths {
  const home = path.resolve(env.ALBEDO_HOME ?? path.join(os.homedir(), '.albedo'));
  return {
    home,
    db: path.join(home, 'albedo.db'),
    socket: path.resolve(env.ALBEDO_SOCKET ?? path.join(home, 'albedod.sock')),
    lock: path.join(home, 'albedod.lock'),
    pid: path.join(home, 'albedod.pid'),
    log: path.join(home, 'albedod.log'),
    extensions: path.join(home, 'extensions.json'),
    models: path.join(home, 'models.json'),
  };
}

/**
 * Creates the home (0700) or checks an existing one: it must be a real directory (not a
 * symlink), owned by us, and closed to group and others, since it holds every transcript.
 */
export function prepareHome(home: string): void {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(home);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    fs.mkdirSync(home, { recursive: true, mode: 0o700 });
    fs.chmodSync(home, 0o700);
    st = fs.lstatSync(home);
  }
  if (st.isSymbolicLink()) throw new StartupError(`${home} is a symlink; ALBEDO_HOME must be a real directory`);
  if (!st.isDirectory()) throw new StartupError(`${home} is not a directory`);
  if (typeof process.getuid === 'function' && st.uid !== process.getuid()) {
    throw new StartupError(`${home} belongs to uid ${st.uid}, not to this user (${process.getuid()})`);
  }
  if ((st.mode & 0o077) !== 0) {
    throw new StartupError(
      `${home} is open to other users (mode ${(st.mode & 0o777).toString(8)}); run: chmod 700 ${home}`,
    );
  }
}

export interface HomeLock {
  release(): void;
}

/** Takes the home's lock or explains who holds it. Must run before the socket is touched. */
export function acquireHomeLock(paths: HomePaths): HomeLock {
  const db = new Database(paths.lock);
  try {
    db.pragma('busy_timeout = 0');
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') {
      let holder = '';
      try {
        holder = ` (pid ${fs.readFileSync(paths.pid, 'utf8').trim()})`;
      } catch {
        // The pid file is informational; the lock itself is the truth.
      }
      throw new StartupError(`another albedod${holder} is already running with home ${paths.home}`);
    }
    throw err;
  }
  fs.writeFileSync(paths.pid, `${process.pid}\n`, { mode: 0o600 });
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      fs.rmSync(paths.pid, { force: true });
      db.close();
    },
  };
}
