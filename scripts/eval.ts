// `npm run eval`: context quality and cost per strategy, measured by replaying transcripts into
// fresh daemons (scripts/eval/run.ts). Prints the table, writes eval.json (every number, the
// machine, date and flags) and two SVGs per transcript (request size per turn; probes kept against cost) to --out. docs/eval.md explains the metrics.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SummarizerConfig } from '../strategies/summarizer/types.ts';
import { replayFiles } from './bench/replay.ts';
import { eachFlag, namesFrom } from './flags.ts';
import { importTranscript } from '../cli/import/index.ts';
import { priceNotes, renderProbeSvg, renderProbeTables, renderSvg, renderTable } from './eval/report.ts';
import { EVAL_STRATEGIES, MEASURED_RATIO, relateToNone, runEval, type EvalSummarizer, type RunMetrics } from './eval/run.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DEFAULT_CORPUS = path.join(root, 'scripts/eval/corpus');
export const DEFAULT_WINDOW = 12_000;

const USAGE = `usage: npm run eval -- [FILES…] [--window ${DEFAULT_WINDOW}] [--strategies ${EVAL_STRATEGIES.join(',')}]
       [--summarizer extractive|openai [--base-url URL] [--model ID] [--api-key-env VAR]] [--out .eval]
Without FILES the shipped corpus (scripts/eval/corpus/) is replayed.`;

interface Args {
  files: string[];
  window: number;
  strategies: string[];
  summarizer: EvalSummarizer;
  out: string;
}

function parseArgs(argv: readonly string[]): Args {
  const a: Args = { files: [], window: DEFAULT_WINDOW, strategies: [...EVAL_STRATEGIES], summarizer: { provider: 'extractive' }, out: path.join(root, '.eval') };
  const s: { provider?: string; baseUrl?: string; model?: string; apiKeyEnv?: string } = {};
  for (const f of eachFlag(argv, USAGE)) {
    if (f.name === '--window') a.window = Number(f.value());
    else if (f.name === '--strategies') a.strategies = namesFrom(f.value(), EVAL_STRATEGIES, 'strategy');
    else if (f.name === '--summarizer') s.provider = f.value();
    else if (f.name === '--base-url') s.baseUrl = f.value();
    else if (f.name === '--model') s.model = f.value();
    else if (f.name === '--api-key-env') s.apiKeyEnv = f.value();
    else if (f.name === '--out') a.out = path.resolve(f.value());
    else if (f.name === '--help' || f.name === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else if (f.name.startsWith('-')) throw new Error(`unknown flag ${f.raw}\n${USAGE}`);
    else a.files.push(path.resolve(f.raw));
  }
  if (!Number.isInteger(a.window) || a.window < 1000) throw new Error(`--window needs an integer of at least 1000\n${USAGE}`);
  if (s.provider !== undefined && s.provider !== 'extractive' && s.provider !== 'openai') throw new Error(`--summarizer is extractive or openai\n${USAGE}`);
  const summarizer = {
    provider: s.provider ?? 'extractive',
    ...(s.baseUrl === undefined ? {} : { baseUrl: s.baseUrl }),
    ...(s.model === undefined ? {} : { model: s.model }),
    ...(s.apiKeyEnv === undefined ? {} : { apiKeyEnv: s.apiKeyEnv }),
  };
  // Checked here with the daemon's own schema, so a bad URL fails before any daemon starts.
  const checked = SummarizerConfig.safeParse(summarizer);
  if (!checked.success) throw new Error(`bad summarizer flags: ${checked.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}\n${USAGE}`);
  a.summarizer = summarizer as EvalSummarizer;
  return a;
}

function gitCommit(): string | null {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const files = args.files.length > 0 ? args.files : replayFiles(DEFAULT_CORPUS);
  fs.mkdirSync(args.out, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-eval-'));
  const runs: RunMetrics[] = [];
  const t0 = performance.now();
  try {
    for (const file of files) {
      const name = path.basename(file).replace(/([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '$1…');
      const imported = importTranscript(fs.readFileSync(file, 'utf8'), { path: file });
      const mine: RunMetrics[] = [];
      for (const strategy of args.strategies) {
        const r = await runEval(name, imported, strategy, { window: args.window, summarizer: args.summarizer, tmp });
        process.stderr.write(`eval ${name} ${strategy}: ${r.prepares} prepares, ${r.compactions} compactions, ${(r.wall_ms / 1000).toFixed(1)} s\n`);
        mine.push(r);
      }
      runs.push(...mine);
      const base = path.join(args.out, name.replace(/[^\w.-]+/g, '_'));
      fs.writeFileSync(`${base}.svg`, renderSvg(mine));
      fs.writeFileSync(`${base}.probes.svg`, renderProbeSvg(mine));
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  relateToNone(runs);
  const table = `${renderTable(runs)}\n\n${renderProbeTables(runs)}`;
  const prices = priceNotes(runs);
  process.stdout.write(`${table}\n\nwindow ${args.window} tokens; summarizer ${args.summarizer.provider ?? 'extractive'}; usage reports = ${MEASURED_RATIO} x estimate\n${prices.map((p) => `price ${p}`).join('\n')}\n`);
  const cpus = os.cpus();
  const json = {
    date: new Date().toISOString(),
    commit: gitCommit(),
    machine: { platform: `${os.platform()} ${os.release()}`, cpu: cpus[0]?.model ?? 'unknown', cores: cpus.length, memory_gb: Math.round(os.totalmem() / 2 ** 30), node: process.version },
    flags: { files, window: args.window, strategies: args.strategies, summarizer: args.summarizer, measured_ratio: MEASURED_RATIO },
    wall_s: (performance.now() - t0) / 1000,
    prices,
    runs,
  };
  fs.writeFileSync(path.join(args.out, 'eval.json'), `${JSON.stringify(json, null, 2)}\n`);
  process.stderr.write(`wrote ${path.join(args.out, 'eval.json')} and ${2 * files.length} SVG(s) in ${json.wall_s.toFixed(0)} s\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`eval: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
