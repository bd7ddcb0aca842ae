// `npm run demo` runs to completion on the embedded defaults: a daemon in a temp home, the
// session under each strategy with compactions, a grep of evicted history, frames written.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

test('the demo plays the session under rolling, lcm and snapcompact, greps evicted history and writes real frames', async () => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/demo.ts')], { cwd: root, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' }, timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  const out = r.stdout;
  for (const strategy of ['lcm', 'snapcompact']) {
    const m = out.match(new RegExp(`/context under ${strategy}: (\\d+) compaction`));
    assert.ok(m !== null && Number(m[1]) > 0, `${strategy} compacted:\n${out.slice(-2000)}`);
  }
  const end = out.match(/\/context at the end: (\d+) compaction/);
  assert.ok(end !== null && Number(end[1]) > 0, 'rolling compacted');
  assert.match(out, /[1-9]\d* matching row\(s\)/, 'the grep finds evicted history');
  assert.match(out, /strategy lcm/);
  const frames = out.match(/frames: (\d+) written to (\S+)/);
  assert.ok(frames !== null, 'frames were written');
  const dir = frames[2]!;
  try {
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.png'));
    assert.equal(files.length, Number(frames[1]));
    const meta = await sharp(path.join(dir, files[0]!)).metadata();
    assert.equal(meta.format, 'png');
    assert.ok((meta.width ?? 0) > 0);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
