// Fits a session's oversized images before a request is prepared: finds the images its rows
// read that break the request's refusal limits, fits each once (daemon/image-resize.ts, cached
// by image and limits in storage/images/fit.ts), stores the result and appends an image_fit
// notice, which every later read of the rows applies (storage/transcript/history.ts FitTable).
import { createHash } from 'node:crypto';
import type { Upstream } from '../protocol/methods.ts';
import type { ImagePart } from '../protocol/rows.ts';
import { headSeq, imageFits } from '../storage/transcript/history.ts';
import { type Db } from '../storage/db.ts';
import { SLICE_MS, giveWay } from '../protocol/time-slice.ts';
import { cachedFit, fitChecked, oversizedImages, payloadSize, saveFit, saveFitChecked, type PayloadSize, type SqlLimits } from '../storage/images/fit.ts';
import { getPayload, putPayload } from '../storage/images/payloads.ts';
import { appendNotice } from '../storage/transcript/write.ts';
import { sessionRewrites } from '../storage/transcript/user-rows.ts';
import { cacheSlot } from '../strategies/harness/kernel-cache.ts';
import { brokenLimits, imageLimits, limitsKey, withinLimits, type ImageLimits } from '../strategies/image-limits.ts';
import type { ConfigSnapshot } from './config.ts';
import { catalogEntry, resolveExtensions } from './engine-setup.ts';
import { fitImage, type Fitted } from './image-resize.ts';
import type { Kernel } from './kernels.ts';
import type { Logger } from './logger.ts';

/** Per limits key: every image of the session's rows through `through` reads within them. */
interface Checked {
  through: number;
  /** The session's rewrite count then; a settle may move rows below `through`. */
  rewrites: number;
}

const CHECKED = cacheSlot<Map<string, Checked>>('image-fit.checked');
/** `hash|limits` of fits that failed in this kernel, with the note the observation carries. */
const FAILED = cacheSlot<Map<string, string>>('image-fit.failed');

/** Fits running now, by `hash|limits`, so two sessions needing one fit compute it once. */
const inFlight = new Map<string, Promise<Fitted>>();

export interface FitRequest {
  db: Db;
  log: Logger;
  kernel: Kernel;
  session: string;
  /** The session's sid (the caller has looked it up). */
  sid: number;
  /** The RPC method this runs for, for the log. */
  method: string;
  limits: ImageLimits;
}

export interface FitReport {
  /** image_fit notices appended. */
  fitted: number;
  /** For the observation: images that go out unfitted because their fit failed. */
  notes: string[];
}

/**
 * The limits for a `prepare`: the upstream's declaration, else our table for the provider
 * (`prepare {provider}`, the upstream's, the catalog's), else the safe defaults; null when the
 * catalog says the model reads no images (its requests carry none, so nothing needs fitting).
 */
export function limitsForPrepare(
  db: Db,
  config: ConfigSnapshot,
  p: { sid: number; model: string | null; provider?: string | undefined; upstream?: Upstream | undefined },
): ImageLimits | null {
  const entry = catalogEntry(config, resolveExtensions(db, config, p.sid), p.model);
  if (entry !== undefined && !(entry.input as readonly string[]).includes('image')) return null;
  return imageLimits({ upstream: p.upstream, provider: p.provider ?? p.upstream?.provider ?? entry?.provider, model: p.model });
}

/** The rows whose images have not been checked against these limits: after `from`, through `head`. */
function uncheckedRows(req: Pick<FitRequest, 'db' | 'kernel' | 'sid' | 'limits'>): { key: string; head: number; rewrites: number; from: number } {
  const { db, sid } = req;
  const key = limitsKey(req.limits);
  const head = headSeq(db, sid);
  const rewrites = sessionRewrites(db, sid);
  const state = req.kernel.cache.get(CHECKED)?.get(key) ?? fitChecked(db, sid, key);
  return { key, head, rewrites, from: state !== undefined && state.rewrites === rewrites ? state.through : 0 };
}

/**
 * The usual request's check, made in the caller's stretch of reads: true when every image the
 * rows up to the head read is known to be within the limits, or the rows since the last check
 * (one scan window: an agent's turn adds a few) name none over them, which is then remembered
 * as fitSessionImages would. False when fitSessionImages has work to do: a long stretch of
 * rows to scan with yields, or images to look at.
 */
export function imagesWithinAtOnce(req: Pick<FitRequest, 'db' | 'kernel' | 'sid' | 'limits'>): boolean {
  const { key, head, rewrites, from } = uncheckedRows(req);
  if (from >= head) return true;
  const page = oversizedImages(req.db, req.sid, from, head, sqlLimits(req.limits));
  if (page.next < head || page.refs.length > 0) return false;
  req.kernel.cache.getOrSet(CHECKED, () => new Map<string, Checked>()).set(key, { through: head, rewrites });
  return true;
}

/** The limits as numbers, as the search and the resize take them. */
function sqlLimits(limits: ImageLimits): SqlLimits {
  return { edgePx: limits.edgePx.value, pixels: limits.pixels?.value ?? null, bytes: limits.bytes.value };
}

/**
 * Makes every image the session's rows read fit the limits.
 *
 * Invariant: after a call with limits L returns, every image a row at or below the head it saw
 * reads (its upload, or what fits made of it) is within L, except those whose fit failed.
 * It holds because image_fit notices are only ever appended: a row's image reads as the last
 * fit of its chain, and that fit's result is named (in payload_refs) by the notice row, which
 * lies after every row it replaces. So an image that a row at or below `through` reads was
 * either checked when `through` was reached or is named by a newer row, which the next call
 * checks. A call therefore only searches rows after `through` (kept per limits in the kernel
 * and, for long scans and fits, in SQLite), in windows of the session index, yielding between
 * them; with nothing new it costs no query at all. A settle (rewrites changed) starts over.
 *
 * For each image found over a limit, the image its row reads now (fits composed) is what gets
 * fitted, once per image however many rows show it: one notice after all of them replaces it
 * everywhere. A failed fit is logged once per kernel and leaves the image as uploaded; the
 * notes say so on every request that carries it.
 */
export async function fitSessionImages(req: FitRequest): Promise<FitReport> {
  const { db, kernel } = req;
  const { key, head, rewrites, from } = uncheckedRows(req);
  const sid = req.sid;
  if (from >= head) return { fitted: 0, notes: [] };
  const known = kernel.cache.getOrSet(CHECKED, () => new Map<string, Checked>());
  const failed = kernel.cache.getOrSet(FAILED, () => new Map<string, string>());
  const limits = req.limits;

  // The occurrences over the limits, window by window.
  const found: Array<PayloadSize & { seq: number }> = [];
  let after = from;
  let windows = 0;
  let started = performance.now();
  while (after < head) {
    const page = oversizedImages(db, sid, after, head, sqlLimits(limits));
    found.push(...page.refs);
    after = page.next;
    windows += 1;
    if (performance.now() - started >= SLICE_MS) {
      await giveWay();
      started = performance.now();
    }
  }

  // What each occurrence reads now, grouped: one fit per image.
  const due = new Map<string, { size: PayloadSize; firstSeq: number }>();
  if (found.length > 0) {
    const fits = imageFits(db, req.session, head);
    for (const ref of found) {
      const part: ImagePart = { type: 'image', hash: ref.hash, media_type: ref.media_type, width: ref.width, height: ref.height };
      const now = fits.empty ? part : fits.resolve(part, ref.seq);
      const size = now === part ? ref : payloadSize(db, now.hash);
      if (size === undefined || withinLimits(limits, size) || due.has(size.hash)) continue;
      due.set(size.hash, { size, firstSeq: ref.seq });
    }
  }

  let fitted = 0;
  const notes: string[] = [];
  let through = head;
  for (const { size, firstSeq } of due.values()) {
    const failKey = `${size.hash}|${key}`;
    const failure = failed.get(failKey) ?? (await fitOne(req, size, key, sid));
    if (failure === null) {
      fitted += 1;
      continue;
    }
    failed.set(failKey, failure);
    notes.push(failure);
    // Keep searching from the unfitted image, so the next request's notes name it too.
    through = Math.min(through, firstSeq - 1);
  }
  const next = { through, rewrites };
  known.set(key, next);
  if (fitted > 0 || windows > 1) saveFitChecked(db, sid, key, next.through, next.rewrites);
  return { fitted, notes };
}

/** Fits one image and appends its notice; null when done, else the note of the failure. */
async function fitOne(req: FitRequest, size: PayloadSize, key: string, sid: number): Promise<string | null> {
  const { db, limits } = req;
  const label = `image ${size.hash.slice(0, 8)} (${size.width}x${size.height}, ${size.bytes} bytes)`;
  let to = cachedFit(db, size.hash, key);
  let made: { hash: string; fitted: Fitted } | undefined;
  if (to === undefined) {
    const flightKey = `${size.hash}|${key}`;
    let flight = inFlight.get(flightKey);
    if (flight === undefined) {
      const payload = getPayload(db, size.hash);
      if (payload === undefined) return null; // collected meanwhile: nothing left to send
      flight = fitImage(payload, sqlLimits(limits));
      inFlight.set(flightKey, flight);
      void flight.then(
        () => inFlight.delete(flightKey),
        () => inFlight.delete(flightKey),
      );
    }
    let fitted: Fitted;
    try {
      fitted = await flight;
    } catch (err) {
      req.log.warn({ err, session: req.session, method: req.method, hash: size.hash, limits: key }, 'image fit failed; the image goes out as uploaded');
      return `${label} could not be fitted (${(err as Error).message}); it goes out as uploaded and the provider may refuse it`;
    }
    const hash = createHash('sha256').update(fitted.data).digest('hex');
    made = { hash, fitted };
    to = { type: 'image', hash, media_type: fitted.media_type, width: fitted.width, height: fitted.height };
  }
  const reason = `${size.width}x${size.height}, ${size.bytes} bytes: ${brokenLimits(limits, size).join(' and ')}`;
  const part = to;
  db.transaction(() => {
    if (made !== undefined) {
      putPayload(db, made.hash, made.fitted.media_type, made.fitted.width, made.fitted.height, made.fitted.data);
      saveFit(db, size.hash, key, made.hash);
    }
    appendNotice(db, sid, { notice: 'image_fit', from_hash: size.hash, to: part, reason });
  })();
  req.log.info(
    { session: req.session, method: req.method, from: size.hash, to: part.hash, width: part.width, height: part.height, reason, cached: made === undefined },
    made === undefined ? 'image fitted (cached fit reused)' : 'image fitted',
  );
  return null;
}
