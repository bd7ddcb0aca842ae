// The benchmark's output: the results document (written as JSON), the PASS/FAIL verdicts
// against the issue targets (judged on the numbers of this one run), and the human tables.
import { ANCHOR } from './grep-anchor.ts';
import type { AppendResult, FloorComparison, IndexerLatency } from './append.ts';
import type { GrepResult } from './grep.ts';
import { judgeFrames, type FramesResult } from './frames.ts';
import { judgeImageFit, renderImageFit, type ImageFitResult } from './images-fit.ts';
import { judgeElision, renderElision, type ElisionResult } from './images-elision.ts';
import { judgeSnapPrepare, type SnapPrepare } from './snapcompact-prepare.ts';
import type { LcmResult } from './lcm.ts';
import type { CompactionWork, PrepareResult } from './prepare.ts';
import type { SocketPrepareResult } from './prepare-socket.ts';
import type { MemoryResult } from './memory.ts';
import type { ReadResult } from './read.ts';
import { judgeLcmEngine, type LcmCompaction, type LcmPrepare } from './lcm-engine.ts';
import { judgeFairness, PEAK_RSS_TARGET_BYTES, renderFairness, type FairnessResult } from './fairness.ts';
import { judgeImportFill, renderImportFill, type ImportFillResult } from './import-fill.ts';
import { judgeProxy, renderProxy, type ProxyResult } from './proxy.ts';
import { judgeReplay, renderReplay, type ReplayResult } from './replay.ts';
import { judgeRunTime, renderRunTime, type TimePart } from './run-time.ts';
import { judgeStartup, renderStartup, type StartupResult } from './startup.ts';
import { fmtBytes, fmtCount, fmtMs } from './timing.ts';

/** The anchor command the grep verdicts are measured against. */
const ANCHOR_CMD = ANCHOR === 'rg' ? 'rg -i -F -c' : 'GNU grep -F -i -c';

export interface SizeResult {
  size: number;
  total_rows: number;
  sessions: number;
  build: { ms: number; rows_per_s: number; db_bytes: number; text_chars: number };
  read?: { estimated_graphemes: number; non_ascii_row_share: number; pages: ReadResult[] };
  grep?: GrepResult;
  prepare?: PrepareResult;
}

export interface Verdict {
  target: string;
  measured: string;
  pass: boolean;
  note?: string;
}

export interface Results {
  date: string;
  machine: { cpus: number; cpu_model: string; node: string; platform: string; total_mem_bytes: number; sqlite: string };
  git: { commit: string; dirty: string[] };
  args: { quick: boolean; sizes: number[]; only: string[]; lcm: { rows: number; smallRows: number; nodes: number } };
  corpus: { source: string; files: string[]; note: string | null; stats: unknown };
  append?: AppendResult[];
  append_floor?: FloorComparison[];
  append_indexer?: IndexerLatency;
  sizes: SizeResult[];
  prepare_baseline?: PrepareResult;
  prepare_socket?: SocketPrepareResult[];
  memory?: MemoryResult;
  compaction?: CompactionWork;
  lcm?: LcmResult;
  replay?: ReplayResult;
  lcm_compaction?: LcmCompaction;
  lcm_prepare?: LcmPrepare;
  frames?: FramesResult;
  snap_prepare?: SnapPrepare;
  /** Section images: `fit` (images-fit.ts) and `elision` (images-elision.ts). */
  images?: { fit?: ImageFitResult; elision?: ElisionResult };
  startup?: StartupResult;
  proxy?: ProxyResult;
  fairness?: FairnessResult;
  /** Section import: an import's search index filling (import-fill.ts). */
  import_fill?: ImportFillResult;
  segmenter_probe?: Array<{ chars: number; whole_us_per_grapheme: number; sliced_us_per_grapheme: number }>;
  verdicts: Verdict[];
  total_ms: number;
  /** Each part's wall time, in the order the parts ran (run-time.ts); absent from older results files. */
  time_parts?: TimePart[];
}

const APPEND_TARGET = 20_000;
/**
 * An append of 100-row batches over the socket within this of the two floors beneath it added: the
 * transport floor (a bare server answering the same requests) and the SQLite floor (the same rows
 * stored plainly) (issue 35, target 5). Issue 12's ratios to the SQLite floor alone (1.2x in
 * process, 1.5x over the socket) were withdrawn by issue 35 and are reported, not judged.
 */
const APPEND_FLOORS_TARGET = 2;
/** Append latency with the indexer working over latency without it. */
const INDEXER_TARGET = 1.2;
const RSS_TARGET_BYTES = 150 * 2 ** 20;
/** A deep transcript_read page over the first page, same size. */
const DEEP_READ_TARGET = 2;
const STALL_TARGET_MS = 50;
const PREPARE_SCALE_TARGET = 1.2;
const PREPARE_JSON_TARGET = 3;
/**
 * A nothing-due prepare over the socket within this of the transport floor: the same request
 * answered with the same bytes by a bare server (issue 35, target 5). The stringify ratio of the
 * same round trip is reported, not judged: the floor alone is many times the stringify.
 */
const PREPARE_FLOOR_TARGET = 1.5;
const LCM_FLAT_TARGET = 1.2;
/**
 * The database file (index included) over the raw text of its rows: at most 2.5x (issue 35,
 * target 4), where issue 12 had asked for 3x.
 */
const DISK_TARGET = 2.5;
/** Rows a second into the search index, bulk fill, at 1M rows. */
const INDEX_FILL_TARGET = 15_000;

export function judge(r: Results): Verdict[] {
  const out: Verdict[] = [];
  for (const a of r.append ?? []) {
    if (a.batch === 1) continue;
    out.push({ target: `append >= ${fmtCount(APPEND_TARGET)} rows/s, batches of ${a.batch}`, measured: `${Math.round(a.rows_per_s)} rows/s`, pass: a.rows_per_s >= APPEND_TARGET });
  }
  for (const f of r.append_floor ?? []) {
    const t = f.transport;
    if (t === undefined) continue;
    out.push({
      target: `append over the socket, batches of ${f.batch}, within ${APPEND_FLOORS_TARGET}x of the transport floor plus the SQLite floor for the same rows`,
      measured: `${Math.round(f.ours_rows_per_s)} rows/s vs ${Math.round(t.rows_per_s)} and ${Math.round(f.floor_rows_per_s)} (${t.ratio.toFixed(2)}x the two together, median of ${f.blocks} blocks; ${
        f.ratio.toFixed(2)
      }x the SQLite floor alone)`,
      pass: t.ratio <= APPEND_FLOORS_TARGET,
    });
  }
  if (r.append_indexer !== undefined) {
    const x = r.append_indexer;
    out.push({
      target: `append latency over the socket with the indexer working within ${INDEXER_TARGET}x of without`,
      measured: `median ${fmtMs(x.on.median_ms)} vs ${fmtMs(x.off.median_ms)} (${x.ratio.toFixed(2)}x; p90 ${x.p90_ratio.toFixed(2)}x)`,
      pass: x.ratio <= INDEXER_TARGET,
    });
    // Results files from before prepare was timed alongside have no `prepare`.
    const p = x.prepare as IndexerLatency['prepare'] | undefined;
    if (p !== undefined) {
      out.push({
        target: `prepare latency over the socket with the indexer working within ${INDEXER_TARGET}x of without`,
        measured: `median ${fmtMs(p.on.median_ms)} vs ${fmtMs(p.off.median_ms)} (${p.ratio.toFixed(2)}x; p90 ${p.p90_ratio.toFixed(2)}x; ${fmtCount(x.indexed_rows ?? 0)} rows indexed meanwhile)`,
        pass: p.ratio <= INDEXER_TARGET,
      });
    }
  }
  for (const s of r.sizes) {
    const d = s.grep?.disk;
    if (d === undefined) continue;
    out.push({
      target: `db size at most ${DISK_TARGET}x the raw text, index included, at ${fmtCount(s.size)} rows`,
      measured: `${fmtBytes(d.file_bytes)} vs ${fmtBytes(d.text_bytes)} of text (${d.ratio.toFixed(2)}x)`,
      pass: d.ratio <= DISK_TARGET,
    });
  }
  const largest = r.sizes[r.sizes.length - 1];
  const at = largest === undefined || largest.size === 1_000_000 ? '' : `judged at ${fmtCount(largest.size)}: 1M not run`;
  if (largest?.grep !== undefined) {
    const i = largest.grep.index;
    out.push({
      target: `search index filled at >= ${fmtCount(INDEX_FILL_TARGET)} rows/s at 1M rows`,
      measured: `${Math.round(i.rows_per_s)} rows/s over ${fmtCount(i.rows)} rows; over its first ${fmtCount(i.floor.rows)} rows ${Math.round(i.floor.ours_rows_per_s)} rows/s, where a bare FTS5 trigram table takes the same folded text at ${
        Math.round(i.floor.floor_rows_per_s)
      } rows/s (ours ${i.floor.ratio.toFixed(2)}x its time)`,
      pass: i.rows_per_s >= INDEX_FILL_TARGET,
      ...(at === '' ? {} : { note: at }),
    });
  }
  if (largest?.grep !== undefined) {
    // Judged as a client sees it (over the socket, alternating with the anchor); the in-process
    // figures are in the table only.
    for (const c of largest.grep.socket) {
      out.push({
        target: `grep over the socket ${c.scope} "${c.pattern}" over ${fmtCount(largest.size)} rows no slower than ${ANCHOR}, same count`,
        measured: `${fmtMs(c.ours.min_ms)} vs ${fmtMs(c.anchor.min_ms)} (${c.ratio.toFixed(2)}x), ${c.matches}/${c.anchor_matches} matches`,
        pass: c.ratio <= 1 && c.matches === c.anchor_matches,
        ...(at === '' ? {} : { note: at }),
      });
    }
    for (const c of largest.grep.cases.filter((x) => x.scope === 'cross')) {
      out.push({ target: `event-loop stall < ${STALL_TARGET_MS} ms during cross-session grep "${c.pattern}"`, measured: `${c.max_stall_ms.toFixed(1)} ms`, pass: c.max_stall_ms < STALL_TARGET_MS, ...(at === '' ? {} : { note: at }) });
    }
  }
  if (largest?.read !== undefined) {
    const first = largest.read.pages.find((p) => p.page === 'first');
    for (const p of largest.read.pages) {
      if (first === undefined || p === first) continue;
      const ms = p.stopped?.extrapolated_ms ?? p.stats.median_ms;
      const ratio = ms / first.stats.median_ms;
      out.push({
        target: `transcript_read ${p.page} page within ${DEEP_READ_TARGET}x of the first page`,
        measured: `${fmtMs(ms)} vs ${fmtMs(first.stats.median_ms)} (${ratio.toFixed(2)}x, medians)`,
        pass: ratio <= DEEP_READ_TARGET,
        ...(at === '' ? {} : { note: at }),
      });
    }
    for (const p of largest.read.pages) {
      out.push({ target: `event-loop stall < ${STALL_TARGET_MS} ms during transcript_read (${p.page} page)`, measured: `${p.max_stall_ms.toFixed(1)} ms`, pass: p.max_stall_ms < STALL_TARGET_MS, ...(at === '' ? {} : { note: at }) });
    }
  }
  const base = r.prepare_baseline;
  const prepared = r.sizes.filter((s) => s.prepare !== undefined);
  const top = prepared[prepared.length - 1];
  if (base !== undefined && top?.prepare !== undefined) {
    const alt = top.prepare.versus_baseline;
    const ratio = alt?.ratio ?? top.prepare.prepare.median_ms / base.prepare.median_ms;
    out.push({
      target: `prepare (nothing due) at ${top.prepare.history_rows} history rows within ${PREPARE_SCALE_TARGET}x of ${base.history_rows}`,
      measured: alt === undefined
        ? `${fmtMs(top.prepare.prepare.median_ms)} vs ${fmtMs(base.prepare.median_ms)} (${ratio.toFixed(2)}x)`
        : `${fmtMs(alt.this.median_ms)} vs ${fmtMs(alt.baseline.median_ms)} timed in alternating blocks (${ratio.toFixed(2)}x)`,
      pass: ratio <= PREPARE_SCALE_TARGET,
      ...(top.size === 1_000_000 ? {} : { note: `judged at ${fmtCount(top.size)}: 1M not run` }),
    });
  }
  for (const p of [...(base === undefined ? [] : [base]), ...prepared.map((s) => s.prepare!)]) {
    const ratio = p.prepare.median_ms / p.stringify.median_ms;
    out.push({
      target: `prepare at ${p.history_rows} history rows within ${PREPARE_JSON_TARGET}x of JSON.stringify of the request`,
      measured: `${fmtMs(p.prepare.median_ms)} vs ${fmtMs(p.stringify.median_ms)} (${ratio.toFixed(1)}x)`,
      pass: ratio <= PREPARE_JSON_TARGET,
    });
  }
  for (const p of r.prepare_socket ?? []) {
    if (p.floor !== undefined) {
      out.push({
        target: `prepare over the socket (nothing due) at ${fmtCount(p.history_rows)} rows within ${PREPARE_FLOOR_TARGET}x of the transport floor (same bytes, bare server)`,
        measured: `${fmtMs(p.prepare.median_ms)} vs ${fmtMs(p.floor.median_ms)} (${p.floor_ratio.toFixed(1)}x; the floor alone is ${(p.floor.median_ms / p.stringify.median_ms).toFixed(1)}x the stringify)`,
        pass: p.floor_ratio <= PREPARE_FLOOR_TARGET,
      });
    }
  }
  if (r.compaction !== undefined) {
    const c = r.compaction;
    out.push({
      target: `rolling: event-loop stall < ${STALL_TARGET_MS} ms during a forced compaction of ${fmtCount(c.history_rows)} history rows, instant summarizer`,
      measured: `${fmtMs(c.instant.max_stall_ms)} (compaction ${fmtMs(c.instant.total_ms)})`,
      pass: c.instant.compacted && c.instant.max_stall_ms < STALL_TARGET_MS,
    });
    out.push({
      target: `rolling: event-loop stall < ${STALL_TARGET_MS} ms during the same compaction with the extractive summarizer (the default)`,
      measured: `${fmtMs(c.extractive.max_stall_ms)} (compaction ${fmtMs(c.extractive.total_ms)}, summarizer ${fmtMs(c.extractive.summarizer_ms)})`,
      pass: c.extractive.compacted && c.extractive.max_stall_ms < STALL_TARGET_MS,
    });
    out.push({
      target: `memory: the same compaction (extractive, in process) peaks at most +${fmtBytes(PEAK_RSS_TARGET_BYTES)} of RSS`,
      measured: `+${fmtBytes(c.extractive.peak_rss_bytes)} (instant +${fmtBytes(c.instant.peak_rss_bytes)}; ${c.compactions} compaction(s) in stages)`,
      pass: c.extractive.compacted && c.extractive.peak_rss_bytes <= PEAK_RSS_TARGET_BYTES,
    });
  }
  if (r.memory !== undefined) {
    out.push({
      target: `daemon RSS after ${r.memory.sessions} sessions each opened, given ${r.memory.rows_per_session} rows and prepared <= ${fmtBytes(RSS_TARGET_BYTES)}`,
      measured: `${fmtBytes(r.memory.rss_bytes)} (idle ${fmtBytes(r.memory.idle_rss_bytes)}, ${r.memory.loaded_kernels} kernels loaded)`,
      pass: r.memory.rss_bytes <= RSS_TARGET_BYTES,
    });
  }
  if (r.lcm !== undefined) out.push(...judgeLcm(r.lcm));
  if (r.replay !== undefined) out.push(...judgeReplay(r.replay));
  out.push(...judgeLcmEngine(r.lcm_compaction, r.lcm_prepare));
  if (r.frames !== undefined) out.push(...judgeFrames(r.frames));
  out.push(...judgeSnapPrepare(r.snap_prepare));
  if (r.images?.fit !== undefined) out.push(...judgeImageFit(r.images.fit));
  if (r.images?.elision !== undefined) out.push(judgeElision(r.images.elision));
  if (r.startup !== undefined) out.push(...judgeStartup(r.startup));
  if (r.proxy !== undefined) out.push(...judgeProxy(r.proxy));
  if (r.fairness !== undefined) out.push(...judgeFairness(r.fairness));
  if (r.import_fill !== undefined) out.push(...judgeImportFill(r.import_fill));
  out.push(...judgeRunTime(r.args, r.total_ms, r.time_parts ?? []));
  return out;
}

function judgeLcm(l: LcmResult): Verdict[] {
  const out: Verdict[] = [];
  const at = l.large.rows === 1_000_000 && l.large.tree.nodes >= 10_000 ? {} : { note: `judged at ${fmtCount(l.large.rows)} rows / ${fmtCount(l.large.tree.nodes)} nodes: 1M / 10k not run` };
  for (const c of l.grep) {
    out.push({
      target: `lcm_grep "${c.pattern}" over ${fmtCount(l.large.rows)} rows and ${fmtCount(l.large.tree.nodes)} nodes no slower than ${ANCHOR}`,
      measured: `${fmtMs(c.ours_best_ms)} vs ${fmtMs(c.gnu_best_ms)} (${c.ratio.toFixed(2)}x)`,
      pass: c.ratio <= 1,
      ...at,
    });
    out.push({ target: `event-loop stall < ${STALL_TARGET_MS} ms during lcm_grep "${c.pattern}"`, measured: `${c.max_stall_ms.toFixed(1)} ms`, pass: c.max_stall_ms < STALL_TARGET_MS, ...at });
  }
  for (const p of l.pages) {
    out.push({
      target: `${p.op} first page at ${fmtCount(l.large.rows)} rows within ${LCM_FLAT_TARGET}x of ${fmtCount(l.small.rows)} rows`,
      measured: `${fmtMs(p.large.median_ms)} vs ${fmtMs(p.small.median_ms)} timed in alternating blocks (${p.ratio.toFixed(2)}x)`,
      pass: p.ratio <= LCM_FLAT_TARGET,
      ...at,
    });
  }
  return out;
}

function table(title: string, head: string[], rows: Array<Array<string | number>>): string {
  const cells = rows.map((r) => r.map((c) => String(c)));
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]): string => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [`\n${title}`, line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}

export function render(r: Results): string {
  const out: string[] = [];
  out.push(`albedo-compactd benchmark — ${r.date}`);
  out.push(`machine: ${r.machine.cpus} cpus (${r.machine.cpu_model}), node ${r.machine.node}, sqlite ${r.machine.sqlite}, ${fmtBytes(r.machine.total_mem_bytes)} RAM`);
  out.push(`code: commit ${r.git.commit}${r.git.dirty.length === 0 ? '' : ` + uncommitted changes in ${r.git.dirty.join(', ')}`}`);
  out.push(`corpus: ${r.corpus.source}${r.corpus.note === null ? ` (${r.corpus.files.length} fixture files)` : ` — ${r.corpus.note}`}`);

  if (r.append !== undefined) {
    out.push(
      table(
        'append (appendRows, synchronous=FULL, realistic row mix)',
        ['batch', 'rows', 'rows/s', 'text MB/s', 'call median', 'call max'],
        r.append.map((a) => [a.batch, a.rows, Math.round(a.rows_per_s), a.text_mb_per_s.toFixed(1), fmtMs(a.call_median_ms), fmtMs(a.call_max_ms)]),
      ),
    );
  }
  if (r.append_floor !== undefined) {
    out.push(
      table(
        'append against the SQLite floor (same rows: plain table, WAL, synchronous=FULL, one transaction per batch) and, over the socket, the transport floor as well (a bare server answering the same requests); alternating blocks',
        ['path', 'batch', 'rows', 'ours rows/s', 'SQLite floor rows/s', 'vs SQLite floor', 'transport floor rows/s', 'vs both floors', 'our schema, nothing computed', 'CPU µs/row ours / SQLite floor / client'],
        r.append_floor.map((f) => {
          const c = f.cpu_us_per_row;
          const cpu = c === undefined ? '-' : [c.ours, c.floor, ...(c.client === undefined ? [] : [c.client])].map((x) => x.toFixed(1)).join(' / ');
          const schema = f.schema === undefined ? '-' : `${Math.round(f.schema.rows_per_s)} rows/s (${f.schema.ratio.toFixed(2)}x)`;
          const t = f.transport;
          return [
            f.path,
            f.batch,
            f.rows,
            Math.round(f.ours_rows_per_s),
            Math.round(f.floor_rows_per_s),
            `${f.ratio.toFixed(2)}x`,
            t === undefined ? '-' : Math.round(t.rows_per_s),
            t === undefined ? '-' : `${t.ratio.toFixed(2)}x`,
            schema,
            cpu,
          ];
        }),
      ),
    );
  }
  if (r.append_indexer !== undefined) {
    const x = r.append_indexer;
    out.push(
      table(
        `append and prepare latency over the socket, 100-row appends and nothing-due prepares ${x.pause_ms} ms apart, indexer working through ${fmtCount(x.backlog_rows)} rows vs off`,
        ['call', 'indexer', 'calls', 'median', 'min', 'max'],
        [
          ['append', 'on', x.on.runs, fmtMs(x.on.median_ms), fmtMs(x.on.min_ms), fmtMs(x.on.max_ms)],
          ['append', 'off', x.off.runs, fmtMs(x.off.median_ms), fmtMs(x.off.min_ms), fmtMs(x.off.max_ms)],
          ...((x.prepare as IndexerLatency['prepare'] | undefined) === undefined
            ? []
            : [
              ['prepare', 'on', x.prepare.on.runs, fmtMs(x.prepare.on.median_ms), fmtMs(x.prepare.on.min_ms), fmtMs(x.prepare.on.max_ms)],
              ['prepare', 'off', x.prepare.off.runs, fmtMs(x.prepare.off.median_ms), fmtMs(x.prepare.off.min_ms), fmtMs(x.prepare.off.max_ms)],
            ]),
        ],
      ),
    );
  }
  if (r.prepare_socket !== undefined && r.prepare_socket.length > 0) {
    out.push(
      table(
        'prepare over the socket, nothing due (round trip with the client parse) vs the transport floor and JSON.stringify of the response',
        ['history rows', 'response', 'prepare median', 'min', 'transport floor', 'vs floor', 'stringify median', 'ratio'],
        r.prepare_socket.map((
          p,
        ) => [
          fmtCount(p.history_rows),
          fmtBytes(p.response_bytes),
          fmtMs(p.prepare.median_ms),
          fmtMs(p.prepare.min_ms),
          p.floor === undefined ? '-' : fmtMs(p.floor.median_ms),
          p.floor === undefined ? '-' : `${p.floor_ratio.toFixed(1)}x`,
          fmtMs(p.stringify.median_ms),
          `${p.ratio.toFixed(1)}x`,
        ]),
      ),
    );
  }
  if (r.sizes.length > 0) {
    out.push(
      table(
        'datasets (main session of N rows + 9 side sessions of N/90; built with appendRows, 1000-row batches)',
        ['N', 'rows', 'text', 'build', 'rows/s', 'db file (no FTS)'],
        r.sizes.map((s) => [fmtCount(s.size), s.total_rows, fmtBytes(s.build.text_chars), fmtMs(s.build.ms), Math.round(s.build.rows_per_s), fmtBytes(s.build.db_bytes)]),
      ),
    );
  }
  const reads = r.sizes.filter((s) => s.read !== undefined);
  if (reads.length > 0) {
    out.push(
      table(
        'transcript_read (main session, 20k-grapheme page; a run past the budget is stopped and extrapolated)',
        ['N', 'non-ASCII rows', 'page', 'offset', 'median', 'min', 'runs', 'extrapolated', 'from read at offset', 'max stall'],
        reads.flatMap((s) =>
          s.read!.pages.map((p) => [
            fmtCount(s.size),
            `${(100 * s.read!.non_ascii_row_share).toFixed(0)}%`,
            p.page,
            p.offset,
            p.stopped === undefined ? fmtMs(p.stats.median_ms) : `> ${fmtMs(p.stopped.budget_ms)}`,
            fmtMs(p.stats.min_ms),
            p.stats.runs,
            p.stopped === undefined ? '-' : p.stopped.extrapolated_ms === null ? '?' : `~${fmtMs(p.stopped.extrapolated_ms)}`,
            p.stopped?.basis == null ? '-' : `${p.stopped.basis.offset} (${fmtMs(p.stopped.basis.ms)})`,
            fmtMs(p.max_stall_ms),
          ])
        ),
      ),
    );
  }
  if (r.segmenter_probe !== undefined) {
    out.push(
      table(
        'Intl.Segmenter cost (diagnostic): one string segmented whole vs in 1000-char slices',
        ['chars', 'whole µs/grapheme', 'sliced µs/grapheme'],
        r.segmenter_probe.map((p) => [p.chars, p.whole_us_per_grapheme.toFixed(2), p.sliced_us_per_grapheme.toFixed(2)]),
      ),
    );
  }
  const greps = r.sizes.filter((s) => s.grep !== undefined);
  if (greps.length > 0) {
    out.push(
      table(
        'search index (index batches with a merge step each until caught up, then merged fully)',
        ['N', 'rows', 'time', 'rows/s', 'first rows: ours / bare FTS5 rows/s', 'worst batch', 'db before', 'db after', 'FTS pages', 'FTS share'],
        greps.map((s) => {
          const i = s.grep!.index;
          const share = i.fts_bytes !== null && i.dbstat_total_bytes ? `${((100 * i.fts_bytes) / i.dbstat_total_bytes).toFixed(0)}%` : '-';
          const floor = `${fmtCount(i.floor.rows)}: ${Math.round(i.floor.ours_rows_per_s)} / ${Math.round(i.floor.floor_rows_per_s)}`;
          return [fmtCount(s.size), i.rows, fmtMs(i.ms), Math.round(i.rows_per_s), floor, fmtMs(i.max_batch_ms), fmtBytes(i.db_bytes_before), fmtBytes(i.db_bytes_after), i.fts_bytes === null ? '-' : fmtBytes(i.fts_bytes), share];
        }),
      ),
    );
    out.push(
      table(
        "disk once indexed and checkpointed: file and its parts (dbstat pages) vs the rows' raw text",
        ['N', 'text', 'file', 'file/text', 'rows', 'row indexes', 'search index', 'free', 'other parts'],
        greps.map((s) => {
          const d = s.grep!.disk;
          const rest = d.parts.payloads + d.parts.strategy_state + d.parts.engine + d.parts.other;
          return [fmtCount(s.size), fmtBytes(d.text_bytes), fmtBytes(d.file_bytes), `${d.ratio.toFixed(2)}x`, fmtBytes(d.parts.rows), fmtBytes(d.parts.row_indexes), fmtBytes(d.parts.search_index), fmtBytes(d.free_bytes), fmtBytes(rest)];
        }),
      ),
    );
    out.push(
      table(
        `transcript_grep in process vs ${ANCHOR_CMD} (LC_ALL=C.UTF-8) over the same texts, best of >=3`,
        ['N', 'scope', 'pattern', 'matches', ANCHOR, 'ours best', 'ours median', `${ANCHOR} best`, `ours/${ANCHOR}`, 'max stall', 'unindexed'],
        greps.flatMap((s) =>
          s.grep!.cases.map((
            c,
          ) => [
            fmtCount(s.size),
            c.scope,
            c.pattern,
            c.matches,
            c.gnu_matches,
            fmtMs(c.ours_best_ms),
            fmtMs(c.ours_median_ms),
            fmtMs(c.gnu_best_ms),
            `${c.ratio.toFixed(2)}x`,
            fmtMs(c.max_stall_ms),
            c.unindexed_ms === undefined ? '-' : fmtMs(c.unindexed_ms),
          ])
        ),
      ),
    );
    out.push(
      table(
        `transcript_grep over a daemon's socket (request written to response parsed) vs ${ANCHOR_CMD}, alternating blocks`,
        ['N', 'scope', 'pattern', 'matches', ANCHOR, 'ours best', 'ours median', `${ANCHOR} best`, `${ANCHOR} median`, `ours/${ANCHOR}`],
        greps.flatMap((s) =>
          s.grep!.socket.map((c) => [fmtCount(s.size), c.scope, c.pattern, c.matches, c.anchor_matches, fmtMs(c.ours.min_ms), fmtMs(c.ours.median_ms), fmtMs(c.anchor.min_ms), fmtMs(c.anchor.median_ms), `${c.ratio.toFixed(2)}x`])
        ),
      ),
    );
  }
  const preps = [...(r.prepare_baseline === undefined ? [] : [r.prepare_baseline]), ...r.sizes.flatMap((s) => (s.prepare === undefined ? [] : [s.prepare]))];
  if (preps.length > 0) {
    out.push(
      table(
        'prepare, nothing due (rolling, window 200k, tail 2%; median after warm-up, kernel cache reused)',
        ['history rows', 'tail rows', 'summary chars', 'est. tokens', 'request', 'prepare', 'stringify', 'ratio', 'vs baseline (alt.)', 'cold (new kernel)', 'handler path', 'sessionHead', 'engineSetup', 'savePrepared', 'setup compactions'],
        preps.map((p) => [
          p.history_rows,
          p.tail_rows,
          p.summary_chars,
          p.estimated_tokens,
          fmtBytes(p.request_bytes),
          fmtMs(p.prepare.median_ms),
          fmtMs(p.stringify.median_ms),
          `${(p.prepare.median_ms / p.stringify.median_ms).toFixed(1)}x`,
          p.versus_baseline === undefined ? '-' : `${fmtMs(p.versus_baseline.this.median_ms)}/${fmtMs(p.versus_baseline.baseline.median_ms)} = ${p.versus_baseline.ratio.toFixed(2)}x`,
          fmtMs(p.cold_ms),
          fmtMs(p.handler.median_ms),
          fmtMs(p.parts.session_head.median_ms),
          fmtMs(p.parts.engine_setup.median_ms),
          fmtMs(p.parts.save_prepared.median_ms),
          `${p.setup_compactions.length}, ${p.setup_compactions.filter((c) => c.summarizer === 'extractive').length} extractive (${fmtMs(p.setup_compactions.reduce((n, c) => n + c.ms, 0))})`,
        ]),
      ),
    );
  }
  if (r.compaction !== undefined) {
    const c = r.compaction;
    out.push(
      table(
        `one forced compaction of ${fmtCount(c.history_rows)} history rows (prepareRequest force, fresh kernel)`,
        ['summarizer', 'total', 'summarizer', 'own work', 'calls', 'prompt chars', 'evicted rows', 'max stall', 'peak RSS above'],
        [
          [
            'extractive (timed)',
            fmtMs(c.extractive.total_ms),
            fmtMs(c.extractive.summarizer_ms),
            fmtMs(c.extractive.own_ms),
            c.extractive.summarizer_calls,
            c.extractive.prompt_chars,
            c.extractive.evicted_rows,
            fmtMs(c.extractive.max_stall_ms),
            `+${fmtBytes(c.extractive.peak_rss_bytes)}`,
          ],
          ['instant', fmtMs(c.instant.total_ms), '0', fmtMs(c.instant.total_ms), '-', '-', c.instant.evicted_rows, fmtMs(c.instant.max_stall_ms), `+${fmtBytes(c.instant.peak_rss_bytes)}`],
        ],
      ),
    );
  }
  if (r.lcm !== undefined) {
    const l = r.lcm;
    const trees = `${fmtCount(l.large.tree.nodes)} nodes (depth ${l.large.tree.depth}) over ${fmtCount(l.large.rows)} main rows, ${fmtCount(l.small.tree.nodes)} over ${fmtCount(l.small.rows)}`;
    out.push(
      table(
        `lcm_grep vs ${ANCHOR_CMD} over the main session's rows and summaries dumped (${fmtBytes(l.dump_bytes)}); ${trees}`,
        ['pattern', 'rows', 'summaries', ANCHOR, 'ours best', 'ours median', `${ANCHOR} best`, `ours/${ANCHOR}`, 'max stall'],
        l.grep.map((c) => [c.pattern, c.source_matches, c.summary_matches, c.gnu_matches, fmtMs(c.ours_best_ms), fmtMs(c.ours_median_ms), fmtMs(c.gnu_best_ms), `${c.ratio.toFixed(2)}x`, fmtMs(c.max_stall_ms)]),
      ),
    );
    out.push(
      table(
        `lcm first pages (list limit 50; describe and expand 20k graphemes of the oldest frontier node), alternating blocks`,
        ['method', `median @${fmtCount(l.large.rows)}`, `median @${fmtCount(l.small.rows)}`, 'ratio'],
        l.pages.map((p) => [p.op, fmtMs(p.large.median_ms), fmtMs(p.small.median_ms), `${p.ratio.toFixed(2)}x`]),
      ),
    );
  }
  if (r.replay !== undefined) out.push(renderReplay(r.replay));
  if (r.frames !== undefined) {
    const f = r.frames;
    out.push(
      table(
        `frames: archive text of ${f.archive_rows} corpus rows (${f.archive_chars} chars) per shape; deflate ${f.deflate}; CPU times (the cheapest of 3 runs, median over the timed full frames; render, deflate, draw and sharp interleaved frame by frame), wall times for comparison`,
        [
          'shape',
          'frame px',
          'cells',
          'frames (timed)',
          'layout all',
          'frames/CPU s',
          'frames/wall s',
          'render+encode',
          'wall',
          'deflate alone',
          'ratio',
          'draw',
          'sharp',
          'sharp same px',
          'PNG/frame',
          'sharp PNG/frame',
          'PNG/1k chars',
          'chars/frame',
          'img tokens (edge)',
          'chars/img token',
          'chars/text token',
          'gain',
        ],
        f.shapes.map((s) => [
          s.shape,
          `${s.width}x${s.height}`,
          s.cells,
          `${s.frames} (${s.full_frames})`,
          fmtMs(s.layout_ms),
          Math.round(s.frames_per_s),
          Math.round(s.frames_per_wall_s),
          fmtMs(s.render_ms),
          fmtMs(s.render_wall_ms),
          fmtMs(s.deflate_ms),
          `${s.ratio_vs_deflate.toFixed(2)}x`,
          fmtMs(s.draw_ms),
          fmtMs(s.sharp_ms),
          s.same_pixels_as_sharp ? 'yes' : 'NO',
          fmtBytes(s.png_bytes_per_frame),
          fmtBytes(s.sharp_png_bytes_per_frame),
          `${Math.round(s.png_bytes_per_1000_chars)} B`,
          Math.round(s.chars_per_frame),
          `${s.image_tokens_per_frame} (${s.estimate_edge_px})`,
          s.chars_per_image_token.toFixed(2),
          s.chars_per_text_token.toFixed(2),
          `${(s.chars_per_image_token / s.chars_per_text_token).toFixed(2)}x`,
        ]),
      ),
    );
  }
  if (r.images?.fit !== undefined) out.push(renderImageFit(r.images.fit));
  if (r.images?.elision !== undefined) out.push(renderElision(r.images.elision));
  if (r.startup !== undefined) out.push(renderStartup(r.startup));
  if (r.proxy !== undefined) out.push(renderProxy(r.proxy));
  if (r.fairness !== undefined) out.push(renderFairness(r.fairness));
  if (r.import_fill !== undefined) out.push(renderImportFill(r.import_fill));
  if (r.time_parts !== undefined) out.push(renderRunTime(r.time_parts, r.total_ms));
  if (r.verdicts.length > 0) {
    out.push('\ntargets (this run):');
    for (const v of r.verdicts) out.push(`  ${v.pass ? 'PASS' : 'FAIL'}  ${v.target}: ${v.measured}${v.note === undefined ? '' : `  [${v.note}]`}`);
  }
  out.push(`\ntotal time ${fmtMs(r.total_ms)}`);
  return out.join('\n');
}
