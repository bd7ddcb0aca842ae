// Loads an entry of the built package, or says how to build it: a checkout installed with
// --ignore-scripts, or one whose dist/ was removed, has no dist/ yet.
import { createRequire } from 'node:module';

// Node's modules through require: each one imported as an ES module gets a facade built at
// start, a few ms that the CLI's budget (bench section startup) notices.
const require = createRequire(import.meta.url);
const fs = require('node:fs');
const path = require('node:path');
const { fileURLToPath, pathToFileURL, URL } = require('node:url');
const process = require('node:process');
const vm = require('node:vm');

function builtPath(entry) {
  const file = fileURLToPath(new URL(`../dist/${entry}`, import.meta.url));
  if (!fs.existsSync(file)) {
    process.stderr.write(`albedo: the package is not built (no dist/${entry}); run: npm run build\n`);
    process.exit(1);
  }
  return file;
}

export async function runBuilt(entry) {
  await import(pathToFileURL(builtPath(entry)).href);
}

/**
 * Runs dist/<entry>, a CommonJS bundle, through vm.Script with the V8 code cache the build wrote
 * beside it (<entry>.cache, see scripts/build.ts), so a start skips parsing and compiling what
 * the cache holds: most of what a short CLI run costs beyond Node's own start. Without the file,
 * or with a cache V8 rejects (another Node version), the bundle is compiled as usual. Returns
 * the script, whose createCachedData() the build uses to write the cache.
 */
export function runBundle(entry) {
  const file = builtPath(entry);
  const cacheFile = `${file}.cache`;
  const cachedData = fs.existsSync(cacheFile) ? fs.readFileSync(cacheFile) : undefined;
  // The same wrapper Node puts around a CommonJS module.
  const source = `(function (exports, require, module, __filename, __dirname) {${fs.readFileSync(file, 'utf8')}\n})`;
  const script = new vm.Script(source, { filename: file, cachedData });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, createRequire(file), module, file, path.dirname(file));
  return script;
}
