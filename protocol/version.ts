// The package's version, read from package.json. The file is looked for upward from this
// module because it sits one level up in the source tree and two levels up in dist/.
import fs from 'node:fs';

let cached: string | undefined;

export function packageVersion(): string {
  if (cached !== undefined) return cached;
  for (let dir = new URL('./', import.meta.url);; dir = new URL('../', dir)) {
    const file = new URL('package.json', dir);
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'albedo-compactd') return (cached = pkg.version ?? '0.0.0');
    }
    if (dir.pathname === '/') return (cached = '0.0.0');
  }
}
