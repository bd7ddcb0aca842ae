// Image payloads: checking uploaded images, the content-addressed `payloads` table, pins of a
// session's prompt and garbage collection. References from transcript rows are written by
// storage/transcript/write.ts; when to collect garbage (and image fitting) is the daemon's business.
import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { AlbedoError } from '../../protocol/errors.ts';
import type { ImagePart, ImagePartIn } from '../../protocol/rows.ts';
import { type Db, perDb } from '../db.ts';

/** Largest image accepted on append, in bytes of decoded image data. */
export const DEFAULT_MAX_IMAGE_BYTES = 20 * 1024 * 1024;

/** An uploaded image in stored form, with the bytes still to be written (null if stored). */
export interface PreparedImage {
  part: ImagePart;
  bytes: Buffer | null;
}

export interface Payload {
  /** sha256 of `data`, lowercase hex. */
  hash: string;
  media_type: string;
  /** Pixels. */
  width: number;
  height: number;
  data: Buffer;
}

type Meta = Omit<Payload, 'data'>;

function prepare(db: Db) {
  return {
    meta: db.prepare<[string], Meta>('SELECT hash, media_type, width, height FROM payloads WHERE hash = ?'),
    get: db.prepare<[string], Payload>('SELECT hash, media_type, width, height, data FROM payloads WHERE hash = ?'),
    put: db.prepare<[string, string, number, number, number, Buffer, number]>(
      `INSERT OR IGNORE INTO payloads (hash, media_type, width, height, bytes, data, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ),
    gc: db.prepare<[]>(
      `DELETE FROM payloads WHERE NOT EXISTS (SELECT 1 FROM payload_refs r WHERE r.hash = payloads.hash)
         AND NOT EXISTS (SELECT 1 FROM snapcompact_frames f WHERE f.hash = payloads.hash)`,
    ),
    pin: db.prepare<[string, number, string, number]>(
      `INSERT INTO payload_refs (hash, pin_sid) SELECT ?, ?
        WHERE NOT EXISTS (SELECT 1 FROM payload_refs WHERE hash = ? AND pin_sid = ?)`,
    ),
    unpin: db.prepare<[number]>('DELETE FROM payload_refs WHERE pin_sid = ?'),
    // One hash released: an indexed probe of each table that can name it.
    release: db.prepare<[string, string, string], number>(
      `DELETE FROM payloads WHERE hash = ?
         AND NOT EXISTS (SELECT 1 FROM payload_refs INDEXED BY payload_refs_hash WHERE hash = ?)
         AND NOT EXISTS (SELECT 1 FROM snapcompact_frames INDEXED BY snapcompact_frames_hash WHERE hash = ?)
       RETURNING bytes`,
    ).pluck(),
    stats: db.prepare<[], { count: number; bytes: number }>('SELECT count(*) AS count, coalesce(sum(bytes), 0) AS bytes FROM payloads'),
  };
}

const stmts = perDb(prepare);

const FORMAT_NAMES: Record<string, string> = { png: 'PNG', jpeg: 'JPEG', gif: 'GIF', webp: 'WebP' };

/** Base64 that re-encodes to itself (whitespace aside); undefined for anything looser. */
function decodeBase64(data: string): Buffer | undefined {
  const s = data.replace(/\s+/g, '');
  const buf = Buffer.from(s, 'base64');
  return buf.length > 0 && buf.toString('base64') === s ? buf : undefined;
}

/**
 * Turns an uploaded image part into its stored form. A `{hash}` part must name a stored
 * payload. Bytes are decoded strictly, bounded by `maxBytes`, and their real format must be the
 * claimed media type; bytes already stored under their hash are not returned again.
 */
export async function prepareImage(part: ImagePartIn, opts: { maxBytes: number }, db: Db): Promise<PreparedImage> {
  if ('hash' in part) {
    const m = stmts(db).meta.get(part.hash);
    if (m === undefined) throw new AlbedoError('unknown_payload', `unknown payload ${part.hash}`, { hash: part.hash });
    return { part: stored(m), bytes: null };
  }
  const claimed = part.media_type.slice('image/'.length);
  const label = FORMAT_NAMES[claimed] ?? claimed;
  const buf = decodeBase64(part.data);
  if (buf === undefined) {
    throw new AlbedoError('invalid_image', 'image data is not valid base64', { media_type: part.media_type });
  }
  if (buf.length > opts.maxBytes) {
    throw new AlbedoError('image_too_large', `image is ${buf.length} bytes, over the limit of ${opts.maxBytes}`, {
      bytes: buf.length,
      limit_bytes: opts.maxBytes,
    });
  }
  const hash = createHash('sha256').update(buf).digest('hex');
  const known = stmts(db).meta.get(hash);
  if (known !== undefined) {
    if (known.media_type !== part.media_type) {
      throw new AlbedoError('invalid_image', `image data is not a valid ${label} (it is ${known.media_type})`, {
        media_type: part.media_type,
      });
    }
    return { part: stored(known), bytes: null };
  }
  let meta: sharp.Metadata;
  try {
    meta = await sharp(buf).metadata();
  } catch {
    throw new AlbedoError('invalid_image', `image data is not a valid ${label}`, { media_type: part.media_type });
  }
  if (meta.format !== claimed) {
    const seen = meta.format === undefined ? '' : ` (it looks like ${FORMAT_NAMES[meta.format] ?? meta.format})`;
    throw new AlbedoError('invalid_image', `image data is not a valid ${label}${seen}`, { media_type: part.media_type });
  }
  const width = meta.width;
  const height = meta.pageHeight ?? meta.height;
  if (!(width > 0 && height > 0)) {
    throw new AlbedoError('invalid_image', `image data is not a valid ${label} (no dimensions)`, {
      media_type: part.media_type,
    });
  }
  // The header can be fine while the pixel data is cut off or corrupt: decode it all once,
  // into a thumbnail so no full-size pixels are kept or summed (stats() of a very large PNG
  // took many times as long). Sharp's pixel limit also stops decompression bombs here.
  try {
    await sharp(buf, { failOn: 'truncated' }).resize(64, 64, { fit: 'inside' }).raw().toBuffer();
  } catch (err) {
    const why = err instanceof Error && /pixel limit/i.test(err.message) ? ' (too many pixels)' : ' (its pixel data does not decode)';
    throw new AlbedoError('invalid_image', `image data is not a valid ${label}${why}`, { media_type: part.media_type });
  }
  return { part: stored({ hash, media_type: part.media_type, width, height }), bytes: buf };
}

function stored(m: Meta): ImagePart {
  return { type: 'image', hash: m.hash, media_type: m.media_type, width: m.width, height: m.height };
}

/** Stores bytes under their hash; a hash already stored is left as it is. */
export function putPayload(db: Db, hash: string, media_type: string, width: number, height: number, bytes: Buffer): void {
  stmts(db).put.run(hash, media_type, width, height, bytes.length, bytes, Date.now());
}

export function getPayload(db: Db, hash: string): Payload | undefined {
  return stmts(db).get.get(hash);
}

/** True when a payload is stored under this hash. */
export function hasPayload(db: Db, hash: string): boolean {
  return stmts(db).meta.get(hash) !== undefined;
}

/**
 * Deletes those of `hashes` that no transcript row, pin or cached frame names any more: what a
 * caller runs, in its own transaction, right after it dropped references to them. Returns how
 * many payloads went, their bytes and their hashes.
 */
export function releasePayloads(db: Db, hashes: Iterable<string>): { count: number; bytes: number; deleted: string[] } {
  const st = stmts(db);
  const out = { count: 0, bytes: 0, deleted: [] as string[] };
  for (const h of new Set(hashes)) {
    const bytes = st.release.get(h, h, h);
    if (bytes !== undefined) {
      out.count++;
      out.bytes += bytes;
      out.deleted.push(h);
    }
  }
  return out;
}

/**
 * The sweep: deletes every payload nothing names. Releases keep the table clean as references
 * go; this catches a payload stored without one (a crash between storing a fitted image and
 * writing its notice). It reads the payloads table, never transcript rows. Returns how many went.
 */
export function collectPayloadGarbage(db: Db): number {
  return stmts(db).gc.run().changes;
}

/** How many payloads are stored and their bytes (images and cached frames alike). */
export function payloadStats(db: Db): { count: number; bytes: number } {
  return stmts(db).stats.get() ?? { count: 0, bytes: 0 };
}

/** Records that a session's pinned prompt names this payload (idempotent). */
export function pinPayload(db: Db, sid: number, hash: string): void {
  stmts(db).pin.run(hash, sid, hash, sid);
}

/** Drops every pin of a session; the payloads go at the next garbage collection. */
export function unpinPayloads(db: Db, sid: number): number {
  return stmts(db).unpin.run(sid).changes;
}
