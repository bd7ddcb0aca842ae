// The sections that measure the daemon or the CLI as users run them (bin/ -> dist/) build
// dist/ first, so that what is measured is the code in the tree.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** `npm run build`; throws with its output when it fails. */
export function buildDist(log: (s: string) => void): void {
  log('  building dist/ (npm run build)');
  const built = spawnSync('npm', ['run', 'build', '--silent'], { cwd: root, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`npm run build failed: ${built.stderr}${built.stdout}`);
}
