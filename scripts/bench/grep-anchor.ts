// What the grep sections time transcript_grep against: the patterns, and ripgrep (GNU grep where
// rg is not installed) counting matching lines over the same texts, as one whole process.
import { spawnSync } from 'node:child_process';

export const PATTERNS = [
  { name: 'rare', pattern: 'quokkatimeout' },
  { name: 'common', pattern: 'error' },
  { name: 'non-ascii', pattern: 'größe' },
  { name: '2-char', pattern: 'db' },
  { name: '1-char', pattern: 'z' },
] as const;

/** The anchor tool: ripgrep when installed, else GNU grep (the report names which). */
export const ANCHOR: 'rg' | 'grep' = spawnSync('rg', ['--version']).status === 0 ? 'rg' : 'grep';

/**
 * An anchor run slower than this is repeated less: at 1M rows one run takes 0.6-0.9 s, and the
 * grep sections' repeats of it took about 110 s of the full run, which issue 35 bounds to 30
 * minutes. Ours is still repeated as before.
 */
export const SLOW_ANCHOR_MS = 200;

/** One whole-process run of the anchor tool counting the lines of `file` that contain `pattern`. */
export function anchorCount(pattern: string, file: string): number {
  const args = ANCHOR === 'rg' ? ['-i', '-F', '-c', '--', pattern, file] : ['-F', '-i', '-c', '--', pattern, file];
  const r = spawnSync(ANCHOR, args, { env: { ...process.env, LC_ALL: 'C.UTF-8' }, encoding: 'utf8' });
  if (r.status !== 0 && r.status !== 1) throw new Error(`${ANCHOR} failed: ${r.stderr}`);
  return Number.parseInt(r.stdout.trim() || '0', 10);
}
