// Section `images`, the fit part: fitting a 4000x3000 PNG and a 12 MP JPEG through our fit path
// (daemon/image-resize.ts fitImage plus the hash the stored payload is named by) against a bare
// `sharp(buf).resize(w, h).toBuffer()` of the same file to the same size. The images are made
// here with sharp from a gradient with noise, so they compress like photos, not like flat fills.
import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { fitImage, type FitLimits } from '../../daemon/image-resize.ts';
import { fmtBytes, fmtMs, nowMs, ownCpuMs, stats, turn, type Stats } from './timing.ts';

/** Our fit against the bare resize of the same file to the same size (CPU time, medians). */
export const FIT_RATIO_TARGET = 1.2;

/**
 * The limits fitted to: Anthropic's edge for requests with more than 20 images (2000 px) and a
 * byte limit one encode meets, so both sides do the same work (one decode, resize, encode).
 */
export const BENCH_FIT_LIMITS: FitLimits = { edgePx: 2000, pixels: null, bytes: 20 * 1024 * 1024 };

export interface ImageFitCase {
  name: string;
  media_type: string;
  source: { width: number; height: number; bytes: number };
  fitted: { width: number; height: number; bytes: number; attempts: number };
  /** CPU time of the process (sharp's threads included) per image; wall time beside it. */
  ours: Stats;
  bare: Stats;
  ours_wall: Stats;
  bare_wall: Stats;
  /** ours.median / bare.median (CPU). */
  ratio: number;
}

export interface ImageFitResult {
  limits: FitLimits;
  cases: ImageFitCase[];
}

/** A photo-like picture: smooth colour gradients plus per-pixel noise of +-`amp` levels. */
function photoLike(width: number, height: number, amp: number): sharp.Sharp {
  const raw = Buffer.alloc(width * height * 3);
  let x = 0x9e3779b9;
  let i = 0;
  for (let y = 0; y < height; y++) {
    for (let col = 0; col < width; col++) {
      const base = [(col * 255) / width, (y * 255) / height, ((col + y) * 127) / (width + height) + 64];
      for (let ch = 0; ch < 3; ch++) {
        x ^= x << 13;
        x >>>= 0;
        x ^= x >>> 17;
        x ^= x << 5;
        x >>>= 0;
        const v = base[ch]! + ((x & 0xff) / 255 - 0.5) * 2 * amp;
        raw[i++] = Math.max(0, Math.min(255, Math.round(v)));
      }
    }
  }
  return sharp(raw, { raw: { width, height, channels: 3 } });
}

async function timeCpu(fn: () => Promise<unknown>): Promise<{ cpu: number; wall: number }> {
  await turn();
  const c0 = ownCpuMs();
  const w0 = nowMs();
  await fn();
  return { cpu: ownCpuMs() - c0, wall: nowMs() - w0 };
}

/** Fits each image `runs` times, interleaved with the bare resize, after one untimed run of each. */
export async function benchImageFit(opts: { quick: boolean }, log: (s: string) => void): Promise<ImageFitResult> {
  const runs = opts.quick ? 3 : 7;
  // libvips' operation cache would serve repeats of the bare resize from memory.
  const cacheWas = sharp.cache();
  sharp.cache(false);
  try {
    log('images: making a 4000x3000 PNG and a 12 MP JPEG ...');
    const sources = [
      { name: '4000x3000 PNG', media_type: 'image/png', data: await photoLike(4000, 3000, 2).png().toBuffer(), width: 4000, height: 3000 },
      { name: '12 MP JPEG (4000x3000)', media_type: 'image/jpeg', data: await photoLike(4000, 3000, 12).jpeg({ quality: 92 }).toBuffer(), width: 4000, height: 3000 },
    ];
    const cases: ImageFitCase[] = [];
    for (const src of sources) {
      const ours = async () => {
        const f = await fitImage(src, BENCH_FIT_LIMITS);
        createHash('sha256').update(f.data).digest('hex');
        return f;
      };
      const fitted = await ours();
      const bare = () => sharp(src.data).resize(fitted.width, fitted.height).toBuffer();
      await bare();
      const o: number[] = [];
      const b: number[] = [];
      const ow: number[] = [];
      const bw: number[] = [];
      for (let i = 0; i < runs; i++) {
        const a = await timeCpu(ours);
        const c = await timeCpu(bare);
        o.push(a.cpu);
        ow.push(a.wall);
        b.push(c.cpu);
        bw.push(c.wall);
      }
      const result: ImageFitCase = {
        name: src.name,
        media_type: src.media_type,
        source: { width: src.width, height: src.height, bytes: src.data.length },
        fitted: { width: fitted.width, height: fitted.height, bytes: fitted.data.length, attempts: fitted.attempts },
        ours: stats(o),
        bare: stats(b),
        ours_wall: stats(ow),
        bare_wall: stats(bw),
        ratio: stats(o).median_ms / stats(b).median_ms,
      };
      log(`images: ${src.name} -> ${fitted.width}x${fitted.height}: ${fmtMs(result.ours.median_ms)} vs ${fmtMs(result.bare.median_ms)} (${result.ratio.toFixed(2)}x)`);
      cases.push(result);
    }
    return { limits: BENCH_FIT_LIMITS, cases };
  } finally {
    sharp.cache(cacheWas.memory.max > 0 ? { memory: cacheWas.memory.max, files: cacheWas.files.max, items: cacheWas.items.max } : false);
  }
}

export function judgeImageFit(r: ImageFitResult): Array<{ target: string; measured: string; pass: boolean }> {
  return r.cases.map((c) => ({
    target: `images: fitting a ${c.name} to ${c.fitted.width}x${c.fitted.height} within ${FIT_RATIO_TARGET}x of a bare sharp resize of the same file (CPU time)`,
    measured: `${fmtMs(c.ours.median_ms)} vs ${fmtMs(c.bare.median_ms)} (${c.ratio.toFixed(2)}x; wall ${fmtMs(c.ours_wall.median_ms)} vs ${fmtMs(c.bare_wall.median_ms)})`,
    pass: c.ratio <= FIT_RATIO_TARGET,
  }));
}

export function renderImageFit(r: ImageFitResult): string {
  const lines = [`\nimages: fit to a ${r.limits.edgePx} px edge (medians of interleaved runs; CPU time of every thread, wall beside it)`];
  for (const c of r.cases) {
    lines.push(
      `  ${c.name.padEnd(24)} ${fmtBytes(c.source.bytes).padStart(9)} -> ${`${c.fitted.width}x${c.fitted.height}`.padStart(9)} ${fmtBytes(c.fitted.bytes).padStart(9)} ` +
        `(${c.fitted.attempts} encode)  ours ${fmtMs(c.ours.median_ms).padStart(8)}  bare ${fmtMs(c.bare.median_ms).padStart(8)}  ${c.ratio.toFixed(2)}x  ` +
        `wall ${fmtMs(c.ours_wall.median_ms)} vs ${fmtMs(c.bare_wall.median_ms)}  (${c.ours.runs} runs)`,
    );
  }
  return lines.join('\n');
}
