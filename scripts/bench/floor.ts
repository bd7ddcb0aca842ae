// The SQLite floor for appends: the same rows' bytes, each row stored once as its JSON, inserted
// into a plain table of a fresh file with the daemon's durability (WAL, synchronous=FULL, one
// transaction per batch) and nothing else: no secondary index, no keys, no tool-call records, no
// settling. What storing these rows cannot cost less than, timed in alternating blocks with
// appendRows or the socket so that the ratio compares the two at the same moment on a noisy
// machine. Until migration 16 the daemon stored each row's text beside its JSON and the floor
// stored both; since then the text is derived from the JSON on read, so the floor stores the
// JSON only. Since migration 22 the daemon deflates long bodies (storage/transcript/row-body.ts) and so
// writes fewer bytes than the floor; the floor keeps storing the JSON as text, what storing the
// rows plainly costs.
import path from 'node:path';
import Database from 'better-sqlite3';
import type { RowIn } from '../../protocol/rows.ts';
import { type Db, openDb } from '../../storage/db.ts';
import { packBody } from '../../storage/transcript/row-body.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { nowMs } from './timing.ts';

interface FlatRow {
  kind: string;
  key: string | null;
  body: string;
}

export class AppendFloor {
  private readonly db: Database.Database;
  private readonly write: (rows: readonly FlatRow[]) => void;

  /** The floor's file in `dir`, made there or (a timing client in another process) reopened. */
  constructor(dir: string) {
    this.db = new Database(path.join(dir, 'floor.db'));
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.exec(`CREATE TABLE IF NOT EXISTS rows (
      seq INTEGER PRIMARY KEY AUTOINCREMENT, sid INTEGER NOT NULL, kind TEXT NOT NULL, key TEXT,
      body TEXT NOT NULL, created_at INTEGER NOT NULL) STRICT`);
    const insert = this.db.prepare<[number, string, string | null, string, number]>(
      'INSERT INTO rows (sid, kind, key, body, created_at) VALUES (?, ?, ?, ?, ?)',
    );
    this.write = this.db.transaction((rows: readonly FlatRow[]) => {
      const now = Date.now();
      for (const r of rows) insert.run(1, r.kind, r.key, r.body, now);
    });
  }

  /** A batch as the floor stores it; built before timing, like the batches appendRows gets. */
  static flatten(rows: readonly RowIn[]): FlatRow[] {
    return rows.map((r) => ({ kind: r.kind, key: r.key ?? null, body: JSON.stringify(r) }));
  }

  /** Stores one batch in one transaction; returns the milliseconds it took. */
  append(rows: readonly FlatRow[]): number {
    const t0 = nowMs();
    this.write(rows);
    return nowMs() - t0;
  }

  close(): void {
    this.db.close();
  }
}

/** Median of per-block ratios: each block times both sides back to back. */
export function medianRatio(pairs: ReadonlyArray<{ ours: number; floor: number }>): number {
  const r = pairs.map((p) => p.ours / p.floor).sort((a, b) => a - b);
  const mid = Math.floor(r.length / 2);
  return r.length % 2 === 1 ? r[mid]! : (r[mid - 1]! + r[mid]!) / 2;
}

type SchemaRow = [number, string, string, string | null, string | null, string, Buffer | null, null, number, number];

/**
 * The SQLite part of an append, alone: the same rows' columns as the daemon stores them (each
 * row's JSON packed as storage/transcript/row-body.ts packs it, a grapheme count (its text's length stands
 * in: only the column's size matters here), row class and call id),
 * all made before the timing, inserted into the transcript table of a file opened by the
 * daemon's openDb (its indexes and triggers), with the same durability and one transaction per
 * batch. No JSON building, no compression, no grapheme counting, no key lookups, tool-call
 * records or settling. Not a verdict: against the floor it says how much of our gap is the
 * schema's and, by difference, how much is the work an append does in JavaScript.
 */
export class SchemaFloor {
  private readonly db: Db;
  private readonly write: (rows: readonly SchemaRow[]) => void;
  private readonly sid: number;

  constructor(dir: string) {
    this.db = openDb(path.join(dir, 'schema-floor.db'), { synchronous: 'FULL' });
    this.sid = openSession(this.db, { session: 'floor', workspace: '/w' }).sid;
    // The daemon's own insert (storage/transcript/write.ts, insertRow).
    const insert = this.db.prepare<SchemaRow>(
      `INSERT INTO transcript (sid, kind, row_class, key, call_id, body, packed, legacy_text, created_at, graphemes)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.write = this.db.transaction((rows: readonly SchemaRow[]) => {
      for (const r of rows) insert.run(...r);
    });
  }

  /** A batch's columns, made before timing. */
  flatten(rows: readonly RowIn[]): SchemaRow[] {
    const now = Date.now();
    return rows.map((r) => {
      const json = JSON.stringify(r);
      const { body, packed } = packBody(json);
      let chars = 0;
      for (const p of r.content) if (p.type === 'text') chars += p.text.length;
      const rowClass = r.kind === 'user' ? 'user' : 'other';
      return [this.sid, r.kind, rowClass, r.key ?? null, r.kind === 'tool_result' ? r.call_id : null, body, packed, null, now, chars];
    });
  }

  /** Stores one batch in one transaction; returns the milliseconds it took. */
  append(rows: readonly SchemaRow[]): number {
    const t0 = nowMs();
    this.write(rows);
    return nowMs() - t0;
  }

  close(): void {
    this.db.close();
  }
}
