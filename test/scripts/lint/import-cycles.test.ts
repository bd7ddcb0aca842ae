// The import-cycle check of `npm run lint`: it finds a planted cycle (value imports, re-exports),
// leaves type-only and dynamic imports out, and the tree has none.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { importCycles, importGraph, importsOf, type ImportGraph } from '../../../scripts/lint/import-cycles.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

test('value imports and re-exports count; type-only and dynamic imports do not', () => {
  const src = [
    "import { a } from './a.ts';",
    "import type { B } from '../b.ts';",
    "import {\n  c,\n  type C,\n} from './c.ts';",
    "export { d } from './d.ts';",
    "import './side-effect.ts';",
    "const e = await import('./e.ts');",
    "import fs from 'node:fs';",
  ].join('\n');
  assert.deepEqual(importsOf('x/y.ts', src), ['x/a.ts', 'x/c.ts', 'x/d.ts', 'x/side-effect.ts']);
});

test('a planted cycle is found, with every module in it; a chain is not a cycle', () => {
  const graph: ImportGraph = new Map([
    ['a.ts', ['b.ts']],
    ['b.ts', ['c.ts']],
    ['c.ts', ['a.ts', 'd.ts']],
    ['d.ts', []],
    ['e.ts', ['e.ts']],
  ]);
  assert.deepEqual(importCycles(graph), [['a.ts', 'b.ts', 'c.ts'], ['e.ts']]);
  assert.deepEqual(importCycles(new Map([['a.ts', ['b.ts']], ['b.ts', []]])), []);
});

test('the tree has no import cycle', () => {
  const graph = importGraph(root);
  assert.ok(graph.size > 300, `the walk read the tree (${graph.size} modules)`);
  assert.deepEqual(importCycles(graph), []);
});
