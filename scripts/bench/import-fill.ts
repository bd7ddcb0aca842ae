// Section `import`: what someone sees after `albedo import` of a long Claude Code session. How
// long until a search answers from the trigram index alone, and what transcript_grep and
// lcm_grep cost while the index is still filling, against once it has caught up.
//
// The transcript is the longest Claude Code file among the fixtures, repeated COPIES times
// (100; 10 with --quick), each copy's ids suffixed so that every copy is rows of its own (the
// repository's small sample stands in when the fixtures are absent). A real daemon, indexer on,
// and the real CLI run on a fresh home. Once the import has returned, a client, every POLL_MS,
// asks `daemon.status` for the rows the index has not reached and times one transcript_grep and
// one lcm_grep of a word of the last copy, as an agent resuming the imported session might. Once
// the index has caught up, the same searches are timed again: the idle figures.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { startReplayDaemon } from '../replay/daemon.ts';
import type { Verdict } from './report.ts';
import { fmtMs, nowMs, stats } from './timing.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');

export const IMPORT_COPIES = 100;
/** Searches during the fill against idle: the bound. */
export const FILL_GREP_RATIO_TARGET = 2;
const POLL_MS = 500;
const IDLE_RUNS = 10;
/** Keys whose values are ids the importer keys rows and pairs calls by. */
const ID_KEYS = new Set(['uuid', 'parentUuid', 'leafUuid', 'id', 'tool_use_id', 'requestId', 'messageId']);
/** A word written into the last copy only, so a search has a rare, known target. */
const NEEDLE = 'quillwortneedle';

export interface ImportFillResult {
  source: string;
  source_lines: number;
  copies: number;
  rows: number;
  import_ms: number;
  /** From the import's start until daemon.status said no row waits for the index. */
  ready_ms: number;
  /** Polls made during the fill (each a status call and the two searches). */
  polls: number;
  during: { grep_ms: number[]; lcm_grep_ms: number[] };
  idle: { grep_ms: number[]; lcm_grep_ms: number[] };
}

/** The longest Claude Code main transcript under `fixtures`, or the repository's sample. */
function sourceFile(fixtures: string): string {
  const dir = path.join(fixtures, 'claude-code');
  const found: Array<{ file: string; size: number }> = [];
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory() && e.name !== 'subagents') walk(p);
      else if (e.isFile() && e.name.endsWith('.jsonl')) found.push({ file: p, size: fs.statSync(p).size });
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  found.sort((a, b) => b.size - a.size);
  return found[0]?.file ?? path.join(root, 'test/fixtures/transcripts/claude-code.jsonl');
}

/** Every id under ID_KEYS suffixed with `tag`, so a copy pairs its own calls and keys its own rows. */
function retag(v: unknown, tag: string): unknown {
  if (Array.isArray(v)) return v.map((x) => retag(x, tag));
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = ID_KEYS.has(k) && typeof x === 'string' ? `${x}-${tag}` : retag(x, tag);
  return out;
}

/** The source `copies` times over, into `file`; the last copy's first user message gets NEEDLE. */
function writeCopies(source: string, copies: number, file: string): number {
  const lines = fs.readFileSync(source, 'utf8').split('\n').filter((l) => l.trim() !== '');
  const out = fs.openSync(file, 'w');
  try {
    for (let k = 0; k < copies; k++) {
      let needled = k < copies - 1;
      const chunk: string[] = [];
      for (const line of lines) {
        let rec = retag(JSON.parse(line), `c${k}`) as { type?: string; isSidechain?: boolean; message?: { content?: unknown } };
        const content = rec.message?.content;
        const typed = (b: unknown): boolean => typeof b === 'object' && b !== null && (b as { type?: unknown }).type === 'text';
        if (!needled && rec.type === 'user' && rec.isSidechain !== true && (typeof content === 'string' || (Array.isArray(content) && content.length > 0 && content.every(typed)))) {
          const withNeedle = typeof content === 'string' ? `${content} ${NEEDLE}` : [...(content as unknown[]), { type: 'text', text: NEEDLE }];
          rec = { ...rec, message: { ...rec.message, content: withNeedle } };
          needled = true;
        }
        chunk.push(JSON.stringify(rec));
      }
      fs.writeSync(out, `${chunk.join('\n')}\n`);
    }
  } finally {
    fs.closeSync(out);
  }
  return lines.length;
}

/** `albedo import <file>` from the checkout's CLI, against the daemon in `home`. */
function runImport(home: string, file: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'cli/main.ts'), 'import', file], { env: { ...process.env, ALBEDO_HOME: home }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`albedo import exited ${code}: ${err}`))));
  });
}

export async function benchImportFill(tmp: string, fixtures: string, copies: number, log: (s: string) => void): Promise<ImportFillResult> {
  const dir = fs.mkdtempSync(path.join(tmp, 'albedo-import-'));
  try {
    const source = sourceFile(fixtures);
    const file = path.join(dir, 'imported.jsonl');
    const sourceLines = writeCopies(source, copies, file);
    const session = 'imported';
    const home = path.join(dir, 'home');
    fs.mkdirSync(home, { mode: 0o700 });
    const d = await startReplayDaemon({ window: 200_000, home, extensions: {} });
    try {
      const grep = async (): Promise<number> => {
        const t0 = nowMs();
        const r = await d.client.call('transcript_grep', { session, pattern: NEEDLE, limit: 10 });
        if (r.total !== 1) throw new Error(`transcript_grep found ${r.total} rows with the needle, not 1`);
        return nowMs() - t0;
      };
      const lcmGrep = async (): Promise<number> => {
        const t0 = nowMs();
        await d.client.call('lcm_grep', { session, pattern: NEEDLE, limit: 10 });
        return nowMs() - t0;
      };
      const t0 = nowMs();
      await runImport(home, file);
      const importMs = nowMs() - t0;
      const during = { grep_ms: [] as number[], lcm_grep_ms: [] as number[] };
      let polls = 0;
      for (;;) {
        const behind = (await d.client.call('daemon.status', {})).search.rows_behind;
        if (behind === 0) break;
        polls++;
        during.grep_ms.push(await grep());
        during.lcm_grep_ms.push(await lcmGrep());
        await sleep(POLL_MS);
      }
      const readyMs = nowMs() - t0;
      const rows = (await d.client.call('session.list', {})).sessions.find((s) => s.session === session)?.rows ?? 0;
      const idle = { grep_ms: [] as number[], lcm_grep_ms: [] as number[] };
      for (let i = 0; i < IDLE_RUNS; i++) {
        idle.grep_ms.push(await grep());
        idle.lcm_grep_ms.push(await lcmGrep());
      }
      const r: ImportFillResult = { source: path.relative(root, source), source_lines: sourceLines, copies, rows, import_ms: importMs, ready_ms: readyMs, polls, during, idle };
      log(`  import: ${copies} copies of ${sourceLines} lines, ${rows} rows imported in ${fmtMs(importMs)}; searches answer from the index ${fmtMs(readyMs)} after the import began (${polls} polls during the fill)`);
      return r;
    } finally {
      await d.stop();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function judgeImportFill(r: ImportFillResult): Verdict[] {
  return (['grep_ms', 'lcm_grep_ms'] as const).map((k) => {
    const name = k === 'grep_ms' ? 'transcript_grep' : 'lcm_grep';
    const during = stats(r.during[k]).median_ms;
    const idle = stats(r.idle[k]).median_ms;
    return {
      target: `import: ${name} while the search index fills after an import within ${FILL_GREP_RATIO_TARGET}x of its latency once filled (medians)`,
      measured: r.polls === 0 ? 'the index caught up before the first search' : `${fmtMs(during)} over ${r.polls} searches vs ${fmtMs(idle)} (${(during / idle).toFixed(2)}x)`,
      pass: r.polls === 0 || during / idle <= FILL_GREP_RATIO_TARGET,
    };
  });
}

export function renderImportFill(r: ImportFillResult): string {
  const row = (name: string, k: 'grep_ms' | 'lcm_grep_ms'): string => {
    const [during, idle] = [stats(r.during[k]), stats(r.idle[k])];
    return `  | ${name} | ${fmtMs(during.median_ms)} / ${fmtMs(during.max_ms)} | ${fmtMs(idle.median_ms)} / ${fmtMs(idle.max_ms)} |`;
  };
  return [
    `import: ${r.source} (${r.source_lines} lines) ${r.copies} times, ${r.rows} rows: imported in ${fmtMs(r.import_ms)}, searches answer from the index ${fmtMs(r.ready_ms)} after the import began`,
    '  | search | during the fill: median / max | after: median / max |',
    '  | --- | --- | --- |',
    row('transcript_grep', 'grep_ms'),
    row('lcm_grep', 'lcm_grep_ms'),
  ].join('\n');
}
