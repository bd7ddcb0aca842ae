// Small factories for storage tests: a real SQLite file in a temp dir, client rows (parsed by the
// wire schema so defaults apply), real image bytes made with sharp, and raw reads by seq.
// Shared by every test under test/storage/; the behaviour under test lives in the test files.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';
import sharp from 'sharp';
import { RowIn, type ImagePartIn } from '../../protocol/rows.ts';
import { Observation } from '../../protocol/prepared.ts';
import { openDb, type Db } from '../../storage/db.ts';
import { bodySql } from '../../storage/transcript/row-body.ts';
import { ROW_TEXT_SQL } from '../../storage/transcript/row-text.ts';

/** A fresh database file, closed and removed when the test ends. */
export function tempDb(t: TestContext): Db {
  return tempDbWithPath(t).db;
}

/** The same, with the file's path, for tests that open a second connection. */
export function tempDbWithPath(t: TestContext): { db: Db; path: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-storage-'));
  const file = path.join(dir, 'albedo.db');
  const db = openDb(file, { synchronous: 'NORMAL' });
  t.after(() => {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { db, path: file };
}

/**
 * User text that makes a row of about one 4 KiB page, stored as it is rather than packed
 * (storage/transcript/row-body.ts): printable characters in a fixed pseudo-random order, which compression
 * does not shrink enough to keep. Tests that count pages use it.
 */
export const PAGE_OF_TEXT = (() => {
  let x = 12345;
  let out = '';
  while (out.length < 3800) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const c = 0x28 + ((x >> 16) % 0x57); // '(' to '~', with '!' for a backslash: nothing JSON escapes
    out += String.fromCharCode(c === 0x5c ? 0x21 : c);
  }
  return out;
})();

/** Command output of `lines` numbered lines: long, and as compressible as real output is (so it is stored packed, storage/transcript/row-body.ts). */
export function commandOutput(tag: string, lines = 200): string {
  return Array.from({ length: lines }, (_v, i) => `${tag} line ${i}: src/module-${i % 17}.ts compiled in ${(i * 37) % 1000} ms`).join('\n');
}

/** Stores every packed body as text again, as a file from before migration 22 holds its rows. */
export function storeAsText(db: Db): void {
  db.prepare('UPDATE transcript SET body = albedo_unpack(seq, packed), packed = NULL WHERE packed IS NOT NULL').run();
}

export interface RowOpts {
  key?: string;
  images?: ImagePartIn[];
}

export function user(text: string, opts: RowOpts & { origin?: 'user' | 'notes' | 'mail' } = {}): RowIn {
  return RowIn.parse({
    kind: 'user',
    ...(opts.origin ? { origin: opts.origin } : {}),
    ...(opts.key ? { key: opts.key } : {}),
    content: [{ type: 'text', text }, ...(opts.images ?? [])],
  });
}

/** An assistant turn with some text and one tool call per id. */
export function assistant(text: string, callIds: string[] = [], opts: { key?: string } = {}): RowIn {
  return RowIn.parse({
    kind: 'assistant',
    ...(opts.key ? { key: opts.key } : {}),
    content: [
      { type: 'text', text },
      ...callIds.map((id) => ({ type: 'tool_call', id, name: 'read_file', arguments: { path: `${id}.ts` } })),
    ],
  });
}

export function toolResult(callId: string, text: string, opts: RowOpts & { isError?: boolean } = {}): RowIn {
  return RowIn.parse({
    kind: 'tool_result',
    call_id: callId,
    is_error: opts.isError ?? false,
    ...(opts.key ? { key: opts.key } : {}),
    content: [{ type: 'text', text }, ...(opts.images ?? [])],
  });
}

type Rgb = { r: number; g: number; b: number };

export function pngBytes(width: number, height: number, background: Rgb = { r: 200, g: 30, b: 30 }): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background } }).png().toBuffer();
}

export function jpegBytes(width: number, height: number, background: Rgb = { r: 30, g: 30, b: 200 }): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background } }).jpeg().toBuffer();
}

export function imageIn(bytes: Buffer, media_type: 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp'): ImagePartIn {
  return { type: 'image', media_type, data: bytes.toString('base64') };
}

export interface RawRow {
  seq: number;
  kind: string;
  key: string | null;
  text: string;
  call_id: string | null;
  created_at: number;
  body: string;
}

/** A session's rows in seq order, straight from the table. */
export function rowsOf(db: Db, session: string): RawRow[] {
  return db
    .prepare(
      `SELECT t.seq, t.kind, t.key, ${ROW_TEXT_SQL} AS text, t.call_id, t.created_at, ${bodySql('t')} AS body FROM transcript t
         JOIN sessions s ON s.sid = t.sid WHERE s.name = ? ORDER BY t.seq`,
    )
    .all(session) as RawRow[];
}

export function count(db: Db, sql: string, ...params: unknown[]): number {
  return (db.prepare(sql).pluck().get(...params) as number | null) ?? 0;
}

/** A prepared request's observation as the prepare pipeline stores it (savePrepared), with nothing in it. */
export function observationOf(session: string, preparedId = 'x'): Observation {
  return Observation.parse({
    session,
    strategy: 'rolling',
    model: 'm1',
    window: null,
    window_source: 'unknown',
    trigger_percent: 80,
    tail_percent: 25,
    due: false,
    compacted: false,
    estimated_input_tokens: 1,
    provider_input_tokens: null,
    provider_cached_tokens: null,
    prepared_id: preparedId,
    head: 0,
    sections: [],
    last_compaction: null,
    failure: null,
    auto_failures: 0,
    latched: false,
    notes: [],
    config_errors: [],
  });
}
