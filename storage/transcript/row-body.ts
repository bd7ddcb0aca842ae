// How a transcript row's body is stored (migration 22). The body is the row's JSON
// (protocol/rows.ts StoredBody). A large one is kept compressed in `transcript.packed`, with
// `body` left as the empty string; a small one, or one that would not shrink enough, stays as
// text in `body` with `packed` NULL. Coding-agent rows are mostly short, but the long ones (file
// reads, command output) hold most of the bytes and compress well, so this shrinks the row
// table substantially (docs/performance.md, "Disk").
//
// Every reader that needs the JSON selects `bodySql()`, which inflates in SQLite through
// `albedo_unpack` only for packed rows; every writer stores what `packBody` (or, for an append's
// longest rows, `packBodyAsync`) returns, and rows still stored as text from before migration 22
// are packed in idle time (storage/transcript/row-packing.ts). Nothing else needs to know which form a row
// is in. Copies of rows (settling, forks) move both columns as they are.
import { promisify } from 'node:util';
import zlib from 'node:zlib';

const brotliCompress = promisify(zlib.brotliCompress);

/** Bodies shorter than this (UTF-16 units of the JSON) are stored as text: not worth a zlib call. */
export const PACK_MIN_CHARS = 2048;
/** A packed body is kept only when it is at most this fraction of the JSON's UTF-8 bytes. */
const PACK_MAX_RATIO = 0.75;
/**
 * The first byte of a packed body names its format; every format ever written stays readable.
 * 1: raw deflate (RFC 1951) of the JSON's UTF-8 bytes, level 1 (rows packed before stop 28).
 * 2: Brotli (RFC 7932) of the same bytes, what packBody writes now.
 */
const FORMAT_DEFLATE_RAW = 1;
const FORMAT_BROTLI = 2;
/**
 * Brotli at quality 1 with a 256 KiB window. On the bench's coding rows it compresses faster
 * than deflate at level 1 (the fastest level, which packing used before), for slightly more
 * bytes (docs/performance.md, "Brotli for packed bodies"): an append pays the compression
 * of every long row, a reader inflates only the rows it reads. The window is larger than almost
 * every body, and a smaller one was no faster.
 */
function brotliOptions(bytes: number): zlib.BrotliOptions {
  return {
    params: {
      [zlib.constants.BROTLI_PARAM_QUALITY]: 1,
      [zlib.constants.BROTLI_PARAM_LGWIN]: 18,
      [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes,
    },
  };
}

/** A body as its two columns. */
export interface PackedBody {
  /** The JSON, or '' when `packed` holds it. */
  body: string;
  packed: Buffer | null;
}

/** Whether a body's JSON is long enough to try packing it. */
function worthPacking(json: string): boolean {
  return json.length >= PACK_MIN_CHARS;
}

/** The columns for a JSON whose compressed bytes are known. */
function stored(json: string, raw: Buffer, compressed: Buffer): PackedBody {
  if (compressed.length + 1 > raw.length * PACK_MAX_RATIO) return { body: json, packed: null };
  const packed = Buffer.allocUnsafe(compressed.length + 1);
  packed[0] = FORMAT_BROTLI;
  compressed.copy(packed, 1);
  return { body: '', packed };
}

/** The columns that store a body's JSON, compressed here on the calling thread. */
export function packBody(json: string): PackedBody {
  if (!worthPacking(json)) return { body: json, packed: null };
  const raw = Buffer.from(json, 'utf8');
  return stored(json, raw, zlib.brotliCompressSync(raw, brotliOptions(raw.length)));
}

/**
 * Bodies at least this long (UTF-16 units) are compressed on libuv's thread pool by
 * packBodyAsync; shorter ones on the calling thread. Node's asynchronous zlib call goes through a
 * stream and costs more than the synchronous one, a large part of a typical packed body's whole
 * cost, but nothing next to a long body's compression, which would otherwise hold the event
 * loop.
 */
export const PACK_OFF_THREAD_CHARS = 64 * 1024;

/** packBody, with long bodies compressed off the event loop (see PACK_OFF_THREAD_CHARS). */
export async function packBodyAsync(json: string): Promise<PackedBody> {
  if (json.length < PACK_OFF_THREAD_CHARS) return packBody(json);
  const raw = Buffer.from(json, 'utf8');
  return stored(json, raw, await brotliCompress(raw, brotliOptions(raw.length)));
}

/** The JSON a packed body holds; a blob that does not decode fails naming the row. */
export function unpackBody(seq: number, packed: Uint8Array): string {
  const format = packed[0];
  if (format !== FORMAT_BROTLI && format !== FORMAT_DEFLATE_RAW) {
    throw new Error(`transcript row ${seq} is corrupt: packed body has unknown format ${format ?? '(empty)'}`);
  }
  try {
    const bytes = packed.subarray(1);
    return (format === FORMAT_BROTLI ? zlib.brotliDecompressSync(bytes) : zlib.inflateRawSync(bytes)).toString('utf8');
  } catch (err) {
    throw new Error(`transcript row ${seq} is corrupt: packed body does not inflate (${(err as Error).message})`);
  }
}

/** A row's JSON from its two columns, as read in TypeScript. */
export function bodyJson(seq: number, body: string, packed: Uint8Array | null): string {
  return packed === null ? body : unpackBody(seq, packed);
}

/**
 * The row's JSON in SQL, for a transcript row reached as `alias` (none: the table's own
 * columns; `new` inside a trigger). Plain rows are returned by SQLite itself; only packed ones
 * cost a call into JavaScript (albedo_unpack, registered on every connection by storage/db.ts).
 */
export function bodySql(alias?: string): string {
  const c = (name: string): string => (alias === undefined ? name : `${alias}.${name}`);
  return `CASE WHEN ${c('packed')} IS NULL THEN ${c('body')} ELSE albedo_unpack(${c('seq')}, ${c('packed')}) END`;
}
