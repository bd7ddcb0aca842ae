// What every importer returns, plus the small helpers they share: JSONL parsing with line
// numbers, stable row keys, text and image parts checked against the wire row schemas.
import { createHash } from 'node:crypto';
import { MAX_KEY_LENGTH, type ImagePartIn, type RowIn, type TextPart } from '../../protocol/rows.ts';
import type { ImportFormat } from './formats.ts';

export { FORMATS, type ImportFormat } from './formats.ts';

/** A transcript of another agent as rows `transcript.append` accepts, in order. */
export interface ImportedTranscript {
  format: ImportFormat;
  rows: RowIn[];
  /** The model the agent talked to (the last one named), when the file says. */
  model?: string;
  provider?: string;
  /** The agent's system prompt, when the file holds it. */
  instructions?: string;
  /** Source entries that produced no row, by reason. */
  skipped: Record<string, number>;
}

export type Json = Record<string, unknown>;

/** A malformed source file: names the line so the user can look at it. */
export class ImportError extends Error {
  readonly line: number | undefined;
  constructor(message: string, line?: number) {
    super(line === undefined ? message : `line ${line}: ${message}`);
    this.name = 'ImportError';
    this.line = line;
  }
}

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The non-blank lines of a JSONL text, trimmed, with their 1-based numbers, found as they are
 * asked for: a caller that needs only the first few (format detection, the first record) does not
 * split a file of hundreds of megabytes.
 */
export function* jsonlLines(text: string): Generator<{ line: number; raw: string }> {
  let line = 0;
  for (let start = 0; start <= text.length;) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    line++;
    const raw = text.slice(start, end).trim();
    if (raw !== '') yield { line, raw };
    start = end + 1;
  }
}

/** Parses JSONL: every non-blank line must be a JSON object. */
export function parseJsonl(text: string): Array<{ line: number; rec: Json }> {
  const out: Array<{ line: number; rec: Json }> = [];
  for (const { line, raw } of jsonlLines(text)) {
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch (err) {
      throw new ImportError(`not JSON: ${(err as Error).message}`, line);
    }
    if (!isObject(v)) throw new ImportError('not a JSON object', line);
    out.push({ line, rec: v });
  }
  return out;
}

/** Counts skipped entries by reason. */
export class Skips {
  readonly counts: Record<string, number> = {};
  add(reason: string, n = 1): void {
    this.counts[reason] = (this.counts[reason] ?? 0) + n;
  }
}

/** Unique, bounded client keys: a repeat gets `#2`, `#3`; an overlong key is hashed. */
export class Keys {
  private readonly seen = new Map<string, number>();
  make(base: string): string {
    let k = base.length <= MAX_KEY_LENGTH - 8 ? base : `${base.slice(0, 100)}~${createHash('sha256').update(base).digest('hex').slice(0, 32)}`;
    const n = (this.seen.get(k) ?? 0) + 1;
    this.seen.set(k, n);
    if (n > 1) k = `${k}#${n}`;
    return k;
  }
}

const MEDIA = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
const BASE64 = /^[A-Za-z0-9+/\r\n]*={0,2}\s*$/;

/** An inline base64 image as the wire takes it, or a text marker when the wire would refuse it. */
export function imagePart(mediaType: unknown, data: unknown, skips: Skips): ImagePartIn | TextPart {
  const mt = typeof mediaType === 'string' ? mediaType.toLowerCase().replace('image/jpg', 'image/jpeg') : '';
  if (typeof data !== 'string' || data === '' || !BASE64.test(data)) {
    skips.add('image_without_data');
    return { type: 'text', text: '[image: no inline data]' };
  }
  if (!MEDIA.has(mt)) {
    skips.add('image_unsupported_type');
    return { type: 'text', text: `[image: unsupported type ${mt || 'unknown'}]` };
  }
  return { type: 'image', media_type: mt as 'image/png', data };
}

/** A `data:image/png;base64,...` URL as an image part (a text marker for anything else). */
export function imageFromDataUrl(url: unknown, skips: Skips): ImagePartIn | TextPart {
  const m = typeof url === 'string' ? /^data:([^;,]+);base64,(.*)$/s.exec(url) : null;
  if (m === null) {
    skips.add('image_without_data');
    return { type: 'text', text: typeof url === 'string' && url !== '' ? `[image: ${url.slice(0, 200)}]` : '[image: no inline data]' };
  }
  return imagePart(m[1], m[2], skips);
}

/** Tool arguments as the wire wants them: an object; a JSON string is parsed, anything else wrapped. */
export function toolArguments(v: unknown): Record<string, unknown> {
  if (isObject(v)) return v;
  if (typeof v === 'string') {
    try {
      const parsed: unknown = JSON.parse(v);
      if (isObject(parsed)) return parsed;
    } catch {
      // not JSON: kept as the raw string below
    }
    return { input: v };
  }
  if (v === undefined || v === null) return {};
  return { input: v };
}

export function textPart(text: string): TextPart {
  return { type: 'text', text };
}

/** Counts rows by kind, tool calls and images, for reports. */
export function rowCounts(rows: readonly RowIn[]): { rows: number; user: number; assistant: number; tool_result: number; tool_calls: number; images: number } {
  const c = { rows: rows.length, user: 0, assistant: 0, tool_result: 0, tool_calls: 0, images: 0 };
  for (const r of rows) {
    c[r.kind]++;
    for (const p of r.content) {
      if (p.type === 'tool_call') c.tool_calls++;
      else if (p.type === 'image') c.images++;
    }
  }
  return c;
}
