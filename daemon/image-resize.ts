// Fitting one image to refusal limits with sharp: the pixels and the encoding, nothing else.
// Which images to fit, the cache of fits and the image_fit notices are daemon/image-fit.ts's.
import sharp from 'sharp';

/** The limits one fit must meet (strategies/image-limits.ts gives them with their sources). */
export interface FitLimits {
  /** Longest edge, pixels. */
  edgePx: number;
  /** Most pixels (width x height); null: none beyond the edge. */
  pixels: number | null;
  /** Largest file, bytes. */
  bytes: number;
}

export interface FitSource {
  data: Buffer;
  media_type: string;
  /** Pixels, as stored (before any EXIF orientation). */
  width: number;
  height: number;
}

export interface Fitted {
  data: Buffer;
  media_type: string;
  /** Pixels of the fitted file, as sharp wrote it. */
  width: number;
  height: number;
  /** Encodes it took (1 when the first one met every limit). */
  attempts: number;
}

/** A fit that could not meet the limits (or sharp failed on the image). */
export class ImageFitError extends Error {
  override readonly name = 'ImageFitError';
}

/** Encodes tried at most per fit: the first fit, then lower quality or smaller sizes. */
export const MAX_FIT_ATTEMPTS = 8;
/** JPEG and WebP quality of the first encode, and the lowest one tried before scaling further. */
const FIRST_QUALITY = 90;
const LOWEST_QUALITY = 60;
const QUALITY_STEP = 15;

type Format = 'png' | 'jpeg' | 'webp' | 'gif';
const FORMATS: Record<string, Format> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/webp': 'webp', 'image/gif': 'gif' };

/** The size after scaling by `s` (<= 1): rounded down, so a limit met by the scale stays met. */
function scaled(width: number, height: number, s: number): { width: number; height: number } {
  if (s >= 1) return { width, height };
  return { width: Math.max(1, Math.floor(width * s + 1e-9)), height: Math.max(1, Math.floor(height * s + 1e-9)) };
}

/** The largest scale (<= 1, so never up) at which the edge and pixel limits hold. */
function scaleFor(width: number, height: number, l: FitLimits): number {
  let s = Math.min(1, l.edgePx / Math.max(width, height));
  if (l.pixels !== null) s = Math.min(s, Math.sqrt(l.pixels / (width * height)));
  // Rounding down per edge can still leave width x height over the pixel limit by a hair.
  for (let d = scaled(width, height, s); l.pixels !== null && d.width * d.height > l.pixels; d = scaled(width, height, s)) s *= 0.999;
  return s;
}

/**
 * Fits an image to the limits. The algorithm:
 *
 * 1. The image is turned upright by its EXIF orientation (the output carries no metadata, so
 *    it must look right without it) and scaled down, aspect kept, to the largest size within
 *    the edge and pixel limits; an image already within them keeps its size. Never scaled up.
 * 2. It is written in its own format: PNG stays PNG (lossless), JPEG stays JPEG and WebP stays
 *    WebP at quality 90, GIF stays GIF. An animated GIF or WebP keeps only its first frame
 *    (what the providers that accept one read).
 * 3. While the file is over the byte limit: a lossy format drops its quality by 15 down to 60;
 *    after that (and for PNG and GIF at once) the size shrinks by the square root of
 *    (limit / bytes), with a 5 % margin and at least 10 % per step, since bytes follow the
 *    pixel count. A PNG is never quantized to a palette: that is slow on large noisy images
 *    (seconds per megapixel) and changes colours, where a smaller size keeps them exact.
 *    At most MAX_FIT_ATTEMPTS encodes; past them ImageFitError.
 */
export async function fitImage(src: FitSource, limits: FitLimits): Promise<Fitted> {
  const format = FORMATS[src.media_type];
  if (format === undefined) throw new ImageFitError(`cannot fit an image of type ${src.media_type}`);
  let orientation: number | undefined;
  try {
    orientation = (await sharp(src.data).metadata()).orientation;
  } catch (err) {
    throw new ImageFitError(`image does not decode: ${(err as Error).message}`);
  }
  const turned = orientation !== undefined && orientation >= 5;
  const width = turned ? src.height : src.width;
  const height = turned ? src.width : src.height;
  let s = scaleFor(width, height, limits);
  let quality = FIRST_QUALITY;
  for (let attempt = 1; attempt <= MAX_FIT_ATTEMPTS; attempt++) {
    const size = scaled(width, height, s);
    let out: { data: Buffer; info: sharp.OutputInfo };
    try {
      out = await encode(src.data, format, size, { quality, orient: orientation !== undefined && orientation !== 1 });
    } catch (err) {
      throw new ImageFitError(`sharp failed: ${(err as Error).message}`);
    }
    if (out.data.length <= limits.bytes) {
      return { data: out.data, media_type: src.media_type, width: out.info.width, height: out.info.height, attempts: attempt };
    }
    if ((format === 'jpeg' || format === 'webp') && quality - QUALITY_STEP >= LOWEST_QUALITY) {
      quality -= QUALITY_STEP;
    } else {
      s *= Math.min(0.9, Math.sqrt(limits.bytes / out.data.length) * 0.95);
    }
  }
  throw new ImageFitError(`no encode within ${MAX_FIT_ATTEMPTS} attempts got the image under ${limits.bytes} bytes`);
}

async function encode(
  data: Buffer,
  format: Format,
  size: { width: number; height: number },
  o: { quality: number; orient: boolean },
): Promise<{ data: Buffer; info: sharp.OutputInfo }> {
  let img = sharp(data);
  if (o.orient) img = img.rotate();
  img = img.resize(size.width, size.height, { fit: 'fill' });
  switch (format) {
    case 'png':
      img = img.png();
      break;
    case 'jpeg':
      img = img.jpeg({ quality: o.quality });
      break;
    case 'webp':
      img = img.webp({ quality: o.quality });
      break;
    case 'gif':
      img = img.gif();
      break;
  }
  return img.toBuffer({ resolveWithObject: true });
}
