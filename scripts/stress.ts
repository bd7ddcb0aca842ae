// `npm run stress`: fault injection against real albedod processes in temp homes, over their
// Unix sockets only. Parts: crash, fuzz, load, slow-reader, half-close, startup, summarizer
// (docs/reliability.md says what each checks). Every part is bounded in count and time; each
// prints one PASS/FAIL line of figures, and the whole run is written as JSON. A FAIL is a
// finding, not a crash of the suite: the exit code is 0 unless the suite itself broke.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, type Part } from './stress/args.ts';
import { crashPart } from './stress/crash.ts';
import { fuzzPart } from './stress/fuzz.ts';
import { halfClosePart } from './stress/half-close.ts';
import { loadPart } from './stress/load.ts';
import { Prng } from './stress/prng.ts';
import type { Scale } from './stress/scale.ts';
import { line, result, type PartResult } from './stress/report.ts';
import { slowReaderPart } from './stress/slow-reader.ts';
import { startupPart } from './stress/startup.ts';
import { summarizerPart } from './stress/summarizer.ts';

type Runner = (tmp: string, prng: Prng, scale: Scale, log: (s: string) => void) => Promise<PartResult>;

const RUNNERS: Record<Part, Runner> = {
  crash: crashPart,
  fuzz: fuzzPart,
  load: loadPart,
  'slow-reader': slowReaderPart,
  'half-close': halfClosePart,
  startup: startupPart,
  summarizer: summarizerPart,
};

function log(s: string): void {
  process.stderr.write(`${s}\n`);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  // Socket paths are limited to ~107 bytes, so the scratch folder stays short.
  const root = fs.mkdtempSync(path.join(args.tmp, 'albedo-stress-'));
  const cleanup = (): void => fs.rmSync(root, { recursive: true, force: true });
  process.once('SIGINT', () => {
    cleanup();
    process.exit(130);
  });
  const t0 = performance.now();
  console.log(`stress: seed=${args.seed} scale=${args.scale} parts=${args.only.join(',')}`);
  const parts: PartResult[] = [];
  try {
    for (const [i, part] of args.only.entries()) {
      log(`${part} ...`);
      const p0 = performance.now();
      let r: PartResult;
      try {
        // Each part gets its own stream, so --only gives a part the draws it gets in a full run.
        r = await RUNNERS[part](root, new Prng(args.seed + 1000 * (i + 1)), args.scale, log);
      } catch (err) {
        r = result(part, p0, {}, [`the part itself failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`]);
      }
      parts.push(r);
      console.log(line(r));
    }
  } finally {
    cleanup();
  }
  const failed = parts.filter((p) => !p.pass).map((p) => p.part);
  const totalMs = Math.round(performance.now() - t0);
  console.log(`stress: ${parts.length - failed.length} PASS, ${failed.length} FAIL${failed.length > 0 ? ` (${failed.join(', ')})` : ''} in ${(totalMs / 1000).toFixed(1)} s, seed=${args.seed}`);
  const cpus = os.cpus();
  const doc = {
    date: new Date().toISOString(),
    seed: args.seed,
    scale: args.scale,
    machine: { cpus: cpus.length, cpu_model: cpus[0]?.model ?? '?', node: process.version, total_mem_bytes: os.totalmem() },
    total_ms: totalMs,
    parts,
  };
  fs.mkdirSync(path.dirname(path.resolve(args.json)), { recursive: true });
  fs.writeFileSync(args.json, `${JSON.stringify(doc, null, 2)}\n`);
  console.log(`results written to ${args.json}`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
