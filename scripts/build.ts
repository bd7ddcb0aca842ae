// `npm run build` (also run by `npm install` through `prepare`): compiles the sources into
// dist/ with tsc (tsconfig.build.json rewrites the relative `.ts` imports to `.js`), then adds
// what tsc does not emit: the data files modules read beside themselves at run time, and the
// search worker's entry. The CLI is also bundled into one file, dist/albedo.cjs, with a V8 code
// cache beside it: loading one precompiled file instead of zod's and commander's hundreds of
// modules is most of what `albedo status` costs beyond Node's own start, and zod's error
// messages in 40-odd languages stay out (see zodEnglishOnly). dist/ is rebuilt from nothing each
// time, so a file deleted from the sources never lingers in it.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
/** The CLI as one CommonJS file (bin/albedo.js runs it). */
const CLI_BUNDLE = 'albedo.cjs';

interface BuildConfig {
  include: string[];
}

async function main(): Promise<void> {
  fs.rmSync(dist, { recursive: true, force: true });
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    process.stderr.write('build: tsc failed\n');
    process.exit(r.status ?? 1);
  }
  const config = JSON.parse(fs.readFileSync(path.join(root, 'tsconfig.build.json'), 'utf8')) as BuildConfig;
  let copied = 0;
  for (const dir of config.include) copied += copyData(path.join(root, dir));
  // The source entry registers tsx inside the worker thread (workers do not inherit loader
  // flags on Node 20). Built code has nothing to register, and tsx is a dev dependency.
  fs.writeFileSync(
    path.join(dist, 'storage', 'search', 'worker-boot.js'),
    "// Entry of the search worker thread in built code (see scripts/build.ts).\nawait import('./worker-thread.js');\n",
  );
  await build({
    entryPoints: [path.join(dist, 'cli', 'main.js')],
    outfile: path.join(dist, CLI_BUNDLE),
    plugins: [zodEnglishOnly],
    bundle: true,
    platform: 'node',
    // CommonJS, so bin/built.js can run it through vm.Script with a code cache (ES modules
    // cannot take one on Node 20); the verbs' import() calls become lazily run parts of the file.
    format: 'cjs',
    target: 'node20',
    minify: true,
    define: { 'import.meta.url': '__import_meta_url' },
    banner: { js: "const __import_meta_url = require('node:url').pathToFileURL(__filename).href;" },
    logLevel: 'warning',
  });
  writeCodeCache();
  process.stdout.write(`built dist/ (${copied} data file(s) copied, CLI bundled into dist/${CLI_BUNDLE} with its code cache)\n`);
}

/**
 * zod re-exports every locale it ships as `z.locales` (about 260 kB of the 450 kB it adds to the
 * bundle, parsed at each start); its messages default to English, and nothing of ours selects
 * another. Inside zod, the locales index resolves to a module holding only `en`.
 */
const zodEnglishOnly: Plugin = {
  name: 'zod-english-only',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) => args.importer.includes(`${path.sep}zod${path.sep}`) ? { path: path.join(path.dirname(args.importer), '..', 'locales', 'en.js'), namespace: 'zod-locales' } : undefined);
    b.onLoad({ filter: /.*/, namespace: 'zod-locales' }, (args) => ({
      contents: `export { default as en } from ${JSON.stringify(args.path)};`,
      resolveDir: path.dirname(args.path),
    }));
  },
};

/**
 * The V8 code cache of the CLI bundle, beside it: made by running the bundle once (`albedo
 * --help`, which needs no daemon) in a child and saving what V8 compiled by then, so the
 * functions every start runs come precompiled. V8 checks the cache against the source and its
 * own version, and compiles anew when they differ.
 */
function writeCodeCache(): void {
  const built = pathToFileURL(path.join(root, 'bin', 'built.js')).href;
  const cacheFile = path.join(dist, `${CLI_BUNDLE}.cache`);
  const code = [
    "import fs from 'node:fs';",
    `import { runBundle } from ${JSON.stringify(built)};`,
    "process.argv = [process.execPath, 'albedo', '--help'];",
    `const script = runBundle(${JSON.stringify(CLI_BUNDLE)});`,
    `process.on('exit', () => fs.writeFileSync(${JSON.stringify(cacheFile)}, script.createCachedData()));`,
  ].join('\n');
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== 0 || !fs.existsSync(cacheFile)) {
    process.stderr.write(`build: writing the CLI's code cache failed (exit ${r.status})\n`);
    process.exit(1);
  }
}

/** Copies the JSON data files under `dir` (not tests) to the same place under dist/. */
function copyData(dir: string): number {
  if (!fs.existsSync(dir)) return 0;
  let n = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const from = path.join(dir, entry.name);
    if (entry.isDirectory()) n += copyData(from);
    else if (entry.isFile() && entry.name.endsWith('.json')) {
      const to = path.join(dist, path.relative(root, from));
      fs.mkdirSync(path.dirname(to), { recursive: true });
      fs.copyFileSync(from, to);
      n += 1;
    }
  }
  return n;
}

await main();
