// snapcompact through the engine against a real SQLite file: evicted history as frames of the
// archive text (rendered for real and read back through sharp), the frame budget and its
// dropping rule, the cache that keeps frame bytes stable, the text fallback for a model that
// reads no images, a render failure, and the archive as text pages for another strategy.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import sharp from 'sharp';
import type { PlainInput } from '../../protocol/prepared.ts';
import { SHAPES } from '../../render/index.ts';
import type { Db } from '../../storage/db.ts';
import { getPayload } from '../../storage/images/payloads.ts';
import { loadRollingState } from '../../storage/state/rolling.ts';
import { archiveText, loadArchive, type ArchiveState } from '../../storage/state/snapcompact.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { inspectRequest, prepareRequest, previewRequest, type EngineSetup } from '../../strategies/prepare.ts';
import { textTokens } from '../../strategies/estimate.ts';
import { evictionChunkTokens } from '../../strategies/harness/units.ts';
import { rolling } from '../../strategies/rolling/rolling.ts';
import { parseSummaryPrompt } from '../../strategies/summarizer/prompt-format.ts';
import { snapcompactMemory } from '../../strategies/snapcompact/memory.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';
import { chooseFrames, frameBudget } from '../../strategies/snapcompact/snapcompact.ts';
import { plainTarget } from '../../strategies/projection.ts';
import type { StrategyInput } from '../../strategies/contract.ts';
import type { ModelEntry } from '../../strategies/catalog/models.ts';
import { tempDb } from '../storage/factories.ts';
import { recordingDb } from '../storage/recording-db.ts';
import { canonicalText, readFrame } from '../render/read-frame.ts';
import { argsFor, assertCallsPaired, RecordingSummarizer, sessionWithTurns, setupFor, strategyInput, turn } from './engine-fixtures.ts';

/** snapcompact as the engine runs it, its fallback to rolling resolved. */
const snapcompact = BUILTIN_SET.strategies.snapcompact!;

function model(id: string, provider: string, input: ModelEntry['input'], extra: Partial<ModelEntry> = {}): ModelEntry {
  return { id, provider, context_window: 200_000, input, ...extra };
}

function withModel(setup: EngineSetup, m: ModelEntry | undefined): EngineSetup {
  return { ...setup, model: m, modelId: m?.id ?? setup.modelId };
}

const images = (inputs: readonly PlainInput[]) => inputs.flatMap((i) => i.content.flatMap((p) => (p.type === 'image' ? [p] : [])));
const captions = (inputs: readonly PlainInput[]) => inputs.filter((i) => i.content.some((p) => p.type === 'image')).map((i) => (i.content[0]?.type === 'text' ? i.content[0].text : ''));

function archiveOf(db: Db, sid: number): ArchiveState {
  const a = loadArchive(db, sid);
  assert.ok(a !== undefined && !('unreadable' in a));
  return a;
}

const sidOf = (db: Db, name: string) => argsFor(db, name).session.sid;

describe('snapcompact', () => {
  test('at the trigger: the archive goes out as frames, then the tail, with no summarizer call', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 160);
    const summarizer = new RecordingSummarizer();
    const setup = withModel(setupFor({ window: 32_000, summarizer, strategy: snapcompact }), model('claude-test', 'anthropic', ['text', 'image']));
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.equal(summarizer.calls.length, 0);
    assert.deepEqual(out.observation.sections.map((s) => s.name), ['system', 'frames', 'tail']);
    const frames = images(out.inputs);
    assert.ok(frames.length >= 1);
    assert.ok(out.observation.estimated_input_tokens < 32_000 * 0.9);
    assertCallsPaired(out.inputs);
    // Each frame is a real PNG of the Claude shape whose cells read back as the archive text.
    const archive = archiveOf(db, sidOf(db, 's'));
    const first = getPayload(db, frames[0]!.hash)!;
    const meta = await sharp(first.data).metadata();
    assert.equal(meta.width, frames[0]!.width);
    assert.equal(meta.height, frames[0]!.height);
    assert.equal(frames[0]!.width, Math.floor(SHAPES.claude.frameWidth / SHAPES.claude.advance) * SHAPES.claude.advance);
    const read = await readFrame(first.data, SHAPES.claude);
    const columns = read.rows[0]!.length;
    const expected = canonicalText(archiveText(db, sidOf(db, 's'), archive).replaceAll('\n', '⏎')).slice(0, columns * 3);
    assert.equal(read.rows.slice(0, 3).join(''), expected, 'the first frame draws the start of the archive');
    assert.match(captions(out.inputs)[0]!, /^\[archive frame 1 of \d+ · rows #1-#\d+/);
    assert.match(archiveText(db, sidOf(db, 's'), archive), /^¶user: request 0: please fix src\/module0\.ts/);
  });

  test('frame bytes stay identical across prepares until the archive grows, and come from the cache', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 160);
    const setup = withModel(setupFor({ window: 32_000, strategy: snapcompact }), model('claude-test', 'anthropic', ['text', 'image']));
    const cache = new KernelCache();
    const a = await prepareRequest(setup, argsFor(db, 's', { cache }));
    await appendRows(db, 's', turn(160));
    const b = await prepareRequest(setup, argsFor(db, 's', { cache }));
    assert.equal(b.compacted, false);
    assert.deepEqual(images(b.inputs).map((i) => i.hash), images(a.inputs).map((i) => i.hash));
    const source = b.observation.sections.find((s) => s.name === 'frames')!.source;
    const m = /(\d+) of \d+ frame\(s\).*, (\d+) cached/.exec(source);
    assert.ok(m !== null && m[1] === m[2], `every frame shown came from the cache: ${source}`);
  });

  test('a later compaction stores only the text it adds, and the request it sends is what a fresh kernel reads back', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 160);
    const setup = withModel(setupFor({ window: 32_000, strategy: snapcompact }), model('claude-test', 'anthropic', ['text', 'image']));
    const cache = new KernelCache();
    assert.equal((await prepareRequest(setup, argsFor(db, 's', { cache, force: true }))).compacted, true);
    const parts = () => db.prepare<[], { part: number; text: string }>('SELECT part, text FROM snapcompact_text ORDER BY part').all();
    const first = parts();
    assert.equal(first.length, 1);
    for (let i = 160; i < 200; i++) await appendRows(db, 's', turn(i));
    const out = await prepareRequest(setup, argsFor(db, 's', { cache, force: true }));
    assert.equal(out.compacted, true);
    const second = parts();
    assert.deepEqual(second.slice(0, 1), first, 'the first part is kept as it was written');
    assert.equal(second.length, 2);
    assert.match(second[1]!.text, /^\n¶user: request 1\d\d:/);
    const sid = sidOf(db, 's');
    assert.equal(second.map((p) => p.text).join(''), archiveText(db, sid, archiveOf(db, sid)));
    // The compacting kernel sent frames from the state and layout it had just made.
    const fresh = previewRequest(setup, argsFor(db, 's', { cache: new KernelCache() }));
    assert.deepEqual(out.inputs, fresh.inputs);
  });

  test('a layout extended compaction after compaction from its last frame is the layout a fresh kernel makes of the whole archive', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 120, 700);
    // A small frame shape: many frames, several frames' worth added by each compaction.
    const setup = withModel(setupFor({ window: 32_000, strategy: snapcompact }), model('claude-test', 'anthropic', ['text', 'image']));
    const cache = new KernelCache();
    for (let round = 0; round < 5; round++) {
      const out = await prepareRequest(setup, argsFor(db, 's', { cache, force: true }));
      assert.equal(out.compacted, true, `round ${round}`);
      const fresh = previewRequest(setup, argsFor(db, 's', { cache: new KernelCache() }));
      assert.deepEqual(out.inputs, fresh.inputs, `round ${round}: the same frames, captions and tail`);
      for (let i = 0; i < 30; i++) await appendRows(db, 's', turn(1000 + round * 30 + i, 700));
    }
  });

  test('a prepare with an unchanged archive reads neither the archive row nor a frame', async (t) => {
    const { db, executed } = recordingDb(tempDb(t));
    await sessionWithTurns(db, 's', 160);
    const setup = withModel(setupFor({ window: 32_000, strategy: snapcompact }), model('claude-test', 'anthropic', ['text', 'image']));
    const cache = new KernelCache();
    assert.equal((await prepareRequest(setup, argsFor(db, 's', { cache }))).compacted, true);
    await prepareRequest(setup, argsFor(db, 's', { cache }));
    executed.length = 0;
    const out = await prepareRequest(setup, argsFor(db, 's', { cache }));
    assert.equal(out.compacted, false);
    assert.ok(images(out.inputs).length >= 1);
    // The save time, through its index, is all (in the row it lies past the archive text).
    const touched = executed.filter((sql) => /snapcompact_|FROM payloads\b/.test(sql) && !/INDEXED BY snapcompact_archive_stamp/.test(sql));
    assert.deepEqual(touched, [], 'no archive, frame or payload read');
  });

  test('over the budget: the first and the newest frames stay, and the first caption says what was dropped', async (t) => {
    assert.deepEqual(chooseFrames(3, 5), [0, 1, 2]);
    assert.deepEqual(chooseFrames(10, 4), [0, 7, 8, 9]);
    assert.deepEqual(chooseFrames(10, 1), [9]);
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 400, 600);
    // Two frames at most; a large window so the trigger is the archive's, not the budget's.
    const setup = withModel(
      { ...setupFor({ window: 200_000, strategy: snapcompact }), settings: { triggerPercent: 90, tailPercent: 2, archivePercent: 20, maxFrames: 2 } as EngineSetup['settings'] },
      model('claude-test', 'anthropic', ['text', 'image']),
    );
    const out = await prepareRequest(setup, argsFor(db, 's', { force: true }));
    assert.equal(out.compacted, true);
    const c = captions(out.inputs);
    assert.equal(c.length, 2);
    const n = Number(/of (\d+)/.exec(c[0]!)![1]);
    assert.ok(n > 2, `${n} frames in the archive`);
    assert.match(c[0]!, /^\[archive frame 1 of \d+ .* (\d+) characters of older history after this frame are not shown/);
    assert.match(c[1]!, new RegExp(`^\\[archive frame ${n} of ${n} `));
  });

  test('a model that reads no images gets the running-summary text compaction; back on a vision model the same frames come from the cache', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 160);
    const summarizer = new RecordingSummarizer();
    const base = setupFor({ window: 32_000, summarizer, strategy: snapcompact });
    const vision = withModel(base, model('claude-test', 'anthropic', ['text', 'image']));
    const text = withModel(base, model('text-only', 'anthropic', ['text']));
    const a = await prepareRequest(vision, argsFor(db, 's'));
    const before = images(a.inputs).map((i) => i.hash);
    const sid = sidOf(db, 's');
    for (let i = 160; i < 220; i++) await appendRows(db, 's', turn(i));
    const b = await prepareRequest(text, argsFor(db, 's'));
    assert.equal(images(b.inputs).length, 0);
    assert.ok(b.observation.notes.some((n) => n.includes('reads no images')));
    assert.equal(b.compacted, true);
    assert.ok(summarizer.calls.length > 0, 'the text fallback summarizes');
    assert.ok(loadRollingState(db, sid) !== undefined);
    // The archive was not touched by the text compaction.
    assert.equal(archiveOf(db, sid).length > 0, true);
    // Back on the vision model (inspected, so nothing compacts): the same frames, from the cache.
    const again = await prepareRequest({ ...vision, strategy: { ...snapcompact, compact: () => Promise.reject(new Error('not expected')) } }, argsFor(db, 's'));
    assert.deepEqual(images(again.inputs).map((i) => i.hash), before);
  });

  test('a window with no room for one frame within archivePercent gets the text compaction instead', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const summarizer = new RecordingSummarizer();
    // 20% of 5000 tokens is less than one Claude frame (~1,500 tokens).
    const setup = withModel(
      { ...setupFor({ window: 5000, summarizer, strategy: snapcompact }), settings: { contextWindowTokens: 5000, triggerPercent: 90, tailPercent: 10, archivePercent: 20 } as EngineSetup['settings'] },
      model('claude-test', 'anthropic', ['text', 'image']),
    );
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.equal(images(out.inputs).length, 0);
    assert.ok(out.observation.notes.some((n) => n.includes('no room for a single frame')));
    assert.ok(summarizer.calls.length > 0);
    assert.equal(loadArchive(db, sidOf(db, 's')), undefined, 'no archive was written that no request could show');
  });

  test("an archive made under one shape re-renders in another model family's shape", async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 160);
    const base = setupFor({ window: 32_000, strategy: snapcompact });
    const claude = await prepareRequest(withModel(base, model('claude-test', 'anthropic', ['text', 'image'])), argsFor(db, 's'));
    const gpt = inspectRequest(withModel(base, model('gpt-5-test', 'openai', ['text', 'image'])), argsFor(db, 's'));
    const cw = images(claude.inputs)[0]!;
    assert.equal(cw.height % SHAPES.claude.pitch, 0);
    assert.match(gpt.sections.find((s) => s.name === 'frames')!.source, /gpt shape, 1568x\d+ px/);
  });

  test('a switch to another shape lays the archive out and renders its frames before the projection, which then draws none', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 160);
    const base = setupFor({ window: 32_000, strategy: snapcompact });
    const cache = new KernelCache();
    assert.equal((await prepareRequest(withModel(base, model('claude-test', 'anthropic', ['text', 'image'])), argsFor(db, 's', { cache }))).compacted, true);
    const gpt = withModel(base, model('gpt-5-test', 'openai', ['text', 'image']));
    const frames = () => db.prepare<[], number>('SELECT count(*) FROM snapcompact_frames').pluck().get() ?? 0;
    const before = frames();
    const out = await prepareRequest(gpt, argsFor(db, 's', { cache }));
    assert.equal(out.compacted, false);
    const source = out.observation.sections.find((x) => x.name === 'frames')!.source;
    const m = /(\d+) of \d+ frame\(s\), gpt shape.*, (\d+) cached/.exec(source);
    assert.ok(m !== null && Number(m[1]) > 0 && m[1] === m[2], `every frame shown was rendered ahead and found in the cache: ${source}`);
    assert.equal(frames() - before, Number(m[1]), 'the gpt frames were rendered once, ahead of the projection');
  });

  test('a render failure withholds the archive with a note and never fails the turn', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 160);
    const base = setupFor({ window: 32_000, strategy: snapcompact });
    await prepareRequest(withModel(base, model('claude-test', 'anthropic', ['text', 'image'])), argsFor(db, 's'));
    // An image edge no geometry accepts: rendering throws inside the projection.
    const broken = withModel(base, { ...model('claude-test', 'anthropic', ['text', 'image']), max_image_edge_px: 0 });
    await appendRows(db, 's', turn(160));
    const out = await prepareRequest(broken, argsFor(db, 's'));
    assert.equal(images(out.inputs).length, 0);
    assert.ok(out.inputs.some((i) => i.content.some((p) => p.type === 'text' && /archive of \d+ characters withheld/.test(p.text))));
    assert.ok(out.observation.notes.some((n) => n.includes('could not render its frames')));
  });

  test('after a switch to rolling the archive arrives as text pages standing in for exactly its rows', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 160);
    const base = setupFor({ window: 32_000, strategy: snapcompact });
    await prepareRequest(withModel(base, model('claude-test', 'anthropic', ['text', 'image'])), argsFor(db, 's'));
    const sid = sidOf(db, 's');
    const archive = archiveOf(db, sid);
    const out = await prepareRequest({ ...setupFor({ window: 200_000, strategy: rolling, folds: [snapcompactMemory] }) }, argsFor(db, 's'));
    const folds = out.observation.sections.find((s) => s.name === 'folds');
    assert.ok(folds !== undefined, out.observation.sections.map((s) => s.name).join());
    assert.match(folds.source, /stored fold\(s\) from snapcompact-memory over rows #1-#\d+/);
    const tail = out.observation.sections.find((s) => s.name === 'tail')!;
    assert.match(tail.source, new RegExp(`^rows #${archive.hints.openerSeq}-`));
    // The pages together are the archive text, in order, each numbered.
    const pages = out.inputs.flatMap((i) => i.content.flatMap((p) => (p.type === 'text' && p.text.includes('snapcompact archive page') ? [p.text] : [])));
    assert.ok(pages.length > 1);
    pages.forEach((p, k) => assert.match(p, new RegExp(`snapcompact archive page ${k + 1} of ${pages.length};`)));
    const joined = pages.map((p) => p.slice(p.indexOf(']\n', p.indexOf('archive page')) + 2)).join('\n');
    assert.equal(joined, archiveText(db, sid, archive));
  });

  test('after a switch to rolling an archive larger than the window is summarized in chunks of at most half the window', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 20);
    const window = 30_000;
    const vision = withModel(setupFor({ window, strategy: snapcompact }), model('claude-test', 'anthropic', ['text', 'image']));
    let compactions = 0;
    for (let i = 20; compactions < 3 && i < 400; i++) {
      await appendRows(db, 's', turn(i));
      if ((await prepareRequest(vision, argsFor(db, 's'))).compacted) compactions += 1;
    }
    assert.equal(compactions, 3);
    const archive = archiveOf(db, sidOf(db, 's'));
    // The pages as the fold plugin hands them to rolling, without their headers.
    const pages = snapcompactMemory.prior(strategyInput(db, new KernelCache()), [], 1).folds.map((f) => ({ text: f.text.slice(f.text.indexOf(']\n') + 2) }));
    assert.equal(pages.map((p) => p.text).join('\n'), archiveText(db, sidOf(db, 's'), archive));
    const pagesTokens = pages.reduce((n, p) => n + textTokens(p.text), 0);
    assert.ok(pagesTokens > window, `the archive as text (~${pagesTokens} tokens) is more than the window`);
    const summarizer = new RecordingSummarizer();
    const out = await prepareRequest(setupFor({ window, strategy: rolling, folds: [snapcompactMemory], summarizer }), argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.ok(out.observation.estimated_input_tokens <= window, `${out.observation.estimated_input_tokens} tokens`);
    const transcripts = summarizer.calls.map((c) => parseSummaryPrompt(c.prompt).transcript);
    assert.ok(transcripts.length > 1, `${transcripts.length} call(s)`);
    for (const [i, tr] of transcripts.entries()) {
      assert.ok(textTokens(tr) <= evictionChunkTokens(window), `call ${i}: ~${textTokens(tr)} tokens over the ${evictionChunkTokens(window)}-token chunk limit`);
    }
    // Every page reaches the summarizer, in order, with the summary carried from call to call.
    const where = pages.map((p) => transcripts.findIndex((tr) => tr.includes(p.text)));
    assert.ok(where.every((k) => k >= 0), 'every page is summarized');
    assert.deepEqual([...where].sort((a, b) => a - b), where);
    summarizer.calls.slice(1).forEach((c, i) => assert.equal(parseSummaryPrompt(c.prompt).previousSummary, `summary #${i + 1}`));
  });
});

test("the frame budget takes the provider's image cap from the catalog's rule (upstream declarations, any case)", () => {
  // frameBudget reads only the settings, the target and the window of its input.
  const budget = (provider: string | undefined, maxImages?: number): number =>
    frameBudget(
      { settings: {}, target: { ...plainTarget('s'), provider, maxImages, uploadsImages: true }, window: { window: 100_000_000, source: 'config', triggerPercent: 90, tailPercent: 10, ratio: 1 } } as unknown as StrategyInput,
      1_000,
    );
  // The `claude` upstream declares 100 images: nine tenths, under the hard cap of 80.
  assert.equal(budget('claude'), 80);
  assert.equal(budget('Anthropic'), 80);
  assert.equal(budget('umans'), 10);
  assert.equal(budget('mistral'), 5);
  assert.equal(budget(undefined), 5);
  assert.equal(budget('mistral', 20), 18, 'a declared limit wins over the provider table');
});
