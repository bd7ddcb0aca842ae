// albedo import's progress bar: drawn on stderr only for a terminal (or ALBEDO_PROGRESS=always),
// never for --json or off a terminal, redrawn in place, and erased before the summary.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCli } from '../../cli/program.ts';
import { PROGRESS_MIN_BYTES, ProgressBar, progressWanted } from '../../cli/progress.ts';
import { startDaemon, tempHome, type DaemonHandle } from '../e2e/harness.ts';

const ERASE = '\r\u001b[K';

describe('the bar itself', () => {
  test('a line shows the share done, the megabytes and the detail, and fits the width', () => {
    const line = ProgressBar.line('storing', 3 * 1024 * 1024, 12 * 1024 * 1024, '250/1,000 rows', 80);
    assert.match(line, /^storing \[#+\.+\] {2}25% 3\.0\/12\.0 MB 250\/1,000 rows$/);
    assert.ok(line.length <= 80, line);
    const bar = /\[([#.]+)\]/.exec(line)![1]!;
    assert.equal(bar.split('#').length - 1, Math.round(bar.length / 4));
    assert.match(ProgressBar.line('checking', 5, 0, '', 80), /100%/, 'nothing to do counts as done');
  });

  test('redraws at most every 100 ms unless forced, and end() erases what it drew', () => {
    let out = '';
    let now = 0;
    const bar = new ProgressBar({ write: (s: string) => (out += s), columns: 60 }, () => now);
    bar.update('storing', 1, 10);
    now = 50;
    bar.update('storing', 2, 10);
    assert.equal(out.split('\r').length - 1, 1, 'the second state came too soon');
    bar.update('storing', 10, 10, '', true);
    assert.match(out, /100%/);
    for (const line of out.split('\r').slice(1)) assert.ok(line.replace('\u001b[K', '').length < 60, line);
    bar.end();
    assert.ok(out.endsWith(ERASE));
    bar.end();
    assert.ok(!out.endsWith(ERASE + ERASE), 'end is idempotent');
  });

  test('wanted on a terminal for large files only, never with --json; ALBEDO_PROGRESS overrides', () => {
    const tty = { write: () => true, isTTY: true };
    const pipe = { write: () => true, isTTY: false };
    const big = { json: false, bytes: PROGRESS_MIN_BYTES };
    assert.equal(progressWanted(tty, {}, big), true);
    assert.equal(progressWanted(tty, {}, { json: false, bytes: PROGRESS_MIN_BYTES - 1 }), false);
    assert.equal(progressWanted(pipe, {}, big), false);
    assert.equal(progressWanted(tty, { TERM: 'dumb' }, big), false);
    assert.equal(progressWanted(tty, {}, { json: true, bytes: PROGRESS_MIN_BYTES }), false);
    assert.equal(progressWanted(pipe, { ALBEDO_PROGRESS: 'always' }, { json: false, bytes: 1 }), true);
    assert.equal(progressWanted(tty, { ALBEDO_PROGRESS: 'never' }, big), false);
    assert.equal(progressWanted(tty, { ALBEDO_PROGRESS: 'always' }, { json: true, bytes: 1 }), false);
  });
});

describe('albedo import against a daemon', () => {
  let d: DaemonHandle;
  let dir: string;
  let big: string;
  let small: string;

  before(async () => {
    d = await startDaemon();
    dir = tempHome();
    // albedo's own format: one row a line. 48 rows of ~110 KB each put the file over the threshold.
    const text = 'the quick brown fox jumps over the lazy dog '.repeat(2500);
    const rows = Array.from({ length: 48 }, (_, i) => JSON.stringify({ kind: 'user', origin: 'user', key: `r${i}`, content: [{ type: 'text', text: `${i} ${text}` }] }));
    big = path.join(dir, 'big.jsonl');
    fs.writeFileSync(big, `${rows.join('\n')}\n`);
    assert.ok(fs.statSync(big).size > PROGRESS_MIN_BYTES);
    small = path.join(dir, 'small.jsonl');
    fs.writeFileSync(small, `${rows.slice(0, 3).map((r) => r.replace(text, 'short')).join('\n')}\n`);
  });
  after(async () => {
    await d.stop();
  });

  async function importRun(args: string[], opts: { tty: boolean; env?: Record<string, string> }) {
    let stdout = '';
    let stderr = '';
    const code = await runCli(['import', ...args], {
      stdout: { write: (s: string) => (stdout += s), isTTY: false },
      stderr: { write: (s: string) => (stderr += s), isTTY: opts.tty, columns: 72 },
      env: { ALBEDO_HOME: d.home, ALBEDO_SOCKET: d.socket, ...opts.env },
    });
    return { code, stdout, stderr };
  }

  test('off a terminal a large file imports without a bar', async () => {
    const r = await importRun([big, '--dry-run'], { tty: false });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    assert.match(r.stdout, /checked .*big\.jsonl \(albedo\)\n {2}48 rows/);
  });

  test('with --json there is no bar, even on a terminal', async () => {
    const r = await importRun([big, '--dry-run', '--json'], { tty: true });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    assert.equal((JSON.parse(r.stdout) as { rows: number }).rows, 48);
  });

  test('on a terminal a large file gets a bar, erased before the summary', async () => {
    const r = await importRun([big, '--dry-run'], { tty: true });
    assert.equal(r.code, 0, r.stderr);
    const states = r.stderr.split('\r').filter((s) => s !== '' && s !== '\u001b[K').map((s) => s.replace('\u001b[K', ''));
    assert.match(states[0]!, /^checking \[\.+\] {3}0% 0\.0\/5\.\d MB$/);
    assert.ok(states.some((s) => /^checking \[#+\] 100% 5\.\d\/5\.\d MB 48 rows$/.test(s)), states.join(' | '));
    for (const s of states) assert.ok(s.length < 72, s);
    assert.ok(r.stderr.endsWith(ERASE), 'the bar is erased at the end');
    assert.match(r.stdout, /^checked .*48 rows/s);
  });

  test('ALBEDO_PROGRESS=always draws it for a small file off a terminal, through the storing phase', async () => {
    const r = await importRun([small], { tty: false, env: { ALBEDO_PROGRESS: 'always' } });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /\rstoring \[\.+\] {3}0% 0\.0\/\S+ MB 0\/3 rows/);
    assert.match(r.stderr, /\rstoring \[#+\] 100% \S+ MB 3\/3 rows/);
    assert.ok(r.stderr.endsWith(ERASE));
    assert.match(r.stdout, /3 new, 0 already stored/);
  });
});
