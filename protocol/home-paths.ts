// Where a daemon's state lives ($ALBEDO_HOME) and where its socket is. Clients need the socket
// path as much as the daemon does, so this sits on the protocol side: the CLI resolves it
// without loading anything of the daemon (no SQLite).
import os from 'node:os';
import path from 'node:path';

export interface HomePaths {
  home: string;
  db: string;
  socket: string;
  lock: string;
  pid: string;
  log: string;
  extensions: string;
  models: string;
  /** The secret every proxy URL starts with (0600; created at the daemon's first start). */
  proxyToken: string;
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
    proxyToken: path.join(home, 'proxy.token'),
  };
}
