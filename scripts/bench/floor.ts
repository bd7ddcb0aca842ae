// The SQLite floor for appends: the same rows' bytes (body JSON and text) inserted into a plain
// table of a fresh file with the daemon's durability (WAL, synchronous=FULL, one transaction per
// batch) and nothing else: no secondary index, no keys, no tool-call records, no settling. What
// storing these rows cannot cost less than, timed in alternating blocks with appendRows or the
// socket so that the ratio compares the two at the same moment on a noisy machine.
import path from 'node:path';
import Database from 'better-sqlite3';
import type { RowIn, StoredBody } from '../../protocol/rows.ts';
import { rowText } from '../../storage/row-text.ts';
import { nowMs } from './timing.ts';

interface FlatRow {
  kind: string;
  key: string | null;
  body: string;
  text: string;
}

export class AppendFloor {
  private readonly db: Database.Database;
  private readonly write: (rows: readonly FlatRow[]) => void;

  constructor(dir: string) {
    this.db = new Database(path.join(dir, 'floor.db'));
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.exec(`CREATE TABLE rows (
      seq INTEGER PRIMARY KEY AUTOINCREMENT, sid INTEGER NOT NULL, kind TEXT NOT NULL, key TEXT,
      body TEXT NOT NULL, text TEXT NOT NULL, created_at INTEGER NOT NULL) STRICT`);
    const insert = this.db.prepare<[number, string, string | null, string, string, number]>(
      'INSERT INTO rows (sid, kind, key, body, text, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    );
    this.write = this.db.transaction((rows: readonly FlatRow[]) => {
      const now = Date.now();
      for (const r of rows) insert.run(1, r.kind, r.key, r.body, r.text, now);
    });
  }

  /** A batch as the floor stores it; built before timing, like the batches appendRows gets. */
  static flatten(rows: readonly RowIn[]): FlatRow[] {
    // A client row has the stored body's shape for everything rowText reads.
    return rows.map((r) => ({ kind: r.kind, key: r.key ?? null, body: JSON.stringify(r), text: rowText(r as unknown as StoredBody) }));
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
