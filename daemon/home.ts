// The daemon's home: checks it before use, and takes the one-daemon-per-home lock (where the
// home and socket are is protocol/home-paths.ts). The lock is an exclusive SQLite transaction
// on a side file: the kernel drops it when the process dies, so a crashed daemon never leaves
// a home locked.
import fs from 'node:fs';
import Database from 'better-sqlite3';
import type { HomePaths } from '../protocol/home-paths.ts';

export { resolvePaths, type HomePaths } from '../protocol/home-paths.ts';

/** A start-up refusal: printed to the operator, never sent over the wire. */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
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
