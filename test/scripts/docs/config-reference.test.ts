// docs/config.md against the code: its tables of extensions.json and models.json fields must be
// what scripts/docs/config-reference.ts derives from the zod schemas (names, types, defaults),
// every row described; its environment table must list exactly the ALBEDO_* variables the
// product reads.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { CONFIG_DOC, configFields, renderConfigDoc } from '../../../scripts/docs/config-reference.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const doc = fs.readFileSync(CONFIG_DOC, 'utf8');

test('docs/config.md lists every config field with the type and default the schemas have', () => {
  const r = renderConfigDoc(doc);
  assert.deepEqual(r.unplaced.map((f) => `${f.file} ${f.path}`), [], 'fields in no table');
  assert.deepEqual(r.undescribed, [], 'rows without a meaning');
  assert.equal(r.text, doc, 'docs/config.md differs from the schemas: run npm run docs:config');
});

test('the check notices a changed default, a new field and a removed one', () => {
  const fields = configFields();
  const trigger = fields.find((f) => f.path === 'rolling.triggerPercent')!;
  const changed = fields.map((f) => (f === trigger ? { ...f, default: '70' } : f));
  assert.notEqual(renderConfigDoc(doc, changed).text, doc);
  const added = [...fields, { ...trigger, path: 'rolling.newKnob' }];
  assert.deepEqual(renderConfigDoc(doc, added).undescribed, ['extensions.json rolling.newKnob']);
  assert.notEqual(renderConfigDoc(doc, fields.filter((f) => f !== trigger)).text, doc);
});

/** Every ALBEDO_* name in the product's sources (not tests, not scripts beyond the importers). */
function variablesInCode(): Set<string> {
  const out = new Set<string>();
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(ts|js)$/.test(e.name)) { for (const m of fs.readFileSync(p, 'utf8').matchAll(/\bALBEDO_[A-Z][A-Z_]*\b/g)) out.add(m[0]); }
    }
  };
  for (const dir of ['bin', 'cli', 'daemon', 'protocol', 'render', 'storage', 'strategies']) walk(path.join(root, dir));
  return out;
}

test('the environment table lists exactly the ALBEDO_* variables the code reads', () => {
  const table = /<!-- env-table -->\n([\s\S]*?)<!-- \/env-table -->/.exec(doc);
  assert.ok(table, 'docs/config.md has an env-table block');
  const documented = new Set([...table[1]!.matchAll(/`(ALBEDO_[A-Z_]+)`/g)].map((m) => m[1]!));
  const inCode = variablesInCode();
  assert.ok(inCode.has('ALBEDO_HOME') && inCode.has('ALBEDO_CONFIG_WATCH'), 'the scan finds the variables it should');
  assert.deepEqual([...inCode].filter((v) => !documented.has(v)).sort(), [], 'read by the code, missing from docs/config.md');
  assert.deepEqual([...documented].filter((v) => !inCode.has(v)).sort(), [], 'documented, read by nothing');
});
