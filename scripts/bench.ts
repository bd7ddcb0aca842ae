// `npm run bench`: measures append, transcript_read, transcript_grep (vs GNU grep), prepare and
// one compaction on databases of 10k/100k/1M rows built in a temp dir (one per size, reused by
// every measurement of that size, deleted after), the lcm-memory tools (on the --lcm-rows size's
// database when that is a run size, else on one of their own, plus a small one) and lcm's own
// compaction and prepare costs (section lcm), replays the real fixture
// transcripts turn by turn into fresh daemons (section replay), renders snapcompact frames
// (section frames), fits oversized images (section images), times the CLI and the daemon's
// start (section startup), what the provider-compatible proxy adds to a request (section
// proxy), other sessions' prepares while one compacts (section fairness) and search while an
// import's index fills (section import). Prints tables and PASS/FAIL; writes JSON.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { benchAppend, benchAppendFloor, benchIndexerLatency } from './bench/append.ts';
import { parseArgs, type BenchArgs, type Section } from './bench/args.ts';
import { corpusStats, loadCorpus, type Corpus } from './bench/corpus.ts';
import { buildDataset, checkpoint, fileSize, textPass, type Dataset } from './bench/dataset.ts';
import { benchFrames } from './bench/frames.ts';
import { benchImageFit } from './bench/images-fit.ts';
import { benchElision, ELISION_ROWS } from './bench/images-elision.ts';
import { benchSnapPrepare } from './bench/snapcompact-prepare.ts';
import { benchGrep } from './bench/grep.ts';
import { benchLcm, clearTree, type LcmResult } from './bench/lcm.ts';
import { alternate, benchCompactionWork, measurePrepare, preparedSession, type PrepareSession } from './bench/prepare.ts';
import { benchMemory } from './bench/memory.ts';
import { benchPrepareSocket, benchPrepareSocketOn, SOCKET_BLOCKS, type SocketPrepareResult } from './bench/prepare-socket.ts';
import { benchRead, segmenterProbe } from './bench/read.ts';
import { benchLcmCompaction, benchLcmPrepare } from './bench/lcm-engine.ts';
import { benchProxy } from './bench/proxy.ts';
import { benchFairness, FAIRNESS_ROWS } from './bench/fairness.ts';
import { benchImportFill, IMPORT_COPIES } from './bench/import-fill.ts';
import { benchReplay } from './bench/replay.ts';
import { judge, render, type Results, type SizeResult } from './bench/report.ts';
import { benchStartup } from './bench/startup.ts';
import { PartClock } from './bench/run-time.ts';
import { fmtCount, nowMs } from './bench/timing.ts';

/** Size of the baseline session prepares are compared with. */
const PREPARE_BASELINE_ROWS = 1_000;
/** One compaction is measured at this size, or the largest size below it. */
const COMPACTION_ROWS = 100_000;

const started = nowMs();

/** A progress line on stderr, stamped with the seconds since the bench started (to see where a run's time goes). */
function log(s: string): void {
  process.stderr.write(`[${((nowMs() - started) / 1000).toFixed(0).padStart(5)} s] ${s}\n`);
}

function sqliteVersion(): string {
  const db = new Database(':memory:');
  try {
    return db.prepare<[], string>('SELECT sqlite_version()').pluck().get() ?? '?';
  } finally {
    db.close();
  }
}

/** The commit measured and the files that differ from it (the working tree is shared). */
function gitState(): { commit: string; dirty: string[] } {
  const run = (args: string[]): string => {
    const r = spawnSync('git', args, { encoding: 'utf8' });
    return r.status === 0 ? r.stdout : '';
  };
  const dirty = run(['status', '--porcelain', '--untracked-files=no'])
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => l.slice(3));
  return { commit: run(['rev-parse', '--short', 'HEAD']).trim() || '?', dirty };
}

/** Largest size whose grep section also times each pattern over the dataset before it is indexed. */
const UNINDEXED_SCAN_MAX_ROWS = 100_000;

async function withDataset<T>(root: string, size: number, corpus: Corpus, fn: (ds: Dataset) => Promise<T>, synchronous?: 'NORMAL'): Promise<T> {
  const dir = fs.mkdtempSync(path.join(root, `n${size}-`));
  log(`building ${size}-row dataset in ${dir}`);
  const ds = await buildDataset(dir, size, corpus, { log, ...(synchronous === undefined ? {} : { synchronous }) });
  try {
    return await fn(ds);
  } finally {
    ds.db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function run(args: BenchArgs, root: string): Promise<Results> {
  const t0 = nowMs();
  const clock = new PartClock();
  const time = clock.time.bind(clock);
  const corpus = loadCorpus(args.fixtures);
  if (corpus.note !== null) log(`corpus: ${corpus.note}`);
  const cpus = os.cpus();
  const results: Results = {
    date: new Date().toISOString(),
    machine: { cpus: cpus.length, cpu_model: cpus[0]?.model ?? '?', node: process.version, platform: `${os.platform()} ${os.release()}`, total_mem_bytes: os.totalmem(), sqlite: sqliteVersion() },
    git: gitState(),
    args: { quick: args.quick, sizes: args.sizes, only: [...args.only], lcm: args.lcm },
    corpus: { source: corpus.source, files: corpus.files, note: corpus.note, stats: corpusStats(corpus) },
    sizes: [],
    verdicts: [],
    total_ms: 0,
    time_parts: clock.parts,
  };

  if (args.only.has('read')) results.segmenter_probe = segmenterProbe();
  if (args.only.has('append')) {
    log('append ...');
    await time('append', async () => {
      results.append = await benchAppend(root, corpus, { quick: args.quick });
      results.append_floor = await benchAppendFloor(root, corpus, { quick: args.quick }, log);
      results.append_indexer = await benchIndexerLatency(root, corpus, { quick: args.quick }, log);
    });
  }

  const wantsData = ['read', 'grep', 'prepare', 'compact', 'lcm'].some((x) => args.only.has(x as Section));
  const compactionSize = [...args.sizes].reverse().find((x) => x <= COMPACTION_ROWS) ?? args.sizes[0];

  // The prepare baseline stays open for the whole run: every size is timed against it in
  // alternating blocks, so the ratio compares the two at the same moment.
  // This section times no writes, so its own databases are built without an fsync per commit.
  const lcmTools = (large: Dataset, largeDataset: 'size' | 'own'): Promise<LcmResult> => withDataset(root, args.lcm.smallRows, corpus, (small) => benchLcm(small, large, { nodes: args.lcm.nodes, largeDataset }, log), 'NORMAL');

  let baseline: PrepareSession | undefined;
  const socketPrepares: SocketPrepareResult[] = [];
  if (args.only.has('prepare')) {
    const dir = fs.mkdtempSync(path.join(root, `baseline-`));
    log(`building the ${PREPARE_BASELINE_ROWS}-row prepare baseline in ${dir}`);
    baseline = await time('prepare: the 1k-row baseline', async () => preparedSession(await buildDataset(dir, PREPARE_BASELINE_ROWS, corpus, { log }), corpus, log));
  }
  try {
    if (wantsData) {
      for (const size of args.sizes) {
        const at = `@${fmtCount(size)}`;
        const built = nowMs();
        const r = await withDataset(root, size, corpus, async (ds) => {
          checkpoint(ds.db);
          const textChars = textPass(ds).stats.textChars;
          clock.parts.push({ part: `dataset ${at}: build`, ms: nowMs() - built });
          const sr: SizeResult = {
            size,
            total_rows: ds.totalRows,
            sessions: 1 + ds.sides.length,
            build: { ms: ds.buildMs, rows_per_s: ds.totalRows / (ds.buildMs / 1000), db_bytes: fileSize(ds.file), text_chars: textChars },
          };
          log(`  built ${ds.totalRows} rows in ${(ds.buildMs / 1000).toFixed(1)} s`);
          if (args.only.has('read')) sr.read = await time(`read ${at}`, () => benchRead(ds, { budgetMs: args.readBudgetMs }, log));
          // The scan of a wholly unindexed dataset is informational (no verdict) and linear in the rows;
          // at 1M it took 144 s of the run, so it is measured up to UNINDEXED_SCAN_MAX_ROWS.
          if (args.only.has('grep')) sr.grep = await time(`grep ${at}`, () => benchGrep(ds, { unindexed: size <= UNINDEXED_SCAN_MAX_ROWS }, log));
          // The lcm tools reuse this size's dataset (and the index grep just filled) when it is
          // theirs, before prepare appends its closing turn; the tree is removed afterwards.
          if (args.only.has('lcm') && size === args.lcm.rows) {
            log("lcm tools, on this size's dataset ...");
            results.lcm = await time(`lcm tools ${at}`, () => lcmTools(ds, 'size'));
            clearTree(ds);
          }
          if ((args.only.has('compact') || args.only.has('prepare')) && size === compactionSize) results.compaction = await time(`compact ${at}`, () => benchCompactionWork(ds, log));
          if (args.only.has('lcm') && size === compactionSize) results.lcm_compaction = await time(`lcm compaction ${at}`, () => benchLcmCompaction(ds, log));
          const base = baseline;
          if (args.only.has('prepare') && base !== undefined) {
            await time(`prepare ${at}`, async () => {
              const ps = await preparedSession(ds, corpus, log);
              sr.prepare = await measurePrepare(ps, { runs: args.prepareRuns }, log);
              const alt = await alternate(ps, base, { blocks: 6, perBlock: Math.max(4, Math.floor(args.prepareRuns / 5)) });
              sr.prepare.versus_baseline = { baseline_rows: base.ds.main.rows, this: alt.a, baseline: alt.b, ratio: alt.ratio };
              log(`  prepare @${ds.main.rows} vs baseline, alternating: ${alt.a.median_ms.toFixed(3)} / ${alt.b.median_ms.toFixed(3)} ms = ${alt.ratio.toFixed(2)}x`);
              // The same session over a daemon's socket, the daemon started on this dataset's file.
              socketPrepares.push(await benchPrepareSocketOn(ds, args.quick ? SOCKET_BLOCKS.quick : SOCKET_BLOCKS.full, log));
            });
          }
          return sr;
        });
        results.sizes.push(r);
      }
    }
    // Measured last, with the process as warm as for the other sizes.
    const b = baseline;
    if (b !== undefined) results.prepare_baseline = await time('prepare: the baseline measured', () => measurePrepare(b, { runs: args.prepareRuns }, log));
  } finally {
    baseline?.ds.db.close();
  }
  if (args.only.has('lcm')) {
    log('lcm prepare ...');
    results.lcm_prepare = await time('lcm prepare', () => benchLcmPrepare(root, log, args.prepareRuns));
    if (results.lcm === undefined) {
      // --lcm-rows is not one of the run sizes: the large dataset is built for this section.
      log('lcm tools ...');
      results.lcm = await time(`lcm tools @${fmtCount(args.lcm.rows)}, its own dataset`, () => withDataset(root, args.lcm.rows, corpus, (large) => lcmTools(large, 'own'), 'NORMAL'));
    }
  }
  if (args.only.has('frames')) {
    log('frames ...');
    await time('frames', async () => {
      results.frames = await benchFrames(corpus, { quick: args.quick }, log);
      results.snap_prepare = await benchSnapPrepare(root, corpus, args.quick ? 4000 : 20_000, log, args.prepareRuns);
    });
  }
  if (args.only.has('images')) {
    log('images ...');
    const images: NonNullable<Results['images']> = { fit: await time('images: fit', () => benchImageFit({ quick: args.quick }, log)) };
    results.images = images;
    log('image elision ...');
    images.elision = await time('images: elision', () => benchElision(root, args.quick ? 200 : ELISION_ROWS));
  }
  if (args.only.has('prepare')) {
    log('prepare over the socket ...');
    // The baseline size appended over the socket; the dataset sizes were timed with their dataset.
    const baselineRows = await time('prepare over the socket @1k', () => benchPrepareSocket(root, corpus, PREPARE_BASELINE_ROWS, args.quick ? SOCKET_BLOCKS.quick : SOCKET_BLOCKS.full, log));
    results.prepare_socket = [baselineRows, ...socketPrepares];
  }
  if (args.only.has('memory')) {
    log('memory ...');
    results.memory = (await time('memory', () => benchMemory(root, corpus, { sessions: args.quick ? 200 : 1000, rows: 50 }, log))) ?? undefined;
  }
  if (args.only.has('replay')) {
    log('replay ...');
    results.replay = await time('replay', () => benchReplay(args.fixtures, root, log, args.strategies));
  }
  if (args.only.has('proxy')) {
    log('proxy ...');
    results.proxy = await time('proxy', () => benchProxy(root, corpus, { quick: args.quick }, log));
  }
  if (args.only.has('fairness')) {
    log('fairness ...');
    results.fairness = await time('fairness', () => benchFairness(root, corpus, args.quick ? 20_000 : FAIRNESS_ROWS, log));
  }
  if (args.only.has('import')) {
    log('import ...');
    results.import_fill = await time('import', () => benchImportFill(root, args.fixtures, args.quick ? IMPORT_COPIES / 10 : IMPORT_COPIES, log));
  }
  if (args.only.has('startup')) {
    log('startup ...');
    results.startup = await time('startup', () => benchStartup(root, corpus, { quick: args.quick }, log));
  }
  results.total_ms = nowMs() - t0;
  results.verdicts = judge(results);
  return results;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const root = fs.mkdtempSync(path.join(args.tmp, 'albedo-bench-'));
  const cleanup = (): void => fs.rmSync(root, { recursive: true, force: true });
  process.once('SIGINT', () => {
    cleanup();
    process.exit(130);
  });
  let results: Results;
  try {
    results = await run(args, root);
  } finally {
    cleanup();
  }
  console.log(render(results));
  fs.mkdirSync(path.dirname(path.resolve(args.json)), { recursive: true });
  fs.writeFileSync(args.json, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`results written to ${args.json}`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
