// Daemon memory: a real daemon's resident set after N sessions were each opened, given 50 rows
// and prepared (the kernels, their caches and SQLite's, as a host with many agents has them),
// read from /proc (Linux only; elsewhere the section reports nothing). The daemon measured is
// the built one (bin/albedod.js -> dist/, as `npm start` runs it), rebuilt first so the number is
// for the code in the tree: under tsx the loader, its transpiled sources and their source maps
// add tens of MiB that no user's daemon holds.
import fs from 'node:fs';
import { startReplayDaemon } from '../replay/daemon.ts';
import { buildDist } from './build-dist.ts';
import type { Corpus } from './corpus.ts';
import { agentPrompt, MODEL_ID } from './prepare.ts';
import { RowStream } from './rows.ts';

export interface MemoryResult {
  sessions: number;
  rows_per_session: number;
  idle_rss_bytes: number;
  rss_bytes: number;
  loaded_kernels: number;
}

/** A process's resident set in bytes, from /proc; null where it cannot be read. */
export function rssOf(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? null : Number(m[1]) * 1024;
  } catch {
    return null;
  }
}

export async function benchMemory(
  tmp: string,
  corpus: Corpus,
  opts: { sessions: number; rows: number; nodeArgs?: string[] },
  log: (s: string) => void,
): Promise<MemoryResult | null> {
  buildDist(log);
  const d = await startReplayDaemon({ window: 200_000, tmp, built: true, ...(opts.nodeArgs === undefined ? {} : { nodeArgs: opts.nodeArgs }) });
  try {
    const status = await d.client.call('daemon.status', {});
    const idle = rssOf(status.pid);
    if (idle === null) {
      log('  memory: /proc is not readable here; skipped');
      return null;
    }
    const { instructions, tools } = agentPrompt();
    for (let i = 0; i < opts.sessions; i++) {
      const session = `m${i}`;
      await d.client.call('session.open', { session, workspace: `/w/${i % 10}` });
      await d.client.raw('transcript.append', { session, rows: new RowStream(corpus, { keyPrefix: `k${i}-`, start: i * 37 }).take(opts.rows) });
      await d.client.raw('prepare', { session, model: MODEL_ID, instructions, tools });
    }
    // Let idle-time work (the search indexer) run, then give the collector a moment.
    await new Promise((r) => setTimeout(r, 2_000));
    const after = await d.client.call('daemon.status', {});
    const rss = rssOf(status.pid) ?? 0;
    const out = { sessions: opts.sessions, rows_per_session: opts.rows, idle_rss_bytes: idle, rss_bytes: rss, loaded_kernels: after.loaded_kernels };
    log(`  memory: idle ${(idle / 2 ** 20).toFixed(0)} MiB, after ${opts.sessions} sessions ${(rss / 2 ** 20).toFixed(0)} MiB (${after.loaded_kernels} kernels loaded)`);
    return out;
  } finally {
    await d.stop();
  }
}
