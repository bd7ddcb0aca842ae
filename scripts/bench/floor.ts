// The SQLite floor for appends: the same rows' bytes, each row stored once as its JSON, inserted
// into a plain table of a fresh file with the daemon's durability (WAL, synchronous=FULL, one
// transaction per batch) and nothing else: no secondary index, no keys, no tool-call records, no
// settling. What storing these rows cannot cost less than, timed in alternating blocks with
// appendRows or the socket so that the ratio compares the two at the same moment on a noisy
// machine. Until migration 16 the daemon stored each row's text beside its JSON and the floor
// stored both; since then the text is derived from the JSON on read, so the floor stores the
// JSON only. Since migration 22 the daemon deflates long bodies (storage/row-body.ts) and so
// writes fewer bytes than the floor; the floor keeps storing the JSON as text, what storing the
// rows plainly costs.
import path from 'node:path';
import Database from 'better-sqlite3';
import type { RowIn } from '../../protocol/rows.ts';
import { nowMs } from './timing.ts';

interface FlatRow {
  kind: string;
  key: string | null;
  body: string;
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
