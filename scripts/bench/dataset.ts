// Builds one benchmark database: a main session of N rows plus 9 side sessions of N/90 rows
// each (+10% in all), appended in interleaved 1000-row batches through appendRows, with the
// search needles planted at fixed positions. Also dumps row texts for the GNU grep baseline.
import fs from 'node:fs';
import path from 'node:path';
import { openDb, type Db, type OpenOptions } from '../../storage/db.ts';
import { openSession } from '../../storage/sessions.ts';
import { appendRows } from '../../storage/transcript.ts';
import { ROW_TEXT_SQL } from '../../storage/row-text.ts';
import type { Corpus } from './corpus.ts';
import { RowStream, userStarts } from './rows.ts';
import { nowMs } from './timing.ts';

export const SIDE_SESSIONS = 9;
export const BUILD_BATCH = 1000;
export const MAIN = 'main';
export const MAIN_WORKSPACE = '/work/bench/main';

/** Needles planted in the rows; patterns are searched in other case to exercise folding. */
export const RARE_NEEDLE = 'retry gave up after QuokkaTimeout on the socket';
export const NON_ASCII_NEEDLE = 'Die Größe der Datei hat sich geändert';
/** Every NON_ASCII_EVERY-th row of each session carries the non-ASCII needle. */
const NON_ASCII_EVERY = 997;
/** Rare needles in the main session (plus one per side session). */
const RARE_IN_MAIN = 10;

export interface Dataset {
  dir: string;
  file: string;
  db: Db;
  size: number;
  main: { name: string; sid: number; rows: number; head: number };
  sides: Array<{ name: string; sid: number; rows: number }>;
  totalRows: number;
  /** Main-session head after every main batch: rows appended so far -> head seq. */
  mainHeads: Array<{ rows: number; head: number }>;
  buildMs: number;
  /** The last plain dump (dumpTexts without extras) and the rows it was taken of, for reuse. */
  dumped?: { dump: TextDump; rows: number; maxSeq: number };
}

/** The files dumpTexts wrote and their sizes. */
export interface TextDump {
  all: string;
  main: string;
  allBytes: number;
  mainBytes: number;
  textBytes: number;
}

function injector(n: number): (i: number) => string | null {
  const rare = new Set<number>();
  if (n > 0) {
    const count = Math.min(RARE_IN_MAIN, n);
    for (let j = 0; j < count; j++) rare.add(Math.floor(((j + 0.5) * n) / count));
  }
  return (i) => {
    const parts: string[] = [];
    if (rare.has(i)) parts.push(RARE_NEEDLE);
    if (i % NON_ASCII_EVERY === NON_ASCII_EVERY - 1) parts.push(NON_ASCII_NEEDLE);
    return parts.length === 0 ? null : parts.join('\n');
  };
}

function sideInjector(n: number): (i: number) => string | null {
  const rareAt = Math.floor(n / 2);
  return (i) => {
    const parts: string[] = [];
    if (i === rareAt) parts.push(RARE_NEEDLE);
    if (i % NON_ASCII_EVERY === NON_ASCII_EVERY - 1) parts.push(NON_ASCII_NEEDLE);
    return parts.length === 0 ? null : parts.join('\n');
  };
}

/**
 * Creates `dir`/albedo.db with the main session of `size` rows and the side sessions, appending
 * with synchronous=FULL (the daemon's default; a section that times no writes may ask for
 * NORMAL) in interleaved batches, so sessions' seqs mix as they would on a host running several agents.
 */
export async function buildDataset(
  dir: string,
  size: number,
  corpus: Corpus,
  opts: { sides?: boolean; log?: (s: string) => void; synchronous?: OpenOptions['synchronous'] } = {},
): Promise<Dataset> {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'albedo.db');
  const db = openDb(file, { synchronous: opts.synchronous ?? 'FULL' });
  const starts = userStarts(corpus);
  const sideRows = opts.sides === false ? 0 : Math.floor(size / 90);
  const sideCount = sideRows > 0 ? SIDE_SESSIONS : 0;

  const main = openSession(db, { session: MAIN, workspace: MAIN_WORKSPACE });
  const mainStream = new RowStream(corpus, { start: 0, keyPrefix: 'm', inject: injector(size) });
  const sides = Array.from({ length: sideCount }, (_, k) => {
    const name = `side-${k + 1}`;
    const s = openSession(db, { session: name, workspace: `/work/bench/side-${(k % 3) + 1}` });
    const stream = new RowStream(corpus, { start: starts[Math.floor(((k + 1) * starts.length) / (sideCount + 1))] ?? 0, keyPrefix: 's', inject: sideInjector(sideRows) });
    return { name, sid: s.sid, stream };
  });

  // The schedule: every batch gets a virtual time in [0, 1); batches run in time order.
  const plan: Array<{ t: number; who: number; count: number }> = [];
  for (let done = 0; done < size; done += BUILD_BATCH) plan.push({ t: done / size, who: -1, count: Math.min(BUILD_BATCH, size - done) });
  sides.forEach((_, k) => {
    for (let done = 0; done < sideRows; done += BUILD_BATCH) {
      plan.push({ t: (done + ((k + 0.5) / sideCount) * Math.min(BUILD_BATCH, sideRows)) / sideRows, who: k, count: Math.min(BUILD_BATCH, sideRows - done) });
    }
  });
  plan.sort((a, b) => a.t - b.t || a.who - b.who);

  const mainHeads: Dataset['mainHeads'] = [];
  let mainHead = 0;
  let lastLog = nowMs();
  const t0 = nowMs();
  let appended = 0;
  const total = size + sideRows * sideCount;
  for (const step of plan) {
    const stream = step.who < 0 ? mainStream : sides[step.who]!.stream;
    const rows = stream.take(step.count);
    const res = await appendRows(db, step.who < 0 ? MAIN : sides[step.who]!.name, rows);
    appended += rows.length;
    if (step.who < 0) {
      mainHead = res.head;
      mainHeads.push({ rows: mainStream.count, head: mainHead });
    }
    if (opts.log !== undefined && nowMs() - lastLog > 15_000) {
      lastLog = nowMs();
      opts.log(`  building ${size} rows: ${appended}/${total} (${Math.round(appended / ((nowMs() - t0) / 1000))} rows/s)`);
    }
  }
  const buildMs = nowMs() - t0;
  return {
    dir,
    file,
    db,
    size,
    main: { name: MAIN, sid: main.sid, rows: mainStream.count, head: mainHead },
    sides: sides.map((s) => ({ name: s.name, sid: s.sid, rows: s.stream.count })),
    totalRows: appended,
    mainHeads,
    buildMs,
  };
}

/** Checkpoints the WAL into the main file so file sizes mean something. */
export function checkpoint(db: Db): void {
  db.pragma('wal_checkpoint(TRUNCATE)');
}

export function fileSize(file: string): number {
  let n = 0;
  for (const f of [file, `${file}-wal`]) {
    try {
      n += fs.statSync(f).size;
    } catch {
      // absent
    }
  }
  return n;
}

/** A row text as one dump line: newlines inside it become spaces. */
function dumpLine(text: string): string {
  return `${text.replace(/\r\n|[\r\n]/g, ' ')}\n`;
}

function rowsNow(ds: Dataset): { rows: number; maxSeq: number } {
  const r = ds.db.prepare<[], { rows: number; maxSeq: number | null }>('SELECT count(*) AS rows, max(seq) AS maxSeq FROM transcript').get();
  return { rows: r?.rows ?? 0, maxSeq: r?.maxSeq ?? 0 };
}

/**
 * Writes row texts, one row per line (newlines inside a row become spaces), in seq order:
 * every row to all.txt, the main session's rows to main.txt, then `mainExtra` (lcm's node
 * summaries) at the end of the main file, one per line the same way. The GNU grep baseline
 * reads these. When the dataset was dumped before and its rows have not changed since (same
 * count and newest seq; the bench only appends), that dump is reused: with extras, its
 * main.txt is copied to main-extra.txt and the extras appended there.
 */
export function dumpTexts(ds: Dataset, opts: { mainExtra?: Iterable<string> } = {}): TextDump {
  const now = rowsNow(ds);
  const prev = ds.dumped !== undefined && ds.dumped.rows === now.rows && ds.dumped.maxSeq === now.maxSeq ? ds.dumped.dump : undefined;
  if (prev !== undefined && opts.mainExtra === undefined) return prev;
  if (prev !== undefined) {
    const mainFile = path.join(ds.dir, 'main-extra.txt');
    fs.copyFileSync(prev.main, mainFile);
    const fm = fs.openSync(mainFile, 'a');
    let mainBytes = prev.mainBytes;
    let buf: string[] = [];
    const flush = (): void => {
      if (buf.length > 0) mainBytes += fs.writeSync(fm, buf.join(''));
      buf = [];
    };
    for (const text of opts.mainExtra!) {
      buf.push(dumpLine(text));
      if (buf.length >= 4096) flush();
    }
    flush();
    fs.closeSync(fm);
    return { ...prev, main: mainFile, mainBytes };
  }
  const dump = writeDump(ds, opts.mainExtra);
  if (opts.mainExtra === undefined) ds.dumped = { dump, ...now };
  return dump;
}

/** dumpTexts' full pass over the rows; the extras go to main-extra.txt, so main.txt stays plain. */
function writeDump(ds: Dataset, mainExtra: Iterable<string> | undefined): TextDump {
  const all = path.join(ds.dir, 'all.txt');
  const mainFile = path.join(ds.dir, mainExtra === undefined ? 'main.txt' : 'main-extra.txt');
  const fa = fs.openSync(all, 'w');
  const fm = fs.openSync(mainFile, 'w');
  let allBytes = 0;
  let mainBytes = 0;
  // The rows' text as appended (UTF-8, newlines kept): what the disk target is a multiple of.
  let textBytes = 0;
  let bufA: string[] = [];
  let bufM: string[] = [];
  const flush = (): void => {
    if (bufA.length > 0) allBytes += fs.writeSync(fa, bufA.join(''));
    if (bufM.length > 0) mainBytes += fs.writeSync(fm, bufM.join(''));
    bufA = [];
    bufM = [];
  };
  const it = ds.db.prepare<[], { sid: number; text: string }>(`SELECT sid, ${ROW_TEXT_SQL} AS text FROM transcript ORDER BY seq`).iterate();
  for (const r of it) {
    textBytes += Buffer.byteLength(r.text);
    const line = dumpLine(r.text);
    bufA.push(line);
    if (r.sid === ds.main.sid) bufM.push(line);
    if (bufA.length >= 4096) flush();
  }
  for (const text of mainExtra ?? []) {
    bufM.push(dumpLine(text));
    if (bufM.length >= 4096) flush();
  }
  flush();
  fs.closeSync(fa);
  fs.closeSync(fm);
  return { all, main: mainFile, allBytes, mainBytes, textBytes };
}
