// Verbs about the process: status, reload, stop.
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { bytes, n } from '../io.ts';
import type { VerbModule } from '../program.ts';

/** How long `stop` waits for the daemon to close its socket (its own grace period is 10 s). */
const STOP_WAIT_MS = 30_000;

function configErrors(errors: ReadonlyArray<{ file: string; message: string }>, red: (s: string) => string): string {
  return errors.map((e) => `\n${red('config error')} in ${e.file}: ${e.message}`).join('');
}

export const daemonVerbs: VerbModule = (program, run) => {
  program
    .command('status')
    .description('the running daemon: version, pid, home, uptime, sessions, connections, database size, image payloads, the search index, configuration errors')
    .option('--storage', 'also how the database divides (rows, indexes, search index, payloads, strategy state; reads every page)')
    .action(
      run(async ({ link, out }, opts: { storage?: boolean }) => {
        const s = await link.call('daemon.status', { storage_parts: opts.storage === true });
        const st = out.style;
        const db = s.storage;
        const lines = [
          `${st.bold('albedod')} ${s.version} · pid ${s.pid} · up ${n(Math.round(s.uptime_ms / 1000))} s`,
          `home ${s.home} · socket ${link.socket}`,
          `${n(s.sessions)} sessions · ${n(s.loaded_kernels)} loaded · ${n(s.connections)} connections`,
          s.proxy.listening ? `proxy http://127.0.0.1:${s.proxy.port ?? '?'} (albedo env prints the base URLs)` : `proxy not listening: ${s.proxy.error ?? 'unknown reason'}`,
          `database ${bytes(db.file_bytes)} (+ ${bytes(db.wal_bytes)} WAL, ${bytes(db.free_bytes)} free) · ${n(s.payloads.count)} image payloads · ${bytes(s.payloads.bytes)}`,
          !s.search.indexer
            ? 'search index off: searches read every row'
            : s.search.rows_behind === 0
            ? 'search index caught up'
            : `search index ${n(s.search.rows_behind)} rows behind (filled while the daemon is idle; searches read those rows one by one)`,
        ];
        if (db.parts !== null) {
          const parts = Object.entries(db.parts).sort((a, b) => b[1] - a[1]);
          lines.push(`  ${parts.map(([name, size]) => `${name.replaceAll('_', ' ')} ${bytes(size)}`).join(' · ')}`);
        }
        const text = lines.join('\n');
        return { json: s, text: text + configErrors(s.config_errors, st.red) };
      }),
    );

  program
    .command('reload')
    .description('re-read extensions.json and models.json, and give latched sessions another chance (what SIGHUP does)')
    .action(
      run(async ({ link, out }) => {
        const r = await link.call('reload', {});
        return { json: r, text: `configuration version ${r.version}${configErrors(r.config_errors, out.style.red)}` };
      }),
    );

  program
    .command('stop')
    .description('stop the daemon in order (in-flight requests finish first)')
    .option('--no-wait', 'return once the daemon has agreed, without waiting for it to close its socket')
    .action(
      run(async ({ link }, opts: { wait: boolean }) => {
        await link.call('daemon.shutdown', {});
        await link.close();
        if (!opts.wait) return { json: { ok: true, stopped: false }, text: 'albedod is stopping' };
        const deadline = Date.now() + STOP_WAIT_MS;
        while (fs.existsSync(link.socket) && Date.now() < deadline) await sleep(25);
        const stopped = !fs.existsSync(link.socket);
        return {
          json: { ok: true, stopped },
          text: stopped ? 'albedod stopped' : `albedod is still stopping after ${STOP_WAIT_MS / 1000} s (requests still finishing?)`,
        };
      }),
    );
};
