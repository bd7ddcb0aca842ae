// Loaded into a stress daemon with `--import` (never into the product): on SIGUSR2 it runs a
// full garbage collection and writes process.memoryUsage() to $ALBEDO_HOME/memory.json, so the
// parts can tell memory the daemon still holds (live heap, buffers) from garbage not collected
// yet and from pages the allocator keeps, which RSS mixes together.
import fs from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const out = path.join(process.env.ALBEDO_HOME ?? '.', 'memory.json');

process.on('SIGUSR2', () => {
  gc();
  gc();
  const tmp = `${out}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(process.memoryUsage()));
  fs.renameSync(tmp, out);
});
