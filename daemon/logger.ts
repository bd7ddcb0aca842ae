// The daemon's pino logger: JSON lines to a file in the home, and pretty lines on the
// terminal when stderr is one. Level from ALBEDO_LOG_LEVEL (default info).
import pino, { type Logger } from 'pino';

export type { Logger };

export interface LoggerHandle {
  log: Logger;
  /** Writes out buffered lines; call before exit. */
  flush: () => Promise<void>;
}

export function createLogger(file: string, env: NodeJS.ProcessEnv = process.env): LoggerHandle {
  const level = env.ALBEDO_LOG_LEVEL ?? 'info';
  const fileDest = pino.destination({ dest: file, mkdir: true, sync: false, mode: 0o600 });
  const streams: pino.StreamEntry[] = [{ level: level as pino.Level, stream: fileDest }];
  if (process.stderr.isTTY && env.CI === undefined) {
    streams.push({
      level: level as pino.Level,
      stream: pino.transport({ target: 'pino-pretty', options: { destination: 2, colorize: true } }),
    });
  }
  const log = pino({ level, base: { pid: process.pid } }, pino.multistream(streams));
  return {
    log,
    flush: () =>
      new Promise<void>((resolve) => {
        const flush = (): void =>
          fileDest.flush((err) => {
            if (err) process.stderr.write(`albedod: log flush failed: ${String(err)}\n`);
            resolve();
          });
        // The file opens asynchronously: a flush (or pino's own at exit) before it is open
        // throws "sonic boom is not ready yet", as a start that fails at once would.
        if ((fileDest as unknown as { fd: number }).fd >= 0) flush();
        else {
          fileDest.once('ready', flush);
          fileDest.once('error', () => resolve());
        }
      }),
  };
}
