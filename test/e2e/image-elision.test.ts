// Image elision over the socket: a session with a screenshot in every tool result and user
// uploads, compacted automatically and by /compact under rolling, lcm and snapcompact. What
// the compacted request no longer carries loses its payload; the tail, user uploads, forks and
// everything a dry run or a failed compaction touched stay byte for byte; a crash between the
// compaction and its elision is finished by the next start.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import sharp from 'sharp';
import type { AlbedoClient } from '../../protocol/client.ts';
import type { ParamsIn, Result } from '../../protocol/methods.ts';
import { ELIDED_IMAGE_TEXT } from '../../storage/transcript/row-text.ts';
import { parseSummaryPrompt } from '../../strategies/summarizer/prompt-format.ts';
import { assertCallsPaired } from '../strategies/engine-fixtures.ts';
import { startEach, tempHome, type DaemonHandle } from './harness.ts';

const start = startEach();
const MODEL = 'claude-sonnet-4-5';
type Prepared = Result<'prepare'>;
type Rows = ParamsIn<'transcript.append'>['rows'];

/** A small PNG unique to `n` (its size and colour), so each screenshot has its own payload. */
function screenshot(n: number): Promise<Buffer> {
  return sharp({ create: { width: 64 + (n % 50), height: 40 + Math.floor(n / 50), channels: 3, background: { r: n % 256, g: (n * 7) % 256, b: 90 } } })
    .png()
    .toBuffer();
}

async function turn(i: number): Promise<Rows> {
  const upload = i % 10 === 3 ? [{ type: 'image' as const, media_type: 'image/png' as const, data: (await screenshot(1000 + i)).toString('base64') }] : [];
  return [
    { kind: 'user', key: `u${i}`, content: [{ type: 'text', text: `step ${i}: check the page at /app/view${i} and fix what looks wrong` }, ...upload] },
    { kind: 'assistant', key: `a${i}`, content: [{ type: 'tool_call', id: `shot_${i}`, name: 'screenshot', arguments: { url: `/app/view${i}` } }] },
    {
      kind: 'tool_result',
      key: `r${i}`,
      call_id: `shot_${i}`,
      content: [
        { type: 'text', text: `screenshot of /app/view${i}: layout ok, marker-${i}\n` + 'console: no errors\n'.repeat(30) },
        { type: 'image', media_type: 'image/png', data: (await screenshot(i)).toString('base64') },
      ],
    },
    { kind: 'assistant', key: `b${i}`, content: [{ type: 'text', text: `View ${i} is fine now.` }] },
  ];
}

interface StoredImage {
  seq: number;
  kind: string;
  callId: string | null;
  hash: string;
  elided: boolean;
}

/** Every image part of the session's rows, read from the db file. */
function storedImages(db: Database.Database, session: string): StoredImage[] {
  const rows = db
    .prepare("SELECT t.seq, t.kind, t.call_id, t.body FROM transcript t JOIN sessions s ON s.sid = t.sid WHERE s.name = ? AND t.kind IN ('user', 'tool_result') ORDER BY t.seq")
    .all(session) as { seq: number; kind: string; call_id: string | null; body: string }[];
  return rows.flatMap((r) => {
    const body = JSON.parse(r.body) as { content: { type: string; hash?: string; elided?: boolean }[] };
    return body.content.filter((p) => p.type === 'image').map((p) => ({ seq: r.seq, kind: r.kind, callId: r.call_id, hash: p.hash!, elided: p.elided === true }));
  });
}

/** The rows and payloads as bytes, to compare before and after an operation that must change nothing. */
function snapshot(db: Database.Database): string {
  const rows = db.prepare('SELECT seq, body, legacy_text, graphemes FROM transcript ORDER BY seq').all();
  const payloads = db.prepare('SELECT hash, bytes FROM payloads ORDER BY hash').all();
  const refs = db.prepare('SELECT hash, seq, pin_sid FROM payload_refs ORDER BY hash, seq, pin_sid').all();
  return JSON.stringify({ rows, payloads, refs });
}

function carriedCallIds(p: Prepared): Set<string> {
  return new Set(p.inputs.flatMap((i) => i.content.flatMap((c) => (c.type === 'tool_result' ? [c.call_id] : []))));
}

/** No reference names a payload that is gone. */
function assertNoDanglingRefs(db: Database.Database): void {
  const dangling = db.prepare('SELECT r.hash FROM payload_refs r LEFT JOIN payloads p ON p.hash = r.hash WHERE p.hash IS NULL').all();
  assert.deepEqual(dangling, [], 'every referenced payload is stored');
}

describe('image elision over the socket', () => {
  let d: DaemonHandle;
  let client: AlbedoClient;
  let db: Database.Database;
  const prompts: string[] = [];
  let summarizerDown = false;

  before(async () => {
    const home = tempHome();
    const window = { contextWindowTokens: 6000 };
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: window, lcm: window, snapcompact: { contextWindowTokens: 24000 } }));
    d = await start({ home });
    client = await d.connect({
      summarize: async (params) => {
        prompts.push(params.system + '\n' + params.prompt);
        if (summarizerDown) throw new Error('upstream model unavailable');
        const parts = parseSummaryPrompt(params.prompt);
        const views = [...parts.transcript.matchAll(/view(\d+)/g)].map((m) => m[1]);
        return { text: `checked views ${views[0] ?? '?'}-${views.at(-1) ?? '?'}` };
      },
    });
    db = new Database(path.join(home, 'albedo.db'), { readonly: true });
  });
  after(() => db.close());

  const prepare = (session: string): Promise<Prepared> => client.call('prepare', { session, model: MODEL, instructions: 'You fix web pages.' });

  test('compactions elide what the request no longer carries; the tail, uploads and referenced payloads stay', async () => {
    const session = 'shots';
    await client.call('session.open', { session });
    let last: Prepared | undefined;
    let compactions = 0;
    for (let i = 0; i < 60; i++) {
      await client.call('transcript.append', { session, rows: await turn(i) });
      if (i === 30) {
        const forced = await client.call('compact', { session });
        assert.equal(forced.compacted, true, '/compact compacts');
        compactions++;
      }
      last = await prepare(session);
      if (last.compacted) compactions++;
      assertCallsPaired(last.inputs);
    }
    assert.ok(compactions >= 3, `several compactions happened (${compactions})`);
    const p = last!;
    const carried = carriedCallIds(p);
    const images = storedImages(db, session);
    const results = images.filter((x) => x.kind === 'tool_result');
    const uploads = images.filter((x) => x.kind === 'user');
    assert.ok(carried.size > 0 && carried.size < 60, `the request carries some tool results (${carried.size})`);

    const payload = db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM payloads WHERE hash = ?');
    for (const img of results) {
      if (carried.has(img.callId!)) {
        assert.equal(img.elided, false, `tail row #${img.seq} keeps its image`);
        assert.equal(payload.get(img.hash)!.n, 1, `tail row #${img.seq}'s payload is stored`);
      } else {
        assert.equal(img.elided, true, `covered row #${img.seq} is elided`);
        assert.equal(payload.get(img.hash)!.n, 0, `covered row #${img.seq}'s payload is gone`);
      }
    }
    assert.ok(uploads.length >= 5);
    for (const img of uploads) {
      assert.equal(img.elided, false, 'user uploads are never elided');
      const got = await client.call('payload.get', { hash: img.hash });
      assert.equal(got.hash, img.hash);
    }
    for (const img of results.filter((x) => !x.elided)) assert.equal((await client.call('payload.get', { hash: img.hash })).hash, img.hash);
    assertNoDanglingRefs(db);

    // The request itself carries the tail's screenshots, and /context counts them with what went.
    const sentImages = p.inputs.flatMap((i) => i.content.flatMap((c) => (c.type === 'tool_result' ? c.content : [c]))).filter((c) => c.type === 'image');
    assert.equal(p.observation.images.count, sentImages.length);
    const elided = results.filter((x) => x.elided).length;
    assert.equal(p.observation.images.elided, elided);
    assert.equal(p.observation.images.payloads_deleted, elided);
    assert.ok(p.observation.images.bytes_freed > elided * 50, 'bytes freed are the payloads deleted');
    const status = await client.call('daemon.status', {});
    const stored = db.prepare('SELECT count(*) AS n, sum(bytes) AS b FROM payloads').get() as { n: number; b: number };
    assert.deepEqual(status.payloads, { count: stored.n, bytes: stored.b });

    // Reading an elided row shows the marker where the image was.
    const first = results.find((x) => x.elided)!;
    const read = await client.call('transcript_read', { session, from_seq: first.seq, to_seq: first.seq });
    assert.match(read.text, new RegExp(`marker-\\d+[\\s\\S]*\\[image [0-9a-f]{8} \\d+x\\d+\\] ${ELIDED_IMAGE_TEXT.replace(/[[\]]/g, '\\$&')}`));

    // No summarizer prompt ever carried image bytes: markers only.
    assert.ok(prompts.length >= compactions);
    for (const prompt of prompts) {
      assert.doesNotMatch(prompt, /iVBORw0KGgo|[A-Za-z0-9+/]{120,}/, 'no base64 in a summarizer prompt');
    }
  });

  test('a dry run, a failed compaction and a prepare that compacts nothing elide nothing', async () => {
    const session = 'still';
    await client.call('session.open', { session });
    for (let i = 0; i < 12; i++) await client.call('transcript.append', { session, rows: await turn(100 + i) });
    const before = snapshot(db);
    const dry = await client.call('compact', { session, dry_run: true });
    assert.ok(dry.plan !== null && dry.plan.evict_rows > 0, 'the dry run would evict rows');
    assert.equal(snapshot(db), before, 'a dry run changes nothing');
    summarizerDown = true;
    try {
      const failed = await client.call('compact', { session });
      assert.equal(failed.compacted, false);
    } finally {
      summarizerDown = false;
    }
    assert.equal(snapshot(db), before, 'a failed compaction changes nothing');
    const ok = await client.call('compact', { session });
    assert.equal(ok.compacted, true);
    const afterCompaction = snapshot(db);
    assert.notEqual(afterCompaction, before, 'a committed compaction elides');
    const reuse = await prepare(session);
    assert.equal(reuse.compacted, false);
    assert.equal(snapshot(db), afterCompaction, 'reusing the saved projection elides nothing more');
  });

  test('a fork keeps a payload while either session names it', async () => {
    const session = 'parent';
    await client.call('session.open', { session });
    for (let i = 0; i < 10; i++) await client.call('transcript.append', { session, rows: await turn(200 + i) });
    const branch = (await client.call('session.fork', { session, branch: 'child' })).session;
    assert.equal((await client.call('compact', { session })).compacted, true);
    const parent = storedImages(db, session).filter((x) => x.kind === 'tool_result');
    const child = storedImages(db, branch).filter((x) => x.kind === 'tool_result');
    const elided = parent.filter((x) => x.elided);
    assert.ok(elided.length > 0, 'the parent elided');
    assert.ok(child.every((x) => !x.elided), 'the branch keeps its images');
    for (const img of elided) assert.equal((await client.call('payload.get', { hash: img.hash })).hash, img.hash, 'the branch still names it');
    // Once the branch compacts too, nothing names those payloads any more.
    assert.equal((await client.call('compact', { session: branch })).compacted, true);
    const gone = db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM payloads WHERE hash = ?');
    const childElided = new Set(storedImages(db, branch).filter((x) => x.elided).map((x) => x.hash));
    for (const img of elided) if (childElided.has(img.hash)) assert.equal(gone.get(img.hash)!.n, 0);
    assertNoDanglingRefs(db);
  });

  for (const strategy of ['lcm', 'snapcompact']) {
    test(`${strategy} compactions elide too (the contract, not one strategy)`, async () => {
      const session = `under-${strategy}`;
      await client.call('session.open', { session });
      for (let i = 0; i < 14; i++) await client.call('transcript.append', { session, rows: await turn(300 + i) });
      const r = await client.call('compact', { session, strategy });
      assert.equal(r.compacted, true, r.reason ?? '');
      const p = await prepare(session);
      assert.equal(p.observation.strategy, strategy);
      const carried = carriedCallIds(p);
      const results = storedImages(db, session).filter((x) => x.kind === 'tool_result');
      assert.ok(results.some((x) => x.elided), 'something was elided');
      for (const img of results) assert.equal(img.elided, !carried.has(img.callId!), `row #${img.seq}`);
      assertNoDanglingRefs(db);
      if (strategy === 'snapcompact') {
        const archive = db
          .prepare<[string], string>(
            `SELECT t.text FROM snapcompact_archive a JOIN sessions s ON s.sid = a.sid JOIN snapcompact_text t ON t.sid = a.sid AND t.part BETWEEN a.first_part AND a.last_part
             WHERE s.name = ? ORDER BY t.part`,
          )
          .pluck()
          .all(session)
          .join('');
        assert.ok(archive.length > 0, 'the archive holds the evicted rows');
        assert.doesNotMatch(archive, /iVBORw0KGgo|[A-Za-z0-9+/]{120,}/, 'and never image bytes');
      }
    });
  }
});

test('a SIGKILL between the compaction and its elision loses nothing; the next start finishes the job', async () => {
  const home = tempHome();
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: 6000 } }));
  const d = await start({ home, env: { ALBEDO_FAULT: 'kill-before-elision' } });
  const client = await d.connect();
  const session = 'crash';
  await client.call('session.open', { session });
  for (let i = 0; i < 12; i++) await client.call('transcript.append', { session, rows: await turn(400 + i) });
  await assert.rejects(client.call('compact', { session }), 'the daemon died inside the compaction');
  await d.stop('SIGKILL');

  const file = path.join(home, 'albedo.db');
  let db = new Database(file, { readonly: true });
  const job = db.prepare('SELECT pending_below FROM image_elision').get() as { pending_below: number | null } | undefined;
  assert.ok(job?.pending_below != null, 'the job was stored with the compaction');
  assert.ok(storedImages(db, session).every((x) => !x.elided), 'nothing was elided yet');
  const compactions = (db.prepare('SELECT count(*) AS n FROM compactions WHERE ok = 1').get() as { n: number }).n;
  assert.equal(compactions, 1, 'the compaction itself committed');
  db.close();

  const again = await start({ home });
  db = new Database(file, { readonly: true });
  try {
    for (let tries = 0; tries < 200; tries++) {
      const pending = db.prepare('SELECT pending_below FROM image_elision').get() as { pending_below: number | null };
      if (pending.pending_below === null) break;
      await sleep(25);
    }
    const images = storedImages(db, session).filter((x) => x.kind === 'tool_result');
    assert.ok(images.some((x) => x.elided), 'the next start elided');
    const gone = db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM payloads WHERE hash = ?');
    for (const img of images) assert.equal(gone.get(img.hash)!.n, img.elided ? 0 : 1);
    assertNoDanglingRefs(db);
    const c = await again.connect();
    const p = await c.call('prepare', { session, model: MODEL, instructions: '' });
    assert.equal(p.compacted, false, 'the restart changed nothing the request depends on');
    const carried = carriedCallIds(p);
    for (const img of images) assert.equal(img.elided, !carried.has(img.callId!));
  } finally {
    db.close();
  }
});

/** Every image part a prepared request names, inside tool results too. */
function requestImageHashes(p: Prepared): string[] {
  return p.inputs.flatMap((i) => i.content.flatMap((c) => (c.type === 'tool_result' ? c.content : [c]))).flatMap((c) => (c.type === 'image' ? [c.hash] : []));
}

describe('the verbatim tail keeps its images, whatever its results answer', () => {
  let d: DaemonHandle;
  let client: AlbedoClient;
  let db: Database.Database;

  before(async () => {
    const home = tempHome();
    // A tail of 5% holds only the newest unit, so the rows under test open the tail.
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: 6000, tailPercent: 5 } }));
    d = await start({ home });
    client = await d.connect({ summarize: () => Promise.resolve({ text: 'checked the older views' }) });
    db = new Database(path.join(home, 'albedo.db'), { readonly: true });
  });
  after(() => db.close());

  /** Older history, then `newest` as the last unit; a forced prepare compacts it. */
  async function compactWithNewest(session: string, newest: Rows): Promise<Prepared> {
    await client.call('session.open', { session });
    for (let i = 0; i < 8; i++) await client.call('transcript.append', { session, rows: await turn(500 + i) });
    await client.call('transcript.append', { session, rows: newest });
    const p = await client.call('prepare', { session, model: MODEL, instructions: 'You fix web pages.', force: true });
    assert.equal(p.compacted, true, p.observation.failure ?? '');
    return p;
  }

  /** "A prepared request must never name a payload that is gone" (issue 30). */
  async function assertEveryImageServed(p: Prepared): Promise<void> {
    const hashes = requestImageHashes(p);
    assert.ok(hashes.length > 0, 'the request carries the tail image');
    for (const hash of hashes) assert.equal((await client.call('payload.get', { hash })).hash, hash, `payload ${hash.slice(0, 8)} is still served`);
    assertNoDanglingRefs(db);
  }

  test('an orphan result (no matching call) at the start of the tail keeps its image', async () => {
    const session = 'orphan-tail';
    const p = await compactWithNewest(session, [
      { kind: 'user', key: 'u-last', content: [{ type: 'text', text: 'a stray result came back' }] },
      { kind: 'tool_result', key: 'r-ghost', call_id: 'ghost', content: [{ type: 'text', text: 'late screenshot' }, { type: 'image', media_type: 'image/png', data: (await screenshot(900)).toString('base64') }] },
    ]);
    const orphan = storedImages(db, session).find((x) => x.kind === 'tool_result' && x.callId === null);
    assert.ok(orphan !== undefined, 'the result was stored as an orphan');
    assert.equal(orphan.elided, false, 'the orphan in the tail is not elided');
    assert.ok(requestImageHashes(p).includes(orphan.hash), 'the request shows its image');
    assert.ok(p.observation.images.elided > 0, 'the older screenshots were elided');
    await assertEveryImageServed(p);
  });

  test("a call id reused inside the newest unit keeps the first answer's image", async () => {
    const session = 'reused-id';
    const p = await compactWithNewest(session, [
      { kind: 'user', key: 'u-last', content: [{ type: 'text', text: 'take a screenshot, then list the files' }] },
      { kind: 'assistant', key: 'a-shot', content: [{ type: 'tool_call', id: 'call_0', name: 'screenshot', arguments: { url: '/app' } }] },
      { kind: 'tool_result', key: 'r-shot', call_id: 'call_0', content: [{ type: 'text', text: 'the page' }, { type: 'image', media_type: 'image/png', data: (await screenshot(901)).toString('base64') }] },
      { kind: 'assistant', key: 'a-ls', content: [{ type: 'tool_call', id: 'call_0', name: 'ls', arguments: { path: '.' } }] },
      { kind: 'tool_result', key: 'r-ls', call_id: 'call_0', content: [{ type: 'text', text: 'index.html app.ts' }] },
    ]);
    const shot = storedImages(db, session).filter((x) => x.callId === 'call_0');
    assert.equal(shot.length, 1);
    assert.equal(shot[0]!.elided, false, 'the first answer of call_0 is in the tail and keeps its image');
    assert.ok(p.observation.images.elided > 0, 'the older screenshots were elided');
    await assertEveryImageServed(p);
  });
});
