// The shared cut module as rolling uses it: cuts between exchanges inside an oversized unit,
// late tool results that land in evicted history, unreadable saved cuts, image-fit openers,
// the tail sizing that keeps a large pinned prompt from compacting every turn, and a newest
// exchange too large for the window beside its opener.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PlainInput } from '../../protocol/prepared.ts';
import type { ImagePart, RowIn, TextPart } from '../../protocol/rows.ts';
import type { Db } from '../../storage/db.ts';
import { loadRollingState, type RollingState } from '../../storage/state/rolling.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendNotice, appendRows } from '../../storage/transcript/write.ts';
import { locate, userFingerprint, type CutCache, type SavedPosition } from '../../strategies/harness/cut.ts';
import { KernelCache, cacheSlot } from '../../strategies/harness/kernel-cache.ts';
import { inspectRequest, prepareRequest } from '../../strategies/prepare.ts';
import { assistant, imageIn, pngBytes, tempDb, toolResult, user } from '../storage/factories.ts';
import { plainTarget } from '../../strategies/projection.ts';
import { lcm } from '../../strategies/lcm/lcm.ts';
import { rolling } from '../../strategies/rolling/rolling.ts';
import { argsFor, assertCallsPaired, RecordingSummarizer, sessionWithTurns, setupFor, turn } from './engine-fixtures.ts';

const WINDOW = 8000;

function stateOf(db: Db): RollingState {
  const s = loadRollingState(db, argsFor(db, 's').session.sid);
  assert.ok(s !== undefined && !('unreadable' in s) && 'format' in s.cut, 'a readable rolling state');
  return s;
}

function texts(inputs: readonly PlainInput[]): string {
  return JSON.stringify(inputs);
}

/** One exchange of an autonomous turn: the assistant calls a tool and gets ~`size` characters back. */
function exchange(i: number, size = 1200): RowIn[] {
  return [assistant(`step ${i}: reading src/part${i}.ts`, [`c${i}`]), toolResult(`c${i}`, `part ${i}: ${'const x = 1; '.repeat(Math.ceil(size / 13))}`)];
}

/** An Anthropic turn whose signed thinking precedes a call, and the call's short result. */
function signedExchange(thinking: string, signature: string, id: string): RowIn[] {
  return [
    { kind: 'assistant', provider: 'anthropic', content: [{ type: 'reasoning', provider: 'anthropic', text: thinking, encrypted: signature }, { type: 'tool_call', id, name: 'read_file', arguments: { path: 'src/parser.ts' } }] },
    toolResult(id, 'export function parse() {}'),
  ];
}

/** A session whose only unit is one prompt followed by `n` exchanges. */
async function autonomousSession(db: Db, n: number): Promise<void> {
  openSession(db, { session: 's' });
  await appendRows(db, 's', [user('refactor the whole billing module and keep the tests green')]);
  for (let i = 0; i < n; i++) await appendRows(db, 's', exchange(i));
}

describe('cuts between exchanges', () => {
  test('a single oversized unit is cut between exchanges: the prompt stays first, calls keep results, the request fits', async (t) => {
    const db = tempDb(t);
    await autonomousSession(db, 40);
    const setup = setupFor({ window: WINDOW });
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, true, out.observation.failure ?? '');
    assert.ok(out.observation.estimated_input_tokens * 100 < WINDOW * 80, `under the trigger: ${out.observation.estimated_input_tokens}`);
    const cut = stateOf(db).cut;
    assert.ok('format' in cut && (cut.exchanges ?? 0) > 0 && cut.users === 0, JSON.stringify(cut));
    // Summary, then the opening prompt verbatim, then the newest exchanges.
    const tailStart = out.inputs.findIndex((i) => JSON.stringify(i).includes('refactor the whole billing module'));
    assert.ok(tailStart > 0, 'the prompt that opened the unit is in the request');
    assert.equal(out.inputs[tailStart + 1]!.role, 'assistant');
    assert.ok(!texts(out.inputs).includes('step 0:'), 'the oldest exchange left the tail');
    assert.ok(texts(out.inputs).includes('step 39:'), 'the newest exchange stayed');
    assertCallsPaired(out.inputs);
  });

  test('the unit keeps growing: later compactions cut deeper into it, and a fresh kernel sends the same bytes', async (t) => {
    const db = tempDb(t);
    await autonomousSession(db, 30);
    const setup = setupFor({ window: WINDOW });
    const cache = new KernelCache();
    assert.equal((await prepareRequest(setup, argsFor(db, 's', { cache }))).compacted, true);
    const first = stateOf(db).cut;
    for (let i = 30; i < 60; i++) await appendRows(db, 's', exchange(i));
    const again = await prepareRequest(setup, argsFor(db, 's', { cache }));
    assert.equal(again.compacted, true);
    const second = stateOf(db).cut;
    assert.ok('format' in first && 'format' in second && (second.exchanges ?? 0) > (first.exchanges ?? 0));
    assertCallsPaired(again.inputs);
    // A restart: new kernel, same request.
    const fresh = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(fresh.compacted, false);
    assert.equal(texts(fresh.inputs), texts(again.inputs));
  });

  test('an exchange-level cut survives a provider change, and a rewritten prompt resets it', async (t) => {
    const db = tempDb(t);
    await autonomousSession(db, 40);
    const setup = setupFor({ window: WINDOW });
    const out = await prepareRequest(setup, { ...argsFor(db, 's'), provider: 'anthropic' });
    assert.equal(out.compacted, true);
    const summary = (o: { sections: Array<{ name: string; source: string }> }) => o.sections.find((s) => s.name === 'summary')?.source;
    const other = inspectRequest(setup, { ...argsFor(db, 's'), provider: 'openai' });
    assert.equal(summary(other), summary(out.observation));
    assert.match(summary(other) ?? '', /and the first \d+ exchange\(s\) after it/);
    // An evicted exchange is rewritten: that part of the cut no longer matches, and the tail
    // starts again at the unit (the summary is kept; nothing is lost).
    const sid = argsFor(db, 's').session.sid;
    db.prepare("UPDATE transcript SET body = json_set(body, '$.content[0].text', 'rewritten') WHERE seq = (SELECT min(seq) FROM transcript WHERE sid = ? AND kind = 'assistant')").run(sid);
    db.prepare('UPDATE sessions SET rewrites = rewrites + 1 WHERE sid = ?').run(sid);
    const reset = inspectRequest(setup, argsFor(db, 's'));
    assert.ok(reset.notes.some((n) => /changed; the tail starts again at that unit/.test(n)), JSON.stringify(reset.notes));
    assert.match(reset.sections.find((s) => s.name === 'tail')!.source, /^rows #1-/);
  });

  test('whole units are cut whenever they suffice', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    await prepareRequest(setupFor({ window: WINDOW }), argsFor(db, 's'));
    const cut = stateOf(db).cut;
    assert.ok('format' in cut && cut.exchanges === undefined && cut.users > 0);
  });

  test('a late result in an evicted exchange puts the whole unit back in the tail; nothing is lost', async (t) => {
    const db = tempDb(t);
    openSession(db, { session: 's' });
    await appendRows(db, 's', [user('run the migration and fix what breaks'), assistant('starting a slow job', ['slow'])]);
    for (let i = 0; i < 40; i++) await appendRows(db, 's', exchange(i));
    const setup = setupFor({ window: WINDOW });
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.ok(!texts(out.inputs).includes('starting a slow job'), 'the call was evicted');
    await appendRows(db, 's', [toolResult('slow', 'the slow job finished: 3 rows migrated')]);
    const seen = inspectRequest(setup, argsFor(db, 's'));
    assert.ok(seen.notes.some((n) => /changed; the tail starts again at that unit/.test(n)), JSON.stringify(seen.notes));
    const again = await prepareRequest(setup, argsFor(db, 's'));
    assert.ok(texts(again.inputs).includes('the slow job finished') || again.compacted, 'the result is sent, or summarized by a new compaction');
  });
});

describe('saved cuts that no longer fit', () => {
  test('a late result whose call was evicted with a whole unit moves the cut back to that unit', async (t) => {
    const db = tempDb(t);
    openSession(db, { session: 's' });
    await appendRows(db, 's', [user('start the long build'), assistant('kicking off the build', ['build'])]);
    await sessionWithTurnsInto(db, 40);
    const setup = setupFor({ window: WINDOW });
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, true);
    assert.ok(!texts(out.inputs).includes('kicking off the build'));
    await appendRows(db, 's', [toolResult('build', 'BUILD FAILED: missing symbol parse_invoice')]);
    const seen = inspectRequest(setup, argsFor(db, 's'));
    assert.ok(seen.notes.some((n) => /arrived after its call was evicted/.test(n)), JSON.stringify(seen.notes));
    assert.match(seen.sections.find((s) => s.name === 'tail')!.source, /^rows #1-/, "the tail starts again at the call's unit");
    // The next compaction reads the late result, so the summary carries it.
    const summarizer = new RecordingSummarizer();
    const again = await prepareRequest(setupFor({ window: WINDOW, summarizer }), argsFor(db, 's'));
    assert.equal(again.compacted, true);
    assert.ok(summarizer.calls.some((c) => c.prompt.includes('BUILD FAILED: missing symbol parse_invoice')));
    assertCallsPaired(again.inputs);
  });

  test('a saved cut this build cannot read is ignored, said in /context, and replaced by the next compaction', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 40);
    const setup = setupFor({ window: WINDOW });
    assert.equal((await prepareRequest(setup, argsFor(db, 's'))).compacted, true);
    const sid = argsFor(db, 's').session.sid;
    db.prepare(`UPDATE rolling_state SET cut = '{"format": 9, "users": "many"}' WHERE sid = ?`).run(sid);
    const seen = inspectRequest(setup, argsFor(db, 's'));
    assert.ok(seen.notes.some((n) => /cannot be read/.test(n)), JSON.stringify(seen.notes));
    assert.ok(!seen.sections.some((s) => s.name === 'summary'));
    const out = await prepareRequest(setup, argsFor(db, 's'));
    assert.equal(out.compacted, true, 'the next compaction replaces it');
    assert.ok('format' in stateOf(db).cut);
  });

  test('a cut that opens on an image-fit notice is found again after rows moved', async (t) => {
    const db = tempDb(t);
    openSession(db, { session: 's' });
    const sid = argsFor(db, 's').session.sid;
    const png = await pngBytes(40, 40);
    await appendRows(db, 's', [user('look at this', { images: [imageIn(png, 'image/png')] }), assistant('seen', ['late'])]);
    await appendRows(db, 's', [user('second request'), assistant('ok')]);
    const small = await pngBytes(20, 20);
    const [fitted] = (await appendRows(db, 's', [user('fit source', { images: [imageIn(small, 'image/png')] })])).seqs;
    type UserBody = { content: [TextPart, ImagePart] };
    const [, to] = (JSON.parse(db.prepare('SELECT body FROM transcript WHERE seq = ?').pluck().get(fitted) as string) as UserBody).content;
    const [, from] = (JSON.parse(db.prepare("SELECT body FROM transcript WHERE sid = ? AND row_class = 'user' ORDER BY seq LIMIT 1").pluck().get(sid) as string) as UserBody).content;
    const fitSeq = appendNotice(db, sid, { notice: 'image_fit', from_hash: from.hash, to, reason: 'test' });
    await appendRows(db, 's', [assistant('after the fit')]);
    // A cut before the fit notice: 3 user inputs before it, then the first fit after the last of them.
    const saved: SavedPosition = {
      cut: { format: 2, users: 3, fingerprint: '', fits: 1 },
      hints: { openerSeq: fitSeq, resumeSeq: fitSeq },
      rewrites: -1,
      savedAt: 1,
    };
    saved.cut.fingerprint = userFingerprint(inputFor(db), 3)!;
    // Rows move (a late result settles), so the slow path must find the fit again.
    await appendRows(db, 's', [toolResult('late', 'done')]);
    const located = locate(inputFor(db), cacheSlot<CutCache>('test.cuts'), saved);
    assert.ok(located !== undefined);
    const opener = db.prepare('SELECT row_class FROM transcript WHERE seq = ?').pluck().get(located.openerSeq);
    assert.equal(opener, 'image_fit', 'the tail opens on the fit notice (moved one seq on), not after it');
    assert.equal(located.openerSeq, fitSeq + 1);
  });
});

describe('tail sizing', () => {
  test('a pinned prompt that takes half the window does not make every turn compact', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 12);
    const summarizer = new RecordingSummarizer();
    const setup = setupFor({ window: WINDOW, summarizer });
    const cache = new KernelCache();
    const instructions = 'Follow the house rules. '.repeat(700); // ~4,200 tokens
    let compactions = 0;
    for (let i = 12; i < 24; i++) {
      const out = await prepareRequest(setup, argsFor(db, 's', { cache, instructions }));
      if (out.compacted) compactions += 1;
      assert.ok(out.observation.estimated_input_tokens <= WINDOW, 'every request fits');
      await appendRows(db, 's', [user(`request ${i}: small change ${i}`), assistant(`done ${i}`)]);
    }
    assert.ok(compactions >= 1 && compactions <= 6, `compacted ${compactions} of 12 turns`);
  });
});

describe('a newest exchange the provider needs whole', () => {
  test('a long signed thinking block in the newest exchange gets a shorter summary, so the request still fits', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 30);
    const thinking = 'weighing the options for the parser rewrite; '.repeat(360); // ~4,000 tokens, signed
    await appendRows(db, 's', [
      user('now rewrite the parser'),
      ...signedExchange(thinking, 'sig-1', 'p1'),
    ]);
    const summarizer = new RecordingSummarizer();
    const window = 4700; // its usual summary cap is a tenth: 470 tokens
    const out = await prepareRequest(setupFor({ window, summarizer }), { ...argsFor(db, 's'), provider: 'anthropic' });
    assert.equal(out.compacted, true, out.observation.failure ?? '');
    assert.ok(JSON.stringify(out.inputs).includes('sig-1'), 'the signed block goes back whole');
    assert.ok(out.observation.estimated_input_tokens <= window, `fits: ${out.observation.estimated_input_tokens}`);
    assert.ok(summarizer.calls.every((c) => c.maxOutputTokens < 470), `the summary was asked shorter than its usual 470: ${summarizer.calls.map((c) => c.maxOutputTokens).join(',')}`);
  });
});

describe('a newest exchange that cannot fit the window beside its opener', () => {
  // A pinned prompt of ~1,500 tokens: with a 4,700-token window the newest exchange below has
  // ~3,000 tokens left even with no summary at all.
  const instructions = `You are a coding agent. ${'Follow the house rules for every change you make. '.repeat(115)}`;
  const window = 4700;

  /** Prepares, then checks what every request from the first due one on must hold. */
  async function prepareFits(db: Db, setup: ReturnType<typeof setupFor>) {
    const out = await prepareRequest(setup, { ...argsFor(db, 's', { instructions }), provider: 'anthropic' });
    assert.ok(out.observation.estimated_input_tokens <= window, `fits: ${out.observation.estimated_input_tokens} of ${window} (${out.observation.failure ?? 'no failure'})`);
    assert.equal(out.observation.latched, false);
    assertCallsPaired(out.inputs);
    return out;
  }

  test('many capped tool results of one turn leave with their call; the next exchange extends the request', async (t) => {
    const db = tempDb(t);
    await sessionWithTurns(db, 's', 20);
    const ids = Array.from({ length: 24 }, (_, i) => `r${i}`);
    await appendRows(db, 's', [
      user('now read every billing module'),
      assistant('reading all of them at once', ids),
      ...ids.map((id) => toolResult(id, `${id}: ${'export const rate = 1; '.repeat(200)}`)), // ~1,150 tokens each, held to 128
    ]);
    const summarizer = new RecordingSummarizer();
    const setup = setupFor({ window, summarizer });
    const out = await prepareFits(db, setup);
    assert.equal(out.compacted, true, out.observation.failure ?? '');
    assert.ok(!texts(out.inputs).includes('"r0"'), 'the call and its results left together');
    assert.ok(texts(out.inputs.slice(-1)).includes('now read every billing module'), 'the opener stays verbatim, last');
    assert.ok(summarizer.calls.some((c) => c.prompt.includes('reading all of them at once')), 'the evicted exchange was summarized');

    // The agent goes on: the next exchange lands after the opener, on a stable prefix.
    await appendRows(db, 's', exchange(99, 400));
    const next = await prepareFits(db, setup);
    assert.equal(next.compacted, false, next.observation.failure ?? '');
    assert.deepEqual(next.inputs.slice(0, out.inputs.length), out.inputs, 'the previous request is a prefix');
    assert.ok(texts(next.inputs).includes('"c99"'));
  });

  for (const strategy of [rolling, lcm]) {
    test(`${strategy.name}: a long signed thinking block leaves whole with its exchange instead of going over the window`, async (t) => {
      const db = tempDb(t);
      await sessionWithTurns(db, 's', 20);
      const thinking = 'weighing the options for the parser rewrite; '.repeat(330); // ~3,700 tokens, signed
      await appendRows(db, 's', [
        user('now rewrite the parser'),
        ...signedExchange(thinking, 'sig-1', 'p1'),
      ]);
      const out = await prepareFits(db, setupFor({ window, strategy }));
      assert.equal(out.compacted, true, out.observation.failure ?? '');
      assert.ok(!texts(out.inputs).includes('sig-1'), 'the signed block is not cut: it left with its turn');
      assert.ok(!texts(out.inputs).includes('"p1"'), 'its call and result left together');
    });
  }

  test('with nothing left to evict, a summary that no longer leaves room is written again shorter', async (t) => {
    const db = tempDb(t);
    // Units larger than the tail budget: the opener alone is the tail after this compaction,
    // under a summary at its cap (470 tokens).
    await sessionWithTurns(db, 's', 6, 3000);
    await appendRows(db, 's', [user('now rewrite the parser')]);
    const summarizer = new RecordingSummarizer();
    summarizer.answer = (req) => `summary: ${'kept facts '.repeat(Math.floor((req.maxOutputTokens * 4) / 11) - 2)}`;
    const setup = setupFor({ window, summarizer });
    const first = await prepareFits(db, setup);
    assert.equal(first.compacted, true, first.observation.failure ?? '');
    // One exchange that fits beside a short summary but not beside that one.
    const thinking = 'weighing the options for the parser rewrite; '.repeat(220); // ~2,500 tokens, signed
    await appendRows(db, 's', [
      ...signedExchange(thinking, 'sig-2', 'p2'),
    ]);
    const calls = summarizer.calls.length;
    const out = await prepareFits(db, setup);
    assert.equal(out.compacted, true, out.observation.failure ?? '');
    assert.ok(texts(out.inputs).includes('sig-2'), 'the exchange stays verbatim');
    const again = summarizer.calls.slice(calls);
    assert.equal(again.length, 1);
    assert.ok(again[0]!.maxOutputTokens < 470, `asked shorter than 470: ${again[0]!.maxOutputTokens}`);
  });
});

// The saved cut's row count is read a range of seqs at a time (unitCut); over a history longer
// than one range, with another session's rows between this one's, it is still the count of
// the rows before the opener.
test('a cut saved over a long history counts the rows before its opener exactly', { timeout: 120_000 }, async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  openSession(db, { session: 'other' });
  // 2,400 turns of 4 rows each, with 5 rows of another session after every turn: this
  // session's rows spread over some 21,600 seqs, more than one range of the count.
  for (let i = 0; i < 2400; i += 100) {
    for (let k = i; k < i + 100; k++) {
      await appendRows(db, 's', turn(k, 20));
      await appendRows(db, 'other', Array.from({ length: 5 }, (_, j) => user(`other ${k}.${j}`)));
    }
  }
  const out = await prepareRequest(setupFor({ window: WINDOW }), argsFor(db, 's', { force: true }));
  assert.equal(out.compacted, true, out.observation.failure ?? '');
  const s = stateOf(db);
  assert.ok(s.hints.openerSeq > 16_384, `the opener at #${s.hints.openerSeq} lies past one range`);
  const before = db.prepare<[number, number], number>('SELECT count(*) FROM transcript WHERE sid = ? AND seq < ?').pluck().get(argsFor(db, 's').session.sid, s.hints.openerSeq)!;
  assert.ok('rows' in s.cut);
  assert.equal(s.cut.rows, before);
});

async function sessionWithTurnsInto(db: Db, turns: number): Promise<void> {
  for (let i = 0; i < turns; i++) await appendRows(db, 's', turn(i));
}

function inputFor(db: Db) {
  const a = argsFor(db, 's');
  return {
    db,
    session: a.session,
    head: a.head,
    window: { window: WINDOW, source: 'config' as const, triggerPercent: 80, tailPercent: 25, ratio: 1 },
    settings: { triggerPercent: 80, tailPercent: 25 },
    pinnedTokens: 0,
    folds: [],
    target: plainTarget('s'),
    cache: new KernelCache(),
  };
}
