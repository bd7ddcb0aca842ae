// /reload with a changed extension set over the real socket: one `capabilities changed` notice
// per live session, the model reads it in the tail while its system prompt stays pinned, and
// the next compaction leaves it out of the summary and rebuilds the system prompt. Also SIGHUP
// as the reload signal when the file watch is off.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import type { ParamsIn, Result } from '../../protocol/methods.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { capabilitiesNote } from '../../strategies/projection.ts';
import { allRows, loggedLine, startEach, tempHome } from './harness.ts';

const start = startEach();
const INSTRUCTIONS = 'You are a careful coding agent working in /repo.';
type Prepared = Result<'prepare'>;
type Rows = ParamsIn<'transcript.append'>['rows'];

function stepTurn(i: number): Rows {
  return [
    { kind: 'user', content: [{ type: 'text', text: `step ${i}: make test ${i} pass in src/part${i}.ts` }] },
    { kind: 'assistant', content: [{ type: 'text', text: `Test ${i} passes now; ${'details '.repeat(20)}` }] },
  ];
}

const notices = (rows: readonly StoredRow[]): string[] =>
  rows.flatMap((r) => (r.body.kind === 'notice' && r.body.body.notice === 'capabilities_changed' ? [r.body.body.context] : []));

const texts = (p: Prepared): string[] => p.inputs.map((i) => i.content.map((c) => (c.type === 'text' ? c.text : '')).join(''));

describe('capability notices on /reload', () => {
  test('a changed extension set adds one notice per live session; the model sees it while the prompt stays; the next compaction drops it and rebuilds the prompt', async () => {
    const home = tempHome();
    const file = path.join(home, 'extensions.json');
    fs.writeFileSync(file, JSON.stringify({ rolling: { contextWindowTokens: 3000 } }));
    const d = await start({ home });
    const summaries: string[] = [];
    const c = await d.connect({
      summarize: async (params) => {
        summaries.push(params.prompt);
        return { text: `${params.purpose} of ${params.prompt.length} characters` };
      },
    });
    const prepare = (session: string): Promise<Prepared> => c.call('prepare', { session, model: 'm', instructions: INSTRUCTIONS });
    for (const s of ['a', 'b', 'idle']) {
      await c.call('session.open', { session: s });
      await c.call('transcript.append', { session: s, rows: [...stepTurn(0), ...stepTurn(1)] });
    }
    const before = await prepare('a');
    await prepare('b');
    assert.match(before.system, /- notes: /, 'the system prompt names the notes layer');

    // The same files: nothing to tell anyone.
    await c.call('command', { line: '/reload' });
    assert.deepEqual(notices(await allRows(c, 'a')), []);

    fs.writeFileSync(file, JSON.stringify({ rolling: { contextWindowTokens: 3000 }, extensions: { disable: ['notes'] } }));
    await c.call('command', { line: '/reload' });
    await c.call('reload', {});
    const told = notices(await allRows(c, 'a'));
    assert.equal(told.length, 1, 'one notice, however many reloads saw the change');
    assert.ok(!told[0]!.includes('- notes: ') && told[0]!.includes('- rolling: '), told[0]);
    assert.deepEqual(notices(await allRows(c, 'b')), told);
    assert.deepEqual(notices(await allRows(c, 'idle')), [], 'a session that never sent a request has no prompt to correct');

    // The next request: the same system prompt and prefix, the notice at the end of the tail.
    const after = await prepare('a');
    assert.equal(after.compacted, false);
    assert.equal(after.system, before.system, 'the system prompt stays what the model last saw');
    assert.equal(JSON.stringify(after.inputs.slice(0, before.inputs.length)), JSON.stringify(before.inputs));
    assert.equal(texts(after).at(-1), capabilitiesNote(told[0]!));
    assert.match(after.observation.sections[0]!.source, /from before the last reload/);

    // Another turn: still pinned.
    await c.call('transcript.append', { session: 'a', rows: stepTurn(2) });
    assert.equal((await prepare('a')).system, before.system, 'pinned until the compaction');
    // Enough turns to pass the trigger: the notice is evicted, never summarized, and the prompt is rebuilt.
    await c.call('transcript.append', { session: 'a', rows: Array.from({ length: 40 }, (_, i) => stepTurn(3 + i)).flat() });
    const compacted = await prepare('a');
    assert.equal(compacted.compacted, true, `~${compacted.observation.estimated_input_tokens} tokens`);
    assert.ok(summaries.length > 0 && summaries.some((s) => s.includes('step 1:')), 'the summarizer read the evicted turns around the notice');
    assert.ok(summaries.every((s) => !s.includes('capabilities changed') && !s.includes('- rolling: ')), 'but never the notice');
    assert.ok(!texts(compacted).some((t) => t.startsWith('[capabilities changed')), 'the notice left the request with the evicted history');
    assert.notEqual(compacted.system, before.system);
    assert.equal(compacted.system, `${INSTRUCTIONS}\n\n${told[0]}`, 'the system prompt carries the new extension context');
    const next = await prepare('a');
    assert.equal(next.system, compacted.system);
    await d.stop();
  });

  test('with the file watch off, a changed extensions.json applies at SIGHUP, not before', { timeout: 30_000 }, async () => {
    const home = tempHome();
    const file = path.join(home, 'extensions.json');
    fs.writeFileSync(file, JSON.stringify({ rolling: { contextWindowTokens: 4000 } }));
    const d = await start({ home, env: { ALBEDO_CONFIG_WATCH: 'off' } });
    const c = await d.connect();
    await c.call('session.open', { session: 'hup' });
    await c.call('transcript.append', { session: 'hup', rows: stepTurn(0) });
    const prepare = (): Promise<Prepared> => c.call('prepare', { session: 'hup', model: 'm', instructions: INSTRUCTIONS });
    assert.equal((await prepare()).observation.window, 4000);
    fs.writeFileSync(file, JSON.stringify({ rolling: { contextWindowTokens: 9000 } }));
    // Nothing watches the file: every request until the signal keeps the window it started with.
    assert.equal((await prepare()).observation.window, 4000);
    d.proc.kill('SIGHUP');
    // The handler re-reads the files in the same turn in which it logs this line.
    await loggedLine(d, 'SIGHUP received');
    assert.equal((await prepare()).observation.window, 9000, 'SIGHUP re-read the file');
    await d.stop();
  });
});

describe('the prompt the model last saw, across daemon restarts', () => {
  test('unchanged needs nothing; a changed context with the same tools is pinned with one notice; a changed tool set sends the current prompt', async () => {
    const home = tempHome();
    const file = path.join(home, 'extensions.json');
    const write = (extra: Record<string, unknown>) => fs.writeFileSync(file, JSON.stringify({ rolling: { contextWindowTokens: 100_000 }, ...extra }));
    write({});
    let d = await start({ home });
    let c = await d.connect();
    const prepare = (session: string): Promise<Prepared> => c.call('prepare', { session, model: 'm', instructions: INSTRUCTIONS });
    for (const s of ['same', 'pinned', 'tools']) {
      await c.call('session.open', { session: s });
      await c.call('transcript.append', { session: s, rows: stepTurn(0) });
    }
    const first = { same: await prepare('same'), pinned: await prepare('pinned'), tools: await prepare('tools') };

    // 1. A restart (SIGKILL: nothing flushed on the way out) with nothing changed.
    await d.stop('SIGKILL');
    d = await start({ home });
    c = await d.connect();
    const same = await prepare('same');
    assert.equal(same.system, first.same.system);
    assert.deepEqual(notices(await allRows(c, 'same')), []);

    // 2. The extension context changes while the daemon is down; the tools stay (notes has none).
    await d.stop('SIGTERM');
    write({ extensions: { disable: ['notes'] } });
    d = await start({ home });
    c = await d.connect();
    const pinned = await prepare('pinned');
    assert.equal(pinned.system, first.pinned.system, 'the system prompt the model knows stays pinned');
    const told = notices(await allRows(c, 'pinned'));
    assert.equal(told.length, 1);
    assert.ok(!told[0]!.includes('- notes:'), 'the notice carries the new extension context');
    assert.ok(texts(pinned).some((t) => t === capabilitiesNote(told[0]!)), 'the model reads the notice in the tail');
    const again = await prepare('pinned');
    assert.equal(again.system, first.pinned.system);
    assert.equal(notices(await allRows(c, 'pinned')).length, 1, 'one notice, not one per prepare');

    // 3. The tool set changes while the daemon is down: the cache misses anyway.
    await d.stop('SIGTERM');
    write({ extensions: { disable: ['notes', 'lcm-memory'] } });
    d = await start({ home });
    c = await d.connect();
    const tools = await prepare('tools');
    assert.notEqual(tools.system, first.tools.system, 'the current prompt goes out');
    assert.ok(!tools.system.includes('lcm-memory'));
    assert.deepEqual(notices(await allRows(c, 'tools')), []);
  });
});

describe('a pinned session whose kernel is adopted again', () => {
  test('keeps its pin without a second notice; after a compaction rebuilt the prompt, a new change is told again', async () => {
    const home = tempHome();
    const file = path.join(home, 'extensions.json');
    const write = (extra: Record<string, unknown>) => fs.writeFileSync(file, JSON.stringify({ rolling: { contextWindowTokens: 8000 }, ...extra }));
    write({});
    let d = await start({ home });
    let c = await d.connect();
    const prepare = (): Promise<Prepared> => c.call('prepare', { session: 'p', model: 'm', instructions: INSTRUCTIONS });
    await c.call('session.open', { session: 'p' });
    await c.call('transcript.append', { session: 'p', rows: Array.from({ length: 30 }, (_, k) => stepTurn(k)).flat() });
    const original = await prepare();
    const restart = async () => {
      await d.stop('SIGTERM');
      d = await start({ home });
      c = await d.connect();
    };
    await d.stop('SIGTERM');
    write({ extensions: { disable: ['notes'] } });
    d = await start({ home });
    c = await d.connect();
    assert.equal((await prepare()).system, original.system);
    await restart();
    assert.equal((await prepare()).system, original.system, 'still pinned after another adoption');
    assert.equal(notices(await allRows(c, 'p')).length, 1, 'told once');
    // A compaction rebuilds the prompt; a later change back is a change the model must hear of.
    const compacted = await c.call('compact', { session: 'p' });
    assert.equal(compacted.compacted, true, compacted.reason ?? '');
    const rebuilt = await prepare();
    assert.notEqual(rebuilt.system, original.system);
    await d.stop('SIGTERM');
    write({});
    d = await start({ home });
    c = await d.connect();
    assert.equal((await prepare()).system, rebuilt.system, 'pinned to the rebuilt prompt');
    assert.equal(notices(await allRows(c, 'p')).length, 2, 'the change back is told');
  });
});
