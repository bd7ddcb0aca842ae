// `npm run stress -- --ci` inside `npm test`: every part of the stress suite with its smallest
// counts, as two child runs side by side (the parts mostly wait on daemons, so the pair takes
// about as long as the longer one). Each part's verdict is asserted with the checks it failed
// and the seed to repeat it; the figures by hand are `npm run stress` (docs/reliability.md).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { PartResult } from '../../../scripts/stress/report.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
/** Two groups of about equal length, each run by one child. */
const GROUPS = [
  ['crash', 'fuzz', 'load', 'half-close'],
  ['slow-reader', 'startup', 'summarizer'],
];

async function runStress(parts: string[], tmp: string, seed: number): Promise<PartResult[]> {
  const json = path.join(tmp, `${parts[0]}.json`);
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/stress.ts', '--ci', '--only', parts.join(','), '--seed', String(seed), '--json', json, '--tmp', tmp], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  assert.equal(code, 0, `the stress suite itself broke (${parts.join(',')}):\n${out}`);
  return (JSON.parse(fs.readFileSync(json, 'utf8')) as { parts: PartResult[] }).parts;
}

test('every stress part passes at the CI scale', { timeout: 240_000 }, async (t) => {
  // Socket paths are limited to ~107 bytes: a short scratch folder.
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-st-'));
  t.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const seed = Math.floor(Math.random() * 2 ** 31);
  const results = (await Promise.all(GROUPS.map((g) => runStress(g, tmp, seed)))).flat();
  assert.deepEqual(results.map((r) => r.part).sort(), GROUPS.flat().sort());
  const failed = results.filter((r) => !r.pass).map((r) => `${r.part}: ${r.failures.join('; ')}`);
  assert.deepEqual(failed, [], `seed ${seed} (repeat: npm run stress -- --ci --seed ${seed})`);
});
