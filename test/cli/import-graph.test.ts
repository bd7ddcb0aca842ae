// The CLI loads the client side only: walking its imports from cli/main.ts must meet no daemon,
// storage or strategy module and no package beyond commander and zod (and the MCP SDK, which only
// `albedo mcp` loads when it runs). That keeps `albedo status` fast (no SQLite, no engine) and
// keeps the CLI usable where only the client is. What every verb loads at start (the static
// imports) leaves out the importers, the frame renderer and the MCP SDK, which the verbs that use
// them import when they run.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const IMPORT = /^\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?['"]([^'"]+)['"]/gm;
const DYNAMIC = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

/**
 * Every module the entry reaches by value imports (type-only imports are erased), and every
 * package; with `dynamic`, also through `import('...')` calls.
 */
function graph(entry: string, opts: { dynamic: boolean } = { dynamic: true }): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const todo = [entry];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    const text = fs.readFileSync(file, 'utf8');
    const specs = [...text.matchAll(IMPORT)].filter((m) => !/^\s*(?:import|export)\s+type\s/.test(m[0])).map((m) => m[1]!);
    if (opts.dynamic) specs.push(...[...text.matchAll(DYNAMIC)].map((m) => m[1]!));
    for (const spec of specs) {
      if (spec.startsWith('.')) todo.push(path.resolve(path.dirname(file), spec));
      else if (!spec.startsWith('node:')) packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
  }
  return { files, packages };
}

test('the CLI imports no daemon, storage or strategy module, and no package but commander, zod and (albedo mcp) the MCP SDK', () => {
  const { files, packages } = graph(path.join(root, 'cli/main.ts'));
  const rel = [...files].map((f) => path.relative(root, f)).sort();
  assert.ok(rel.includes('cli/verbs/compaction.ts') && rel.includes('protocol/client.ts'), rel.join(', '));
  assert.ok(rel.includes('cli/transcript-files.ts') && rel.includes('render/index.ts'), 'the walk follows import() calls');
  const outside = rel.filter((f) => !/^(cli|protocol|render)\//.test(f));
  assert.deepEqual(outside, [], 'modules outside the client side');
  assert.deepEqual([...packages].sort(), ['@modelcontextprotocol/sdk', 'commander', 'zod']);
});

test('what every verb loads at start leaves the importers, the renderer and the MCP SDK to the verbs that use them', () => {
  const { files, packages } = graph(path.join(root, 'cli/main.ts'), { dynamic: false });
  assert.deepEqual([...packages].sort(), ['commander', 'zod']);
  const rel = [...files].map((f) => path.relative(root, f)).sort();
  assert.ok(rel.includes('cli/verbs/transfer.ts'), rel.join(', '));
  const heavy = rel.filter((f) => f.startsWith('render/') || (f.startsWith('cli/import/') && f !== 'cli/import/formats.ts') || f === 'cli/transcript-files.ts');
  assert.deepEqual(heavy, []);
});

test('the walk sees through to SQLite where it is imported', () => {
  // The same walk from the daemon's entry must find better-sqlite3, or the test above proves nothing.
  assert.ok(graph(path.join(root, 'daemon/main.ts')).packages.has('better-sqlite3'));
});
