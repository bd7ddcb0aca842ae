// snapcompact over the real socket: a long session on a vision model goes out as frames then
// tail with no summarizer call, frames are served by payload.get (and inline on request), a
// text-only model gets the running-summary text compaction and the frames come back unchanged,
// frames unused for 30 days are pruned at start-up, and after a switch to rolling the archive
// is summarized in chunks.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import sharp from 'sharp';
import type { AlbedoClient } from '../../protocol/client.ts';
import type { ParamsIn, Result } from '../../protocol/methods.ts';
import { runCli } from '../../cli/program.ts';
import { SHAPES } from '../../render/index.ts';
import { textTokens } from '../../strategies/estimate.ts';
import { evictionChunkTokens } from '../../strategies/harness/units.ts';
import { parseSummaryPrompt } from '../../strategies/summarizer/prompt-format.ts';
import { assertCallsPaired } from '../strategies/engine-fixtures.ts';
import { readFrame } from '../render/read-frame.ts';
import { startDaemon, tempHome, type DaemonHandle } from './harness.ts';

const WINDOW = 32_000;
type Prepared = Result<'prepare'>;
type Rows = ParamsIn<'transcript.append'>['rows'];

function turn(i: number): Rows {
  return [
    { kind: 'user', key: `u${i}`, content: [{ type: 'text', text: `step ${i}: make check ${i} pass in src/part${i % 9}.ts` }] },
    { kind: 'assistant', key: `a${i}`, content: [{ type: 'tool_call', id: `c${i}`, name: 'read_file', arguments: { path: `src/part${i % 9}.ts` } }] },
    { kind: 'tool_result', key: `r${i}`, call_id: `c${i}`, content: [{ type: 'text', text: `// marker-${i}\n${'const x = compute(value, other);\n'.repeat(20)}` }] },
    { kind: 'assistant', key: `b${i}`, content: [{ type: 'text', text: `Check ${i} passes.` }] },
  ];
}

/** The first frame's caption. */
const listed0 = (p: Prepared) => p.inputs.find((i) => i.content.some((c) => c.type === 'image'))?.content.flatMap((c) => (c.type === 'text' ? [c.text] : []))[0] ?? '';
const frames = (p: Prepared) => p.inputs.flatMap((i) => i.content.flatMap((c) => (c.type === 'image' ? [c] : [])));

describe('snapcompact over the socket', () => {
  let d: DaemonHandle;
  let client: AlbedoClient;
  let summarizeCalls = 0;
  const prompts: Array<{ purpose: string; prompt: string }> = [];
  const connect = () =>
    d.connect({
      summarize: async (params) => {
        summarizeCalls += 1;
        prompts.push({ purpose: params.purpose, prompt: params.prompt });
        return { text: 'the earlier steps were done' };
      },
    });

  before(async () => {
    const home = tempHome();
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ snapcompact: { contextWindowTokens: WINDOW }, rolling: { contextWindowTokens: WINDOW }, extensions: { enable: ['snapcompact'], disable: ['notes'] } }));
    d = await startDaemon({ home });
    client = await connect();
  });
  after(async () => {
    await d.stop();
  });

  const prepare = (session: string, model: string, extra: Partial<ParamsIn<'prepare'>> = {}) => client.call('prepare', { session, model, instructions: 'You are a coding agent.', ...extra });

  test('frames then tail on a vision model, no summarizer call, bytes by payload.get or inline', async () => {
    await client.call('session.open', { session: 'v' });
    let compacted = 0;
    for (let i = 0; i < 120; i++) {
      await client.call('transcript.append', { session: 'v', rows: turn(i) });
      const p = await prepare('v', 'claude-sonnet-4-5');
      if (p.compacted) compacted += 1;
      assert.ok(p.observation.calibrated_input_tokens! <= WINDOW);
      assertCallsPaired(p.inputs);
    }
    assert.ok(compacted >= 1);
    assert.equal(summarizeCalls, 0, 'snapcompact writes no summary');
    const p = await prepare('v', 'claude-sonnet-4-5');
    const f = frames(p);
    assert.ok(f.length >= 1);
    const sections = p.observation.sections.map((s) => s.name);
    assert.deepEqual(sections, ['system', 'frames', 'tail']);
    const got = await client.call('payload.get', { hash: f[0]!.hash });
    const meta = await sharp(Buffer.from(got.data, 'base64')).metadata();
    assert.deepEqual([meta.width, meta.height, meta.format], [f[0]!.width, f[0]!.height, 'png']);
    const inline = await prepare('v', 'claude-sonnet-4-5', { images: 'inline' });
    assert.equal(frames(inline)[0]!.data, got.data);
    // Frames were dropped (the budget shows the first and the newest), yet transcript_grep still
    // finds every planted marker, those of dropped frames included.
    assert.match(listed0(p), /characters of older history after this frame are not shown/);
    for (const i of [3, 40, 70, 100]) {
      const g = await client.call('transcript_grep', { session: 'v', pattern: `// MARKER-${i}\n` });
      assert.equal(g.total, 1, `marker-${i}`);
    }
    // `frames` lists what the next request shows, read-only; a text-only model shows none.
    const listed = await client.call('frames', { session: 'v' });
    assert.equal(listed.model, 'claude-sonnet-4-5');
    assert.deepEqual(listed.frames.map((x) => x.hash), f.map((x) => x.hash));
    assert.match(listed.frames[0]!.caption, /^\[archive frame 1 of \d+ · rows #1-#\d+/);
    assert.equal((await client.call('frames', { session: 'v', model: 'deepseek-chat' })).frames.length, 0);
    // /context lists the frames.
    const ctx = await client.call('command', { session: 'v', line: '/context' });
    assert.match(ctx.text, /snapcompact archive: \d+ of \d+ frame\(s\), claude shape/);
  });

  test('a text-only model gets the text compaction; back on the vision model, the same frames', async () => {
    const before = frames(await prepare('v', 'claude-sonnet-4-5')).map((f) => f.hash);
    for (let i = 120; i < 200; i++) await client.call('transcript.append', { session: 'v', rows: turn(i) });
    const text = await prepare('v', 'deepseek-chat');
    assert.equal(frames(text).length, 0);
    assert.ok(text.observation.notes.some((n) => n.includes('reads no images')));
    assert.ok(summarizeCalls > 0, 'the text fallback summarized');
    const again = await client.call('compact', { session: 'v', dry_run: true });
    assert.equal(again.strategy, 'snapcompact');
    const ctx = await client.call('command', { session: 'v', line: '/context' });
    assert.ok(ctx.text.length > 0);
    const vision = await prepare('v', 'claude-sonnet-4-5');
    assert.deepEqual(frames(vision).map((f) => f.hash).slice(0, 1), before.slice(0, 1), 'the first frame is the same image');
  });

  test('after three snapcompact compactions, extensions.select rolling summarizes the archive in chunks of at most half the window', async () => {
    const session = 'to-rolling';
    await client.call('session.open', { session });
    let compactions = 0;
    for (let i = 0; compactions < 3 && i < 400; i++) {
      await client.call('transcript.append', { session, rows: turn(i) });
      if ((await prepare(session, 'claude-sonnet-4-5')).compacted) compactions += 1;
    }
    assert.equal(compactions, 3);
    await client.call('extensions.select', { session, enable: ['rolling'] });
    const before = prompts.length;
    const p = await prepare(session, 'claude-sonnet-4-5');
    assert.equal(p.observation.strategy, 'rolling');
    assert.equal(p.compacted, true);
    assert.ok(p.observation.estimated_input_tokens <= WINDOW, `${p.observation.estimated_input_tokens} tokens`);
    const calls = prompts.slice(before).filter((c) => c.purpose === 'rolling');
    assert.ok(calls.length > 1, `${calls.length} rolling call(s)`);
    assert.ok(calls.some((c) => c.prompt.includes('snapcompact archive page 1 of')), 'the archive reached the summarizer');
    for (const [i, c] of calls.entries()) {
      const tokens = textTokens(parseSummaryPrompt(c.prompt).transcript);
      assert.ok(tokens <= evictionChunkTokens(WINDOW), `call ${i}: ~${tokens} tokens of transcript`);
    }
  });

  test('albedo frames writes what the next request shows; albedo render draws any text locally', async () => {
    const cli = async (args: string[]) => {
      let stdout = '';
      let stderr = '';
      const code = await runCli([...args, '--json'], { stdout: { write: (x: string) => (stdout += x) }, stderr: { write: (x: string) => (stderr += x) }, env: { ALBEDO_HOME: d.home, ALBEDO_SOCKET: d.socket } });
      assert.equal(code, 0, stderr);
      return JSON.parse(stdout) as { files?: string[]; frames: Array<{ hash?: string; file?: string; width: number; height: number }> };
    };
    const out = fs.mkdtempSync(path.join(d.home, 'frames-'));
    const listed = await cli(['frames', 'v', '--out', out]);
    assert.ok(listed.files!.length >= 1 && listed.files!.length === listed.frames.length);
    const png = fs.readFileSync(listed.files![0]!);
    const meta = await sharp(png).metadata();
    assert.deepEqual([meta.width, meta.height], [listed.frames[0]!.width, listed.frames[0]!.height]);
    // render: a text file, in the GPT shape, read back cell by cell.
    const file = path.join(d.home, 'note.txt');
    fs.writeFileSync(file, 'render me: albedo-compactd draws this line\n');
    const rendered = await cli(['render', file, '--out', out, '--model', 'gpt-5']);
    assert.equal(rendered.frames.length, 1);
    const read = await readFrame(fs.readFileSync(rendered.frames[0]!.file!), SHAPES.gpt);
    assert.ok(read.rows[0]!.startsWith('render me: albedo-compactd draws this line⏎'), read.rows[0]);
  });

  test('frames unused for 30 days are pruned at start-up, with their payloads', async () => {
    const hash = frames(await prepare('v', 'claude-sonnet-4-5'))[0]!.hash;
    await d.stop();
    const db = new Database(path.join(d.home, 'albedo.db'));
    const old = Date.now() - 31 * 24 * 60 * 60 * 1000;
    db.prepare('UPDATE snapcompact_frames SET used_at = ?').run(old);
    db.close();
    d = await startDaemon({ home: d.home });
    client = await connect();
    const check = new Database(path.join(d.home, 'albedo.db'), { readonly: true });
    try {
      assert.equal((check.prepare('SELECT count(*) AS n FROM snapcompact_frames').get() as { n: number }).n, 0);
      assert.equal((check.prepare('SELECT count(*) AS n FROM payloads WHERE hash = ?').get(hash) as { n: number }).n, 0);
    } finally {
      check.close();
    }
    // The next request renders them again.
    const p = await prepare('v', 'claude-sonnet-4-5');
    assert.equal(frames(p)[0]!.hash, hash, 'the same text renders to the same bytes');
  });
});
