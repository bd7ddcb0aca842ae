// The refusal limits an image must respect before a request may carry it: the longest edge, the
// pixel count and the encoded size above which the upstream rejects the request. Pure: the
// client's declared limits, our table by provider and the safe defaults go in, one set of
// limits with the source of each comes out. Fitting to them is daemon/image-fit.ts's job.
//
// Not to be confused with the *native* edge (ProjectionTarget.maxImageEdgePx, the catalog's and
// the upstream's `max_image_edge_px`): beyond that edge a provider downsizes the image before
// the model reads it, and never refuses it, so it drives estimates and snapcompact's frame
// geometry, not fitting.
import type { Upstream } from '../protocol/methods.ts';

/** One limit and where it came from, for the image_fit notice's reason. */
export interface ImageLimit {
  value: number;
  /** Who set it: `the upstream`, a provider (`anthropic`), or `the safe defaults`. */
  source: string;
}

export interface ImageLimits {
  /** Longest edge accepted, in pixels. */
  edgePx: ImageLimit;
  /** Most pixels (width x height) accepted; null: no limit beyond the edge's. */
  pixels: ImageLimit | null;
  /** Largest image accepted, in bytes of the image file (not of its base64 text). */
  bytes: ImageLimit;
  /** The model the request goes to, when known, named in reasons. */
  model: string | null;
}

interface ProviderLimits {
  edgePx?: number;
  pixels?: number;
  bytes?: number;
}

const MB = 1024 * 1024;

/**
 * Bytes of an image file whose base64 text is `base64Bytes` long. Anthropic checks its 5 MB
 * limit on the base64 text of an inline image, so a 4 MB file is already refused there.
 */
function fileBytesOfBase64(base64Bytes: number): number {
  return Math.floor(base64Bytes / 4) * 3;
}

/**
 * Refusal limits by provider (the name `prepare {provider}`, the upstream or the catalog gives).
 * A provider missing here, or a limit missing from its entry, gets the safe default.
 *
 * - anthropic: 8000 px on the longest edge and 5 MB per inline image, measured on the base64
 *   text (https://platform.claude.com/docs/en/build-with-claude/vision, "General limits";
 *   the 400 reads "image exceeds 5 MB maximum"). A request with more than 20 images accepts at
 *   most 2000 px per edge; not applied here (see docs/images.md).
 * - openai: 20 MB per image, 50 MB of images per request, no refused edge (a high-detail image
 *   is scaled down to 2000 px on the long side and 768 px on the short one);
 *   https://platform.openai.com/docs/guides/images-vision, "Image input requirements". The edge
 *   falls back to the safe default.
 * - google (Gemini): inline data is bounded by the 20 MB request
 *   (https://ai.google.dev/gemini-api/docs/image-understanding), and Vertex AI allows 7 MB per
 *   inline file (https://cloud.google.com/vertex-ai/generative-ai/docs/multimodal/image-understanding):
 *   7 MB, so one image never fills the request. No refused edge: the safe default.
 */
export const PROVIDER_IMAGE_LIMITS: Readonly<Record<string, ProviderLimits>> = {
  anthropic: { edgePx: 8000, bytes: fileBytesOfBase64(5 * MB) },
  openai: { bytes: 20 * MB },
  google: { bytes: 7 * MB },
};

/** Used when neither the client nor our table says: Anthropic's, the strictest common ones. */
export const SAFE_IMAGE_LIMITS = { edgePx: 8000, bytes: fileBytesOfBase64(5 * MB) } as const;

/**
 * The limits for one request. Each limit separately: the upstream's declaration
 * (`max_image_accepted_edge_px`, `max_image_pixels`, `max_image_bytes`) when the client makes
 * it, else the provider's entry in PROVIDER_IMAGE_LIMITS, else SAFE_IMAGE_LIMITS (no pixel
 * limit by default: no provider we know refuses by pixel count below its edge limit).
 */
export function imageLimits(args: { upstream?: Upstream | undefined; provider?: string | undefined; model?: string | null }): ImageLimits {
  const up = args.upstream;
  const provider = args.provider;
  const table = provider === undefined ? undefined : PROVIDER_IMAGE_LIMITS[provider];
  const pick = (declared: number | undefined, ours: number | undefined, fallback: number): ImageLimit => {
    if (declared !== undefined) return { value: declared, source: 'the upstream' };
    if (ours !== undefined && provider !== undefined) return { value: ours, source: provider };
    return { value: fallback, source: 'the safe defaults' };
  };
  const pixels = up?.max_image_pixels !== undefined
    ? { value: up.max_image_pixels, source: 'the upstream' }
    : table?.pixels !== undefined && provider !== undefined
    ? { value: table.pixels, source: provider }
    : null;
  return {
    edgePx: pick(up?.max_image_accepted_edge_px, table?.edgePx, SAFE_IMAGE_LIMITS.edgePx),
    pixels,
    bytes: pick(up?.max_image_bytes, table?.bytes, SAFE_IMAGE_LIMITS.bytes),
    model: args.model ?? null,
  };
}

/** The limits as a canonical string: equal limits, equal key, whatever their sources. */
export function limitsKey(l: Pick<ImageLimits, 'edgePx' | 'pixels' | 'bytes'>): string {
  return `edge=${l.edgePx.value};px=${l.pixels === null ? '-' : l.pixels.value};bytes=${l.bytes.value}`;
}

/** An image's measures: pixels and bytes of its file. */
export interface ImageSize {
  width: number;
  height: number;
  bytes: number;
}

/** Which limits an image breaks, each said in words (`over the 8000 px edge limit`); empty: none. */
export function brokenLimits(l: ImageLimits, img: ImageSize): string[] {
  const out: string[] = [];
  const of = (x: ImageLimit): string => (x.source === 'the upstream' || x.source === 'the safe defaults' ? x.source : l.model === null ? x.source : `${l.model} (${x.source})`);
  if (Math.max(img.width, img.height) > l.edgePx.value) out.push(`over the ${l.edgePx.value} px edge limit of ${of(l.edgePx)}`);
  if (l.pixels !== null && img.width * img.height > l.pixels.value) out.push(`over the ${l.pixels.value} pixel limit of ${of(l.pixels)}`);
  if (img.bytes > l.bytes.value) out.push(`over the ${l.bytes.value} byte limit of ${of(l.bytes)}`);
  return out;
}

/** True when the image breaks none of the limits. */
export function withinLimits(l: Pick<ImageLimits, 'edgePx' | 'pixels' | 'bytes'>, img: ImageSize): boolean {
  return Math.max(img.width, img.height) <= l.edgePx.value && (l.pixels === null || img.width * img.height <= l.pixels.value) && img.bytes <= l.bytes.value;
}
