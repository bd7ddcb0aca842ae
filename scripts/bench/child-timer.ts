// Runs one of the bench's timing clients (socket-timer.ts, append-timer.ts) in a process of its
// own: the request goes in a file beside the sockets, the samples come back as one JSON line.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/** `script` (a file in scripts/bench) run under tsx with `args` and the request file last; its parsed stdout. */
export async function runTimerChild<T>(script: string, args: readonly string[], dir: string, request: unknown): Promise<T> {
  const file = path.join(dir, `${path.basename(script, '.ts')}-request.json`);
  fs.writeFileSync(file, JSON.stringify(request));
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, script), ...args, file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    if (code !== 0) throw new Error(`${script} exited with ${code}: ${err}`);
    return JSON.parse(out) as T;
  } finally {
    fs.rmSync(file, { force: true });
  }
}
