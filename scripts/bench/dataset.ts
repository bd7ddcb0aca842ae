// Builds one benchmark database: a main session of N rows plus 9 side sessions of N/90 rows
// each (+10% in all), appended in interleaved 1000-row batches through appendRows, with the
// search needles planted at fixed positions. Also the one pass over the row texts that the
// sections share: text statistics, and the dumps the anchor tool (ripgrep) reads.
import fs from 'node:fs';
import path from 'node:path';
import { openDb, type Db, type OpenOptions } from '../../storage/db.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { ROW_TEXT_SQL } from '../../storage/transcript/row-text.ts';
import { codePointCount } from '../../strategies/projection.ts';
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
  /** The last pass over the rows' texts (textPass) and the rows it was taken of, for reuse. */
  texts?: { pass: TextPass; rows: number; maxSeq: number };
}

/** What one pass over every row's text finds (textPass). */
export interface TextStats {
  /** Every row's text: UTF-8 bytes (what was appended) and code points (SQLite's length()). */
  textBytes: number;
  textChars: number;
  /**
   * An upper estimate of the main session's length as transcript_read renders it: each row's
   * text in code points (at least its graphemes) plus its header and separators.
   */
  mainRendered: number;
  /** Share of the main session's rows whose text is not ASCII without CR (read's segmenter path). */
  mainNonAsciiShare: number;
}

export interface TextPass {
  stats: TextStats;
  dump: TextDump;
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

/** A main-session row's rendered header and separators, as transcript_read lays them out (null: not counted). */
function renderedOverhead(seq: number, kind: string, callId: string | null): number | null {
  const header = kind === 'user' ? 4 : kind === 'assistant' ? 9 : kind === 'tool_result' ? (callId === null ? null : 12 + codePointCount(callId)) : 20;
  return header === null ? null : 1 + String(seq).length + 1 + header + 2;
}

/** Text outside ASCII-without-CR, which transcript_read segments into graphemes. */
// eslint-disable-next-line no-control-regex -- the range is of control characters on purpose
const NOT_PLAIN_ASCII = /[^\x01-\x0c\x0e-\x7f]/;

/**
 * One pass over every row's text, in seq order: the text statistics the build, read and disk
 * figures need, and the dumps the anchor tool reads (all.txt, main.txt: one row per line). Rows
 * derive their text on every read (~40 µs a row), so at 1M rows each separate pass cost about
 * 40 s; the result is kept on the dataset while its rows are unchanged (the bench only appends).
 */
export function textPass(ds: Dataset): TextPass {
  const now = rowsNow(ds);
  if (ds.texts !== undefined && ds.texts.rows === now.rows && ds.texts.maxSeq === now.maxSeq) return ds.texts.pass;
  const all = path.join(ds.dir, 'all.txt');
  const mainFile = path.join(ds.dir, 'main.txt');
  const fa = fs.openSync(all, 'w');
  const fm = fs.openSync(mainFile, 'w');
  const stats: TextStats = { textBytes: 0, textChars: 0, mainRendered: 0, mainNonAsciiShare: 0 };
  let allBytes = 0;
  let mainBytes = 0;
  let mainRows = 0;
  let mainNonAscii = 0;
  let bufA: string[] = [];
  let bufM: string[] = [];
  const flush = (): void => {
    if (bufA.length > 0) allBytes += fs.writeSync(fa, bufA.join(''));
    if (bufM.length > 0) mainBytes += fs.writeSync(fm, bufM.join(''));
    bufA = [];
    bufM = [];
  };
  const it = ds.db
    .prepare<[], { seq: number; sid: number; kind: string; call_id: string | null; text: string }>(`SELECT seq, sid, kind, call_id, ${ROW_TEXT_SQL} AS text FROM transcript ORDER BY seq`)
    .iterate();
  for (const r of it) {
    const chars = codePointCount(r.text);
    stats.textBytes += Buffer.byteLength(r.text);
    stats.textChars += chars;
    const line = dumpLine(r.text);
    bufA.push(line);
    if (r.sid === ds.main.sid) {
      bufM.push(line);
      mainRows++;
      if (NOT_PLAIN_ASCII.test(r.text)) mainNonAscii++;
      const overhead = renderedOverhead(r.seq, r.kind, r.call_id);
      if (overhead !== null) stats.mainRendered += chars + overhead;
    }
    if (bufA.length >= 4096) flush();
  }
  flush();
  fs.closeSync(fa);
  fs.closeSync(fm);
  stats.mainNonAsciiShare = mainRows === 0 ? 0 : mainNonAscii / mainRows;
  const pass: TextPass = { stats, dump: { all, main: mainFile, allBytes, mainBytes, textBytes: stats.textBytes } };
  ds.texts = { pass, ...now };
  return pass;
}

/**
 * The dumps of textPass; with `mainExtra` (lcm's node summaries), a copy of main.txt with them
 * appended one per line the same way, as main-extra.txt (main.txt stays the rows only).
 */
export function dumpTexts(ds: Dataset, opts: { mainExtra?: Iterable<string> } = {}): TextDump {
  const plain = textPass(ds).dump;
  if (opts.mainExtra === undefined) return plain;
  const mainFile = path.join(ds.dir, 'main-extra.txt');
  fs.copyFileSync(plain.main, mainFile);
  const fm = fs.openSync(mainFile, 'a');
  let mainBytes = plain.mainBytes;
  let buf: string[] = [];
  const flush = (): void => {
    if (buf.length > 0) mainBytes += fs.writeSync(fm, buf.join(''));
    buf = [];
  };
  for (const text of opts.mainExtra) {
    buf.push(dumpLine(text));
    if (buf.length >= 4096) flush();
  }
  flush();
  fs.closeSync(fm);
  return { ...plain, main: mainFile, mainBytes };
}
