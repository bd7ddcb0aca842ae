// Section `replay`: every real transcript under the fixtures folder (except the synthetic Codex
// schema file) imported and replayed turn by turn into a fresh daemon per transcript and window
// (8k, 32k, 200k tokens), measuring whether what the model would be sent fits the window.
import fs from 'node:fs';
import path from 'node:path';
import { importTranscript, rowCounts } from '../../cli/import/index.ts';
import { startReplayDaemon } from '../replay/daemon.ts';
import { replayTranscript, type ReplayStats } from '../replay/replay.ts';

export const REPLAY_WINDOWS = [8_000, 32_000, 200_000];
const MEASURED_RATIO = 1.3;

export interface ReplayRun {
  transcript: string;
  strategy: string;
  format: string;
  model: string | null;
  window: number;
  stats: Omit<ReplayStats, 'records'>;
}

export interface ReplayResult {
  fixtures: string;
  /** Why nothing was replayed, when nothing was. */
  note: string | null;
  measured_ratio: number;
  runs: ReplayRun[];
  /** Files that could not be imported, with the error. */
  import_errors: Array<{ transcript: string; error: string }>;
}

/**
 * Transcript files under `dir`, sorted, without the synthetic schema-coverage fixture and the
 * proxy fixtures' logs of HTTP requests (`*.requests.jsonl`), which are not transcripts.
 */
export function replayFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(jsonl|traj)$/.test(e.name) && !e.name.endsWith('.requests.jsonl') && !e.name.startsWith('SYNTHETIC')) out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

/** A short label: the path under the fixtures folder with uuids cut to their first 8 digits. */
function label(dir: string, file: string): string {
  return path.relative(dir, file).replace(/([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '$1…');
}

/** The extensions.json a replay daemon runs a strategy with, at a window. */
export function replayExtensions(strategy: string, window: number): Record<string, unknown> {
  return { [strategy]: { contextWindowTokens: window }, extensions: { enable: [strategy] } };
}

export async function benchReplay(dir: string, tmp: string, log: (s: string) => void, strategies: readonly string[] = ['rolling']): Promise<ReplayResult> {
  const result: ReplayResult = { fixtures: dir, note: null, measured_ratio: MEASURED_RATIO, runs: [], import_errors: [] };
  if (!fs.existsSync(dir)) {
    result.note = `${dir} not found; the replay section needs the real transcripts and was skipped`;
    log(`replay: ${result.note}`);
    return result;
  }
  const files = replayFiles(dir);
  if (files.length === 0) {
    result.note = `no transcripts (*.jsonl, *.traj) under ${dir}; replay skipped`;
    log(`replay: ${result.note}`);
    return result;
  }
  const transcripts: Array<{ name: string; imported: ReturnType<typeof importTranscript> }> = [];
  for (const file of files) {
    const name = label(dir, file);
    try {
      transcripts.push({ name, imported: importTranscript(fs.readFileSync(file, 'utf8'), { path: file }) });
    } catch (err) {
      result.import_errors.push({ transcript: name, error: (err as Error).message });
      log(`replay: ${name}: import failed: ${(err as Error).message}`);
    }
  }
  // One daemon per strategy and window, each transcript in a session of its own: a daemon's
  // start (~1 s with the TypeScript loader) cost ten times the replay of most fixtures.
  const runs = new Map<string, ReplayRun>();
  for (const strategy of strategies) {
    for (const window of REPLAY_WINDOWS) {
      const d = await startReplayDaemon({ window, tmp, extensions: replayExtensions(strategy, window) });
      try {
        for (const [i, { name, imported }] of transcripts.entries()) {
          const { records: _records, ...stats } = await replayTranscript(d.client, `replay-${i}`, imported, { window, measuredRatio: MEASURED_RATIO });
          runs.set(`${i} ${strategy} ${window}`, { transcript: name, strategy, format: imported.format, model: imported.model ?? null, window, stats });
          log(
            `replay ${name} ${strategy} @${window}: ${rowCounts(imported.rows).rows} rows, ${stats.prepares} prepares, ${stats.over_window} over the window, largest ${stats.max_calibrated_ratio.toFixed(2)}x, ${
              (stats.wall_ms / 1000).toFixed(1)
            } s`,
          );
        }
      } finally {
        await d.stop();
      }
    }
  }
  // Reported transcript by transcript, as they were run before.
  for (const [i] of transcripts.entries()) {
    for (const strategy of strategies) {
      for (const window of REPLAY_WINDOWS) {
        const run = runs.get(`${i} ${strategy} ${window}`);
        if (run !== undefined) result.runs.push(run);
      }
    }
  }
  return result;
}

function fmtWindow(w: number): string {
  return w >= 1000 ? `${w / 1000}k` : String(w);
}

/** The replay table in markdown, and the acceptance targets summed over every run. */
export function renderReplay(r: ReplayResult): string {
  const out: string[] = [];
  out.push(`\nreplay: real transcripts turn by turn into the daemon (extractive summarizer; usage.report = ${r.measured_ratio} x estimate)`);
  if (r.note !== null) {
    out.push(`  ${r.note}`);
    return out.join('\n');
  }
  out.push('');
  out.push(
    '| transcript | strategy | window | rows accepted | rejected (codes) | prepares | over window (all) | over window from first due | largest / window | compactions | failures | latched | calls without results (requests) | results without calls | prefix breaks between compactions | wall |',
  );
  out.push('| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const run of r.runs) {
    const s = run.stats;
    const codes = Object.entries(s.rows.rejected_by_code).map(([k, v]) => `${k} ${v}`).join(', ');
    out.push(
      `| ${run.transcript} | ${run.strategy} | ${fmtWindow(run.window)} | ${s.rows.accepted}/${s.rows.total} | ${s.rows.rejected}${codes === '' ? '' : ` (${codes})`} | ${s.prepares} | ${s.over_window} | ${
        s.first_due === null ? 'never due' : `${s.over_window_after_due} of ${s.prepares_after_due}`
      } | ${s.max_calibrated_ratio.toFixed(2)}x | ${s.compactions} | ${s.failures} | ${s.latched} | ${s.calls_without_results} (${s.prepares_with_unanswered_calls}) | ${s.results_without_calls} | ${s.prefix_breaks}/${s.prefix_checks} | ${
        (s.wall_ms / 1000).toFixed(1)
      } s |`,
    );
  }
  for (const e of r.import_errors) out.push(`\n  import failed: ${e.transcript}: ${e.error}`);
  const reasons = [...new Set(r.runs.flatMap((x) => x.stats.failure_reasons))];
  if (reasons.length > 0) out.push(`\nfailure reasons seen: ${reasons.map((x) => `"${x}"`).join('; ')}`);
  return out.join('\n');
}

/** The issue's acceptance targets, each counted over every transcript x window run. */
export function judgeReplay(r: ReplayResult): Array<{ target: string; measured: string; pass: boolean }> {
  if (r.runs.length === 0) return [];
  const n = r.runs.length;
  const count = (f: (s: ReplayRun['stats']) => boolean): number => r.runs.filter((x) => f(x.stats)).length;
  const checks: Array<[string, (s: ReplayRun['stats']) => boolean]> = [
    ['replay: every row accepted', (s) => s.rows.rejected === 0],
    ['replay: every prepare from the first due one on within the window (calibrated)', (s) => s.over_window_after_due === 0],
    ['replay: 0 calls without results', (s) => s.calls_without_results === 0],
    ['replay: 0 latched prepares', (s) => s.latched === 0],
    ['replay: request prefix stable between compactions', (s) => s.prefix_breaks === 0],
  ];
  return checks.map(([target, ok]) => {
    const good = count(ok);
    return { target, measured: `${good} of ${n} transcript x strategy x window runs`, pass: good === n };
  });
}
