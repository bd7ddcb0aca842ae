// The layer map in `npm run lint` (eslint.layers.js), run with the project's own ESLint config:
// a planted back-import (storage importing the daemon) and a strategy importing another are
// refused, and an import down the layers is not. The planted modules are written into the tree
// for the run (typed linting reads only files its project holds) and removed after.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const PLANTED: Record<string, string> = {
  'storage/zz-planted-back-import.ts': "import type { DaemonServices } from '../daemon/context.ts';\nexport type Planted = DaemonServices;\n",
  'strategies/lcm/zz-planted-sibling.ts': "import type { RollingSettings } from '../rolling/settings.ts';\nexport type Planted = RollingSettings;\n",
  'daemon/zz-planted-down.ts': "import type { Db } from '../storage/db.ts';\nexport type Planted = Db;\n",
};

test('npm run lint refuses a back-import and a strategy importing another, and allows an import down the layers', async (t) => {
  t.after(() => {
    for (const f of Object.keys(PLANTED)) fs.rmSync(path.join(root, f), { force: true });
  });
  for (const [f, text] of Object.entries(PLANTED)) fs.writeFileSync(path.join(root, f), text);
  const results = await new ESLint({ cwd: root }).lintFiles(Object.keys(PLANTED).map((f) => path.join(root, f)));
  const restricted = (f: string): string[] => results.find((r) => r.filePath === path.join(root, f))!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
  assert.match(restricted('storage/zz-planted-back-import.ts').join('\n'), /storage\/ sits below these rooms/);
  assert.match(restricted('strategies/lcm/zz-planted-sibling.ts').join('\n'), /a strategy imports no other strategy/);
  assert.deepEqual(restricted('daemon/zz-planted-down.ts'), []);
});
