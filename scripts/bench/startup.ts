// Section `startup`: what a user waits for. `albedo status` against a running daemon, timed in
// alternation with `node -e 0` (the floor any Node program pays), and the daemon's start to its
// first answered request, at an empty home and at a home of 100k rows. Both run the built
// package (bin/ -> dist/), rebuilt first so the numbers are for the code in the tree.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { DAEMON_NODE_FLAGS } from '../../daemon/node-flags.ts';
import { AlbedoClient } from '../../protocol/client.ts';
import { buildDist } from './build-dist.ts';
import { catchUpSearchIndex } from '../../storage/search/indexer.ts';
import type { Corpus } from './corpus.ts';
import { buildDataset } from './dataset.ts';
import { fmtCount, fmtMs, nowMs, stats, type Stats } from './timing.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const STARTUP_ROWS = 100_000;
export const STATUS_RATIO_TARGET = 2;
export const FIRST_ANSWER_TARGET_MS = 1000;

export interface StartupResult {
  /** `node -e 0` and `albedo status`, timed in alternation. */
  node_floor: Stats;
  cli_status: Stats;
  ratio: number;
  /** The same verb through tsx from the TypeScript sources, as bin/ ran it before the build. */
  cli_status_from_source: Stats;
  /** Spawn of albedod to its first answered daemon.status. */
  first_answer: Array<{ home: string; rows: number; stats: Stats }>;
  /** Building the large home (not part of any target). */
  build_ms: number;
  index_ms: number;
}

function timeSpawn(args: string[], env: NodeJS.ProcessEnv): number {
  const t0 = nowMs();
  const r = spawnSync(process.execPath, args, { env, encoding: 'utf8' });
  const ms = nowMs() - t0;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

function privateHome(dir: string): string {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  return dir;
}

/** Starts bin/albedod.js on `home`, asks daemon.status as soon as anything answers; returns the time to that answer. */
async function firstAnswer(home: string): Promise<number> {
  const socket = path.join(home, 'albedod.sock');
  const t0 = nowMs();
  const proc = spawn(process.execPath, [...DAEMON_NODE_FLAGS, path.join(root, 'bin/albedod.js')], { env: { ...process.env, ALBEDO_HOME: home }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  try {
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`albedod exited ${proc.exitCode}: ${stderr}`);
      let client: AlbedoClient;
      try {
        client = await AlbedoClient.connect(socket, { connectTimeoutMs: 10_000 });
      } catch {
        await sleep(2);
        continue;
      }
      try {
        await client.call('daemon.status', {});
        return nowMs() - t0;
      } finally {
        await client.close();
      }
    }
  } finally {
    proc.kill('SIGTERM');
    await exited;
  }
}

export async function benchStartup(tmp: string, corpus: Corpus, opts: { quick: boolean }, log: (s: string) => void): Promise<StartupResult> {
  buildDist(log);
  const runs = opts.quick ? 9 : 25;

  // albedo status against a running daemon, alternating with the Node floor.
  const home = privateHome(path.join(tmp, 'startup-status'));
  const env = { ...process.env, ALBEDO_HOME: home, NO_COLOR: '1', ALBEDO_PROXY_PORT: '0' };
  await firstAnswer(home); // creates the database, so the timed runs meet a ready home
  const daemon = spawn(process.execPath, [...DAEMON_NODE_FLAGS, path.join(root, 'bin/albedod.js')], { env, stdio: 'ignore' });
  const daemonExit = new Promise<void>((resolve) => daemon.once('exit', () => resolve()));
  const floor: number[] = [];
  const status: number[] = [];
  const fromSource: number[] = [];
  try {
    const socket = path.join(home, 'albedod.sock');
    while (!fs.existsSync(socket)) await sleep(5);
    const cli = path.join(root, 'bin/albedo.js');
    for (let i = 0; i < 2; i++) timeSpawn([cli, 'status'], env); // warm the file cache
    for (let i = 0; i < runs; i++) {
      floor.push(timeSpawn(['-e', '0'], env));
      status.push(timeSpawn([cli, 'status'], env));
    }
    for (let i = 0; i < 3; i++) fromSource.push(timeSpawn(['--import', 'tsx', path.join(root, 'cli/main.ts'), 'status'], env));
  } finally {
    daemon.kill('SIGTERM');
    await daemonExit;
  }
  const nodeFloor = stats(floor);
  const cliStatus = stats(status);
  log(`  albedo status ${fmtMs(cliStatus.median_ms)} vs node -e 0 ${fmtMs(nodeFloor.median_ms)} (medians of ${runs})`);

  // Start to first answer: a fresh home each run (so migrations run), then a home of STARTUP_ROWS rows.
  const starts = opts.quick ? 3 : 7;
  const empty: number[] = [];
  for (let i = 0; i < starts; i++) empty.push(await firstAnswer(privateHome(path.join(tmp, `startup-empty-${i}`))));
  const big = privateHome(path.join(tmp, 'startup-big'));
  log(`  building a ${fmtCount(STARTUP_ROWS)}-row home in ${big}`);
  const ds = await buildDataset(big, STARTUP_ROWS, corpus, { sides: false, log });
  // A home a daemon has run on has its search index filled; index it so the start meets that.
  const t0 = nowMs();
  catchUpSearchIndex(ds.db);
  const indexMs = nowMs() - t0;
  ds.db.pragma('wal_checkpoint(TRUNCATE)');
  ds.db.close();
  const large: number[] = [];
  for (let i = 0; i < starts; i++) large.push(await firstAnswer(big));
  const result: StartupResult = {
    node_floor: nodeFloor,
    cli_status: cliStatus,
    ratio: cliStatus.median_ms / nodeFloor.median_ms,
    cli_status_from_source: stats(fromSource),
    first_answer: [
      { home: 'empty (fresh each start)', rows: 0, stats: stats(empty) },
      { home: `${fmtCount(STARTUP_ROWS)} rows`, rows: ds.totalRows, stats: stats(large) },
    ],
    build_ms: ds.buildMs,
    index_ms: indexMs,
  };
  for (const f of result.first_answer) log(`  start -> first answer, ${f.home}: median ${fmtMs(f.stats.median_ms)}`);
  return result;
}

export function renderStartup(r: StartupResult): string {
  const lines = ['\nstartup (built package: bin/ -> dist/)'];
  const row = (what: string, s: Stats) => `  ${what.padEnd(44)} median ${fmtMs(s.median_ms).padStart(9)}  min ${fmtMs(s.min_ms).padStart(9)}  max ${fmtMs(s.max_ms).padStart(9)}  (${s.runs} runs)`;
  lines.push(row('node -e 0', r.node_floor));
  lines.push(row('albedo status (running daemon)', r.cli_status));
  lines.push(row('albedo status from source through tsx', r.cli_status_from_source));
  lines.push(`  albedo status / node -e 0: ${r.ratio.toFixed(2)}x`);
  for (const f of r.first_answer) lines.push(row(`albedod start -> first answer, ${f.home}`, f.stats));
  lines.push(`  (the ${fmtCount(STARTUP_ROWS)}-row home took ${fmtMs(r.build_ms)} to build and ${fmtMs(r.index_ms)} to index)`);
  return lines.join('\n');
}

export function judgeStartup(r: StartupResult): Array<{ target: string; measured: string; pass: boolean }> {
  return [
    {
      target: `albedo status within ${STATUS_RATIO_TARGET}x of node -e 0`,
      measured: `${fmtMs(r.cli_status.median_ms)} vs ${fmtMs(r.node_floor.median_ms)} (${r.ratio.toFixed(2)}x)`,
      pass: r.ratio <= STATUS_RATIO_TARGET,
    },
    ...r.first_answer.map((f) => ({
      target: `albedod start to first answered request under ${fmtMs(FIRST_ANSWER_TARGET_MS)}, ${f.home}`,
      measured: `median ${fmtMs(f.stats.median_ms)}, max ${fmtMs(f.stats.max_ms)}`,
      pass: f.stats.median_ms < FIRST_ANSWER_TARGET_MS,
    })),
  ];
}
