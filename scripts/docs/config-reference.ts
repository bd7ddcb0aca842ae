// The configuration reference in docs/config.md, kept equal to the zod schemas: every field of
// extensions.json and models.json with its type and default, read from the schemas through
// z.toJSONSchema. The page's tables sit between `<!-- config-table FILE PREFIX -->` markers; this
// rewrites their type and default columns and their set of rows, and keeps each row's meaning
// (written by hand). `npm run docs:config` writes the page; test/scripts/docs/config-reference.test.ts
// fails when the page differs from what this would write, or a row has no meaning.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ExtensionsFile } from '../../daemon/config.ts';
import { ModelsFile } from '../../strategies/catalog/models.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CONFIG_DOC = path.join(root, 'docs', 'config.md');
/** The meaning column of a row nobody has described yet; the test refuses it. */
export const UNDESCRIBED = 'TODO: describe';

export interface ConfigField {
  file: 'extensions.json' | 'models.json';
  /** Dotted path; `[]` marks the items of an array (`models[].id`). */
  path: string;
  type: string;
  /** The default as JSON, or null when the field has none. */
  default: string | null;
  required: boolean;
}

type JsonSchema = {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  minItems?: number;
  maxItems?: number;
  format?: string;
};

/** The type column: the JSON type with its bounds (`integer 1–100`, `"a" | "b"`, `string[]`). */
function typeOf(s: JsonSchema): string {
  if (s.enum !== undefined) return s.enum.map((v) => JSON.stringify(v)).join(' \\| ');
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.anyOf !== undefined) return s.anyOf.map(typeOf).join(' \\| ');
  const t = Array.isArray(s.type) ? s.type.join(' \\| ') : s.type;
  if (t === undefined) return 'any';
  if (t === 'array') {
    const item = s.items === undefined ? 'any' : typeOf(s.items);
    return `${item.includes('|') ? `(${item})` : item}[]${bounds(s.minItems, s.maxItems, 'items')}`;
  }
  if (t === 'integer' || t === 'number') {
    const lo = s.exclusiveMinimum !== undefined ? (t === 'integer' ? s.exclusiveMinimum + 1 : undefined) : s.minimum;
    const hi = s.maximum !== undefined && s.maximum < Number.MAX_SAFE_INTEGER ? s.maximum : undefined;
    if (lo === undefined && s.exclusiveMinimum !== undefined) return `${t} > ${s.exclusiveMinimum}`;
    return `${t}${bounds(lo, hi, '')}`;
  }
  if (t === 'string' && s.format !== undefined) return `string (${s.format})`;
  return t;
}

function bounds(lo: number | undefined, hi: number | undefined, unit: string): string {
  const u = unit === '' ? '' : ` ${unit}`;
  if (lo !== undefined && hi !== undefined) return ` ${lo}–${hi}${u}`;
  if (lo !== undefined) return ` ≥ ${lo}${u}`;
  if (hi !== undefined) return ` ≤ ${hi}${u}`;
  return '';
}

/** Every leaf field under `s` (objects are walked; an object with no properties is a leaf). */
function flatten(file: ConfigField['file'], s: JsonSchema, prefix: string, required: boolean, out: ConfigField[]): void {
  const object = s.properties !== undefined && Object.keys(s.properties).length > 0 ? s : s.type === 'array' && s.items?.properties !== undefined ? s.items : undefined;
  if (object?.properties !== undefined) {
    const base = object === s ? prefix : `${prefix}[]`;
    if (prefix !== '' && s.default !== undefined && JSON.stringify(s.default) !== '{}') {
      out.push({ file, path: prefix, type: typeOf(s), default: JSON.stringify(s.default), required });
    }
    for (const [key, child] of Object.entries(object.properties)) {
      flatten(file, child, base === '' ? key : `${base}.${key}`, (object.required ?? []).includes(key), out);
    }
    return;
  }
  out.push({ file, path: prefix, type: typeOf(s), default: s.default === undefined ? null : JSON.stringify(s.default), required });
}

/** Every field of both files, from the schemas as the daemon parses them (input side: what a user writes). */
export function configFields(): ConfigField[] {
  const out: ConfigField[] = [];
  const opts = { io: 'input', unrepresentable: 'any' } as const;
  flatten('extensions.json', z.toJSONSchema(ExtensionsFile, opts) as JsonSchema, '', false, out);
  flatten('models.json', z.toJSONSchema(ModelsFile, opts) as JsonSchema, '', true, out);
  return out;
}

const BLOCK = /<!-- config-table (\S+) (\S+) -->\n([\s\S]*?)<!-- \/config-table -->/g;
const HEADER = '| field | type | default | meaning |\n| --- | --- | --- | --- |\n';

function cell(s: string): string {
  return s.replaceAll('|', '\\|');
}

/** The meaning column of each row already on the page, by file and field. */
function meanings(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(BLOCK)) {
    for (const line of m[3]!.split('\n')) {
      const row = /^\| `([^`]+)` \|.*\| ([^|]*(?:\\\|[^|]*)*) \|$/.exec(line);
      if (row !== null && row[1] !== 'field') out.set(`${m[1]} ${row[1]}`, row[2]!);
    }
  }
  return out;
}

/** Whether a block `FILE PREFIX` holds the field: PREFIX `*` takes the file's fields no other block of the file claims. */
function inBlock(f: ConfigField, prefix: string): boolean {
  return f.path === prefix || f.path.startsWith(`${prefix}.`) || f.path.startsWith(`${prefix}[]`);
}

export interface Rendered {
  text: string;
  /** Fields no block of the page holds. */
  unplaced: ConfigField[];
  /** Rows whose meaning is still UNDESCRIBED. */
  undescribed: string[];
}

/** The page with every block's rows regenerated from the schemas, meanings kept. */
export function renderConfigDoc(text: string, fields: ConfigField[] = configFields()): Rendered {
  const known = meanings(text);
  const placed = new Set<ConfigField>();
  const undescribed: string[] = [];
  const prefixes = [...text.matchAll(BLOCK)].map((m) => ({ file: m[1]!, prefix: m[2]! }));
  const claims = (f: ConfigField, prefix: string) => prefix === '*' ? !prefixes.some((p) => p.file === f.file && p.prefix !== '*' && inBlock(f, p.prefix)) : inBlock(f, prefix);
  const out = text.replace(BLOCK, (_all, file: string, prefix: string) => {
    const rows = fields.filter((f) => f.file === file && claims(f, prefix));
    const lines = rows.map((f) => {
      placed.add(f);
      const meaning = known.get(`${file} ${f.path}`) ?? UNDESCRIBED;
      if (meaning.trim() === '' || meaning === UNDESCRIBED) undescribed.push(`${file} ${f.path}`);
      const dflt = f.default !== null ? `\`${cell(f.default)}\`` : f.required ? 'required' : '—';
      return `| \`${f.path}\` | ${f.type} | ${dflt} | ${meaning} |`;
    });
    return `<!-- config-table ${file} ${prefix} -->\n${HEADER}${lines.join('\n')}\n<!-- /config-table -->`;
  });
  return { text: out, unplaced: fields.filter((f) => !placed.has(f)), undescribed };
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const r = renderConfigDoc(fs.readFileSync(CONFIG_DOC, 'utf8'));
  fs.writeFileSync(CONFIG_DOC, r.text);
  for (const f of r.unplaced) process.stderr.write(`docs:config: ${f.file} ${f.path} is in no table; add a config-table block for it\n`);
  for (const u of r.undescribed) process.stderr.write(`docs:config: ${u} needs its meaning written\n`);
  process.stdout.write(`docs:config: wrote ${path.relative(root, CONFIG_DOC)}\n`);
  if (r.unplaced.length > 0 || r.undescribed.length > 0) process.exitCode = 1;
}
