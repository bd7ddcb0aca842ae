// The import-cycle check `npm run lint` runs after ESLint: no module may import itself through
// others. A cycle makes load order decide what a module sees at start (an import that is still
// undefined), and it hides which of two modules is the lower one. Type-only imports are left
// out (they are erased before anything runs), and so are dynamic import() calls (loaded when
// called, never at start). Exits 1 and names each cycle's modules when it finds any.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folders whose modules are checked. */
export const ROOMS = ['protocol', 'render', 'storage', 'strategies', 'daemon', 'cli', 'scripts', 'test'];

/** Each module's static value imports of other modules in the tree, by path from `root`. */
export type ImportGraph = Map<string, string[]>;

/** Static imports and re-exports of relative modules, not type-only ones. */
const IMPORT = /^(?:import|export)\s+(?!type\b)[^'"]*?from\s+'(\.[^']+)'|^import\s+'(\.[^']+)'/gm;

/** The relative modules `source` (a module's text, at `file`) imports for their values. */
export function importsOf(file: string, source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(IMPORT)) out.push(path.normalize(path.join(path.dirname(file), m[1] ?? m[2]!)));
  return out;
}

export function importGraph(root: string, rooms: readonly string[] = ROOMS): ImportGraph {
  const graph: ImportGraph = new Map();
  const walk = (dir: string): void => {
    if (!fs.existsSync(path.join(root, dir))) return;
    for (const e of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'node_modules' && !e.name.startsWith('.')) walk(rel);
      } else if (e.name.endsWith('.ts')) graph.set(rel, importsOf(rel, fs.readFileSync(path.join(root, rel), 'utf8')));
    }
  };
  for (const r of rooms) walk(r);
  return graph;
}

/** The graph's cycles: each strongly connected set of more than one module, or one that imports itself (Tarjan). */
export function importCycles(graph: ImportGraph): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const set: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      set.push(w);
    } while (w !== v);
    if (set.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(set.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  const cycles = importCycles(importGraph(root));
  for (const c of cycles) process.stderr.write(`import cycle: ${c.join(' <-> ')}\n`);
  process.exitCode = cycles.length > 0 ? 1 : 0;
}
