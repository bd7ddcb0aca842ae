// Loads an entry of the built package, or says how to build it: a checkout installed with
// --ignore-scripts, or one whose dist/ was removed, has no dist/ yet.
import fs from 'node:fs';
import process from 'node:process';
import { URL } from 'node:url';

export async function runBuilt(entry) {
  const url = new URL(`../dist/${entry}`, import.meta.url);
  if (!fs.existsSync(url)) {
    process.stderr.write(`albedo: the package is not built (no dist/${entry}); run: npm run build\n`);
    process.exit(1);
  }
  await import(url.href);
}
