// snapcompact: evicted history is kept word for word as an archive of text, and the request
// shows it as frames of 8x13 pixel-font text (render/) that a vision model reads, then the
// verbatim tail. No model writes anything, so a compaction is instant and costs nothing. The
// archive is text; frames are derived from it for each request in the target model's shape
// and cached by content, so a model switch re-renders and unchanged leading frames keep their
// bytes (the prompt cache keeps its prefix). A model that reads no images gets the harness's
// running-summary text compaction instead; the archive stays saved for a later vision model.
import type { PlainInput, Section } from '../../protocol/prepared.ts';
import { clampGeometry, frameKey, layoutFrames, renderFrame, shapeFor, shapeNameFor, type Frame, type Geometry } from '../../render/index.ts';
import { runSteps, runStepsSliced, type Steps, giveWay } from '../../protocol/time-slice.ts';
import { archiveParts, archiveRange, archiveText, cacheFrame, cachedFrame, saveArchive, writeArchivePart, type ArchiveState, type KeptFold } from '../../storage/state/snapcompact.ts';
import { nothingCompacted, type CompactOptions, type CompactOutcome, type DryRun, type Projection, type Strategy, type StrategyInput } from '../contract.ts';
import { imageTokens, inputsTokens } from '../estimate.ts';
import { locateAt, planCutSteps, type LocatedCut } from '../harness/cut.ts';
import { cacheSlot } from '../harness/kernel-cache.ts';
import { foldText, priorTail, warmPriorTail } from '../harness/prior.ts';
import { projectTail, rowMemo, warmTail } from '../harness/row-memo.ts';
import { isDue, overWindow, roomUnderTrigger, roomUnderWindow, tailBudget } from '../harness/window.ts';
import { tokenCounterSteps } from '../projection.ts';
import { growArchiveSteps, resolveArchive, rowsIn, seedArchive } from './archive.ts';
import { SnapcompactSettings } from './settings.ts';
import { providerImageCap } from '../catalog/models.ts';

/** Frames of inline base64 a request carries at most, unless the upstream uploads images. */
export const INLINE_FRAME_CAP = 60;
/** Frames a request carries at most, whatever else allows. */
export const FRAME_CAP = 80;
/** Estimated tokens of a frame's caption input beside its image. */
const CAPTION_TOKENS = 40;

/** Parsed settings per section object: a request reads them several times, the config rarely changes. */
type Settings = ReturnType<typeof SnapcompactSettings.parse>;
const parsedSettings = new WeakMap<object, Settings>();

function settingsOf(input: StrategyInput): Settings {
  let s = parsedSettings.get(input.settings);
  if (s === undefined) {
    s = SnapcompactSettings.parse(input.settings);
    parsedSettings.set(input.settings, s);
  }
  return s;
}

/** Geometries by provider, model and edge: a few per host, asked for on every request. */
const geometries = new Map<string, Geometry>();

/** The frame shape for the target, clamped to the upstream's image edge. */
function geometryOf(input: StrategyInput): Geometry {
  const { provider, model, maxImageEdgePx } = input.target;
  const key = `${provider ?? ''}\u0000${model ?? ''}\u0000${maxImageEdgePx ?? ''}`;
  let g = geometries.get(key);
  if (g === undefined) {
    const shape = shapeFor(provider, model);
    g = maxImageEdgePx === undefined ? shape : clampGeometry(shape, maxImageEdgePx);
    if (geometries.size >= 256) geometries.clear();
    geometries.set(key, g);
  }
  return g;
}

/**
 * How many frames a request may show: the least of the provider's image budget (nine tenths of
 * what the upstream declares, else the provider's cap; `maxFrames` replaces both), the inline
 * data cap (unless images are uploaded), the hard cap, and archivePercent of the window at the
 * cost of one full frame.
 */
export function frameBudget(input: StrategyInput, fullFrameTokens: number): number {
  const s = settingsOf(input);
  const images = s.maxFrames ?? providerImageCap(input.target.provider, input.target.maxImages);
  const inline = input.target.uploadsImages ? Infinity : INLINE_FRAME_CAP;
  const window = input.window.window === null ? Infinity : Math.floor((input.window.window * s.archivePercent) / 100 / input.window.ratio / Math.max(1, fullFrameTokens));
  return Math.max(0, Math.min(images, inline, FRAME_CAP, window));
}

/** The frames a request shows: the first and the newest, whole frames between them dropped. */
export function chooseFrames(count: number, budget: number): number[] {
  if (count <= budget) return Array.from({ length: count }, (_, i) => i);
  if (budget <= 0) return [];
  if (budget === 1) return [count - 1];
  return [0, ...Array.from({ length: budget - 1 }, (_, i) => count - budget + 1 + i)];
}

interface FramesView {
  inputs: PlainInput[];
  section: Section;
  notes: string[];
}

/**
 * A frame of a laid-out archive: where its text lies and its size in pixels. Only a frame a
 * request can show (the first, and the FRAME_CAP - 1 newest: chooseFrames) keeps what it
 * draws. A long archive is thousands of frames, and all their cells and texts together were
 * about twice the archive's size, held by every kernel that laid it out.
 */
interface LaidFrame {
  start: number;
  /** Its text's length, in UTF-16 code units. */
  length: number;
  width: number;
  height: number;
  drawn: Frame | undefined;
}

/** The archive laid out for one geometry, with each frame's cache key; kept per kernel. */
interface Laid {
  frames: LaidFrame[];
  keys: string[];
}

/** What a frame a request shows draws. */
function drawnFrame(laid: Laid, i: number): Frame {
  const drawn = laid.frames[i]?.drawn;
  if (drawn === undefined) throw new Error(`snapcompact layout: frame ${i + 1} of ${laid.frames.length} is not one a request shows`);
  return drawn;
}

const LAYOUT = cacheSlot<{ key: string; laid: Laid }>('snapcompact.layout');

function layoutKey(state: Pick<ArchiveState, 'updatedAt' | 'length'>, geometry: Geometry): string {
  return `${state.updatedAt}:${state.length}:${JSON.stringify(geometry)}`;
}

/**
 * The archive's text (its parts) laid out, a frame a step (a long archive is thousands of
 * frames). With `after`, the text is what follows the frames of `after.laid` but its last, from
 * `after.start` (where that last frame starts) on: those frames are kept, and never modified.
 */
function* layoutSteps(parts: Iterable<string>, geometry: Geometry, after?: { laid: Laid; start: number }): Steps<Laid> {
  const frames = after === undefined ? [] : after.laid.frames.slice(0, -1);
  const keys = after === undefined ? [] : after.laid.keys.slice(0, -1);
  const first = frames.length;
  const offset = after?.start ?? 0;
  for (const f of layoutFrames(parts, geometry)) {
    const drawn = after === undefined ? f : { ...f, index: f.index + first, start: f.start + offset };
    frames.push({ start: drawn.start, length: f.text.length, width: f.width, height: f.height, drawn });
    keys.push(frameKey(f.geometry, f.text));
    // A frame now FRAME_CAP behind the newest can no longer be one of the newest (a copy: a
    // kept frame may belong to another layout still cached).
    const passed = frames.length - FRAME_CAP;
    if (passed > 0 && frames[passed]!.drawn !== undefined) frames[passed] = { ...frames[passed]!, drawn: undefined };
    yield;
  }
  return { frames, keys };
}

/**
 * The layout of the archive `base` grows into with `added` (text that starts with a newline, as
 * every row after the first does). Frames start on row boundaries and each follows from its own
 * text alone, so appending text changes only the last frame: the kernel's layout of `base` for
 * this geometry, when it has it, is extended from its last frame (a compaction then reads back
 * one frame of text, not the whole archive). Otherwise, or when the text before ends with a CR
 * that the added newline would pair with, the whole archive is laid out.
 */
function grownLayoutSteps(input: StrategyInput, base: ArchiveState | undefined, added: readonly string[], geometry: Geometry): Steps<Laid> {
  const { db } = input;
  const sid = input.session.sid;
  const cached = base === undefined ? undefined : input.cache.get(LAYOUT);
  const last = cached?.laid.frames.at(-1);
  if (base !== undefined && cached?.key === layoutKey(base, geometry) && last !== undefined) {
    const lastText = archiveText(db, sid, base, last.start);
    if (!lastText.endsWith('\r')) return layoutSteps([lastText, ...added], geometry, { laid: cached.laid, start: last.start });
  }
  function* parts(): Generator<string, void, undefined> {
    if (base !== undefined) yield* archiveParts(db, sid, base.range);
    yield* added;
  }
  return layoutSteps(parts(), geometry);
}

function layoutOf(input: StrategyInput, state: ArchiveState, geometry: Geometry): Laid {
  const key = layoutKey(state, geometry);
  const cached = input.cache.get(LAYOUT);
  if (cached?.key === key) return cached.laid;
  const laid = runSteps(layoutSteps(archiveParts(input.db, input.session.sid, state.range), geometry));
  input.cache.set(LAYOUT, { key, laid });
  return laid;
}

/** The frames of a layout a request shows within its budget (chooseFrames). */
function shownFrames(input: StrategyInput, frames: readonly LaidFrame[]): number[] {
  const full = frames[0] === undefined ? 0 : imageTokens(frames[0].width, frames[0].height, input.target.maxImageEdgePx);
  return chooseFrames(frames.length, frameBudget(input, full));
}

/**
 * Renders and caches the frames a request will show that the cache lacks, a turn of the event
 * loop after each: what a compaction does before its commit, so that the request it makes
 * finds every frame cached instead of drawing them all in one stretch.
 */
async function renderShown(input: StrategyInput, laid: Laid, stop: () => void): Promise<void> {
  for (const i of shownFrames(input, laid.frames)) {
    if (cachedFrame(input.db, laid.keys[i]!) !== undefined) continue;
    stop();
    const r = renderFrame(drawnFrame(laid, i));
    cacheFrame(input.db, laid.keys[i]!, r.png, r.width, r.height);
    await giveWay();
  }
}

const VIEW = cacheSlot<{ key: string; view: FramesView; source: (cached: number) => string }>('snapcompact.view');

/** Frames rendered by this kernel, for /context: how many came from the cache. */
const RENDERS = cacheSlot<{ rendered: number; hits: number }>('snapcompact.renders');

/**
 * The archive as frame inputs, each with a caption line. A frame not in the cache is rendered
 * and stored (a derived, content-addressed cache, not strategy state). When rendering fails,
 * the archive is withheld from this request with a one-line note, and the turn goes on.
 */
function framesOf(input: StrategyInput, state: ArchiveState): FramesView {
  const name = shapeNameFor(input.target.provider, input.target.model);
  const counters = input.cache.getOrSet(RENDERS, () => ({ rendered: 0, hits: 0 }));
  try {
    const geometry = geometryOf(input);
    const laid = layoutOf(input, state, geometry);
    const { frames, keys } = laid;
    const chosen = shownFrames(input, frames);
    // The same frames as the last request (the usual case between compactions): reuse its
    // inputs. The day is part of the key so that cached frames still get their daily use mark.
    const viewKey = `${state.updatedAt}:${JSON.stringify(geometry)}:${chosen.join(',')}:${Math.floor(Date.now() / 86_400_000)}`;
    const last = input.cache.get(VIEW);
    if (last?.key === viewKey) {
      counters.hits += last.view.inputs.length;
      return { ...last.view, section: { ...last.view.section, source: last.source(last.view.inputs.length) } };
    }
    const dropped = frames.filter((_, i) => !chosen.includes(i)).reduce((n, f) => n + f.length, 0);
    const inputs: PlainInput[] = [];
    let hits = 0;
    for (const [k, i] of chosen.entries()) {
      const f = frames[i]!;
      const key = keys[i]!;
      let image = cachedFrame(input.db, key);
      if (image === undefined) {
        const r = renderFrame(drawnFrame(laid, i));
        image = cacheFrame(input.db, key, r.png, r.width, r.height);
        counters.rendered += 1;
      } else {
        hits += 1;
        counters.hits += 1;
      }
      const rows = rowsIn(state.marks, f.start, f.start + f.length);
      const where = rows === undefined ? '' : ` · rows #${rows.first}-#${rows.last}`;
      // Dropped frames lie between the first frame and the newest; with room for one frame only,
      // the newest is shown and everything before it is dropped.
      const gap = k === 0 && dropped > 0 ? ` · ${dropped} characters of older history ${i === 0 ? 'after' : 'before'} this frame are not shown (transcript_read reads them)` : '';
      inputs.push({
        role: 'user',
        content: [
          { type: 'text', text: `[archive frame ${i + 1} of ${frames.length}${where}${gap}]` },
          { type: 'image', hash: image.hash, media_type: 'image/png', width: image.width, height: image.height },
        ],
      });
    }
    const shape = frames[0] === undefined ? '' : `, ${frames[0].width}x${frames[0].height} px`;
    const source = (cached: number) => `snapcompact archive: ${chosen.length} of ${frames.length} frame(s), ${name} shape${shape}, ${cached} cached, ${dropped} characters dropped`;
    const view: FramesView = {
      inputs,
      section: { name: 'frames', source: source(hits), estimated_tokens: inputsTokens(inputs, input.target.maxImageEdgePx) },
      notes: [],
    };
    input.cache.set(VIEW, { key: viewKey, view, source });
    return view;
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    const text = `[snapcompact archive of ${state.length} characters withheld from this request: its frames could not be rendered; transcript_read and transcript_grep read that history]`;
    const inputs: PlainInput[] = [{ role: 'user', content: [{ type: 'text', text }] }];
    return {
      inputs,
      section: { name: 'frames', source: 'snapcompact archive withheld (rendering failed)', estimated_tokens: inputsTokens(inputs) },
      notes: [`snapcompact could not render its frames (${why}); the archive was left out of this request`],
    };
  }
}

function keptFoldInputs(folds: readonly KeptFold[]): PlainInput[] {
  return folds.map((f) => ({ role: 'user', content: [{ type: 'text', text: foldText(f) }] }));
}

function build(input: StrategyInput, state: ArchiveState | undefined, located: LocatedCut, notes: string[]): Projection {
  const { folds, rest } = priorTail(input, located);
  const inputs: PlainInput[] = [];
  const sections: Section[] = [];
  const allNotes = [...notes];
  const kept = [...(state?.folds ?? []), ...folds];
  if (kept.length > 0) {
    const foldInputs = keptFoldInputs(kept);
    inputs.push(...foldInputs);
    sections.push({ name: 'folds', source: `${kept.length} stored fold(s) from ${[...new Set(kept.map((f) => f.source))].join(', ')}`, estimated_tokens: inputsTokens(foldInputs) });
  }
  const { inputs: tail, tokens: tailTokens } = projectTail(input, rest);
  if (state !== undefined && state.length > 0) {
    const view = framesOf(input, state);
    inputs.push(...view.inputs);
    sections.push(view.section);
    allNotes.push(...view.notes);
  }
  inputs.push(...tail);
  if (rest.length > 0) sections.push({ name: 'tail', source: `rows #${rest[0]!.seq}-#${rest[rest.length - 1]!.seq} (${rest.length} rows, verbatim)`, estimated_tokens: tailTokens });
  const estimate = input.pinnedTokens + sections.reduce((n, sec) => n + sec.estimated_tokens, 0);
  // Frames are large and snapcompact's trigger is high (90%): a request the layers' reserve
  // would carry past the window is due even below the trigger. The frames shown never change
  // between compactions, so the request prefix stays cached.
  const due = isDue(estimate, input.window) || overWindow(estimate + (input.window.reserved ?? 0), input.window);
  return { inputs, sections, estimate, due, notes: allNotes };
}

const TEXT_FALLBACK = 'the model reads no images: snapcompact uses the running-summary text compaction for it; the frame archive stays saved for a model that reads images';
const NO_ROOM_FALLBACK = 'the window has no room for a single frame within archivePercent: snapcompact uses the running-summary text compaction; the frame archive stays saved for a larger window';

/** Why this request is compacted as text instead of frames, or null for frames. */
function textFallback(input: StrategyInput): string | null {
  if (!input.target.readsImages) return TEXT_FALLBACK;
  let g: Geometry;
  try {
    g = geometryOf(input);
  } catch {
    // A geometry that cannot be drawn is a render failure: framesOf withholds the archive and says why.
    return null;
  }
  return frameBudget(input, imageTokens(g.frameWidth, g.rows * g.pitch, input.target.maxImageEdgePx)) === 0 ? NO_ROOM_FALLBACK : null;
}

function project(input: StrategyInput): Projection {
  const r = resolveArchive(input);
  return build(input, r.state, r.located, r.notes);
}

function warm(input: StrategyInput): Promise<void> | undefined {
  const r = resolveArchive(input);
  const tail = warmTail(input, warmPriorTail(input, r.located), () => priorTail(input, r.located).rest);
  const frames = r.state === undefined || r.state.length === 0 ? undefined : warmFrames(input, r.state);
  if (frames === undefined) return tail;
  return tail === undefined ? frames : Promise.all([tail, frames]).then(() => undefined);
}

/**
 * A kernel with no layout of the archive for this shape (the first request after a restart, or
 * after a switch to another model family) lays it out and renders the frames it shows in slices
 * before the projection, which would otherwise do all of it in one stretch. Undefined when the
 * layout is there. A frame that cannot be rendered is left to the projection, which withholds
 * the archive with a note (framesOf).
 */
function warmFrames(input: StrategyInput, state: ArchiveState): Promise<void> | undefined {
  let geometry: Geometry;
  try {
    geometry = geometryOf(input);
  } catch {
    return undefined; // a geometry that cannot be drawn: framesOf says so
  }
  const key = layoutKey(state, geometry);
  if (input.cache.get(LAYOUT)?.key === key) return undefined;
  return (async () => {
    const laid = await runStepsSliced(layoutSteps(archiveParts(input.db, input.session.sid, state.range), geometry));
    input.cache.set(LAYOUT, { key, laid });
    try {
      await renderShown(input, laid, () => {});
    } catch {
      // framesOf meets the same failure on this request and reports it in the observation.
    }
  })();
}

const NOTHING_TO_ARCHIVE = 'cannot compact further without splitting the newest exchange';

/**
 * What a compaction would archive now: the cut module's eviction over the rows other folds do
 * not cover, with the tail kept to tailPercent of the window and never more than half of what
 * the trigger leaves after the pinned prompt and a full archive.
 */
function choose(input: StrategyInput, forced: boolean) {
  return runSteps(chooseSteps(input, forced));
}

/** `choose` in steps: a first compaction plans over the whole history. */
function* chooseSteps(input: StrategyInput, forced: boolean) {
  const r = resolveArchive(input);
  const { folds, rest } = priorTail(input, r.located);
  const from = folds.length === 0 || rest.length === 0 ? r.located : (locateAt(input, rest[0]!) ?? r.located);
  const memo = rowMemo(input);
  const tokens = yield* tokenCounterSteps(rest, input.target, memo.sizes, memo.inputs);
  const historyTokens = rest.reduce((n, row) => n + tokens(row), 0);
  const g = geometryOf(input);
  const full = imageTokens(g.frameWidth, g.rows * g.pitch, input.target.maxImageEdgePx);
  const archiveTokens = frameBudget(input, full) * (full + CAPTION_TOKENS);
  const kept = [...(r.state?.folds ?? []), ...folds];
  const fixed = input.pinnedTokens + inputsTokens(keptFoldInputs(kept)) + archiveTokens;
  let budget = tailBudget(input.window, historyTokens, forced);
  const room = roomUnderTrigger(input.window, fixed);
  if (room !== null) budget = Math.min(budget, Math.max(0, Math.floor(room / 2)));
  const plan = yield* planCutSteps(input, from, rest, {
    tokens,
    budget,
    settles: (tail) => input.window.window === null || !isDue(fixed + tail, input.window),
    // With the archive at its full frame budget.
    fits: (tail) => tail <= (roomUnderWindow(input.window, fixed) ?? Infinity),
  });
  return { r, folds, kept, plan, budget: frameBudget(input, full), fullFrameTokens: full, fixedBeforeFrames: fixed - archiveTokens };
}

function plan(input: StrategyInput, projection: Projection, forced: boolean): DryRun {
  const c = choose(input, forced);
  return {
    plan: {
      evict_rows: c.plan?.evicted.length ?? 0,
      evict_from_seq: c.plan?.evicted[0]?.seq ?? null,
      evict_to_seq: c.plan?.evicted[c.plan.evicted.length - 1]?.seq ?? null,
      tail_rows: c.plan?.tail.length ?? 0,
      estimated_tokens_before: projection.estimate,
      // Frames are drawn from the archive text only at the next request; the bound is the budget.
      estimated_tokens_after: projection.estimate,
    },
    reason: c.plan === undefined ? NOTHING_TO_ARCHIVE : null,
  };
}

async function compact(input: StrategyInput, projection: Projection, opts: CompactOptions): Promise<CompactOutcome> {
  // Planning, archiving and laying out read the whole history on a first compaction: in slices.
  const stop = (): void => opts.signal?.throwIfAborted();
  const c = await runStepsSliced(chooseSteps(input, opts.forced), stop);
  if (c.plan === undefined) return nothingCompacted(NOTHING_TO_ARCHIVE);
  const cut = c.plan;
  const base = c.r.state;
  const grown = await runStepsSliced(growArchiveSteps(base?.length ?? 0, base?.marks ?? [], cut.evicted), stop);
  const { db } = input;
  const sid = input.session.sid;
  // Sized before anything is written: the frames the new archive shows within the budget, at
  // a full frame each, the kept folds and the tail. An archive that would not make the request
  // smaller (a small window, where one frame outweighs the text it replaces) is not saved.
  const geometry = geometryOf(input);
  const laid = await runStepsSliced(grownLayoutSteps(input, base, grown.added, geometry), stop);
  const shown = Math.min(laid.frames.length, c.budget);
  const after = c.fixedBeforeFrames + shown * (c.fullFrameTokens + CAPTION_TOKENS) + cut.tailTokens;
  if (after >= projection.estimate) return nothingCompacted(`nothing worth archiving yet: the request would not get smaller (~${projection.estimate} -> ~${after} tokens)`);
  // A frame cached for a compaction that is then discarded is only a cache entry; pruneFrames
  // drops it once unused.
  await renderShown(input, laid, stop);
  // The parts this compaction adds go past the saved range, where no reader looks, a turn after
  // each; the commit then names the new range. Without a readable archive to grow (none, or one
  // that no longer matches) the new one starts there too, and the commit drops the old parts.
  const from = ((base?.range ?? archiveRange(db, sid))?.last ?? -1) + 1;
  for (const [k, text] of grown.added.entries()) {
    stop();
    writeArchivePart(db, sid, from + k, text, grown.addedMarks[k]!);
    await giveWay();
  }
  const first = base === undefined ? from : base.range.first;
  // The request after the commit reads the archive and its layout from what was just made.
  const commit = (): void => {
    const partLengths = [...(base?.partLengths ?? []), ...grown.added.map((p) => p.length)];
    const saved = saveArchive(db, sid, { first, partLengths, marks: grown.marks, folds: c.kept, cut: cut.cut, hints: cut.hints });
    seedArchive(input, saved);
    input.cache.set(LAYOUT, { key: layoutKey(saved, geometry), laid });
  };
  return { compacted: true, commit, reason: null, backend: 'snapcompact', evictedRows: cut.evicted.length };
}

/** Where the history the archive does not hold begins (other extensions' folds aside). */
function tailFrom(input: StrategyInput): number {
  return resolveArchive(input).located.openerSeq;
}

/**
 * A model that reads no images, or a window with no room for one frame, gets the running-summary
 * text compaction (rolling's): the engine resolves `fallback` (strategies/harness/fallback.ts).
 */
export const snapcompact: Strategy = { name: 'snapcompact', settings: SnapcompactSettings, project, plan, compact, warm, tailFrom, fallback: { strategy: 'rolling', when: textFallback } };
