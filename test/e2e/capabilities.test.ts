// /reload with a changed extension set over the real socket: one `capabilities changed` notice
// per live session, the model reads it in the tail while its system prompt stays pinned, and
// the next compaction leaves it out of the summary and rebuilds the system prompt. Also SIGHUP
// as the reload signal when the file watch is off, and what a restart finds changed: the
// extension context, the tools, the client's instructions, or a notice a change back made stale.
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

const notices = (rows: readonly StoredRow[]): string[] => rows.flatMap((r) => (r.body.kind === 'notice' && r.body.body.notice === 'capabilities_changed' ? [r.body.body.context] : []));

/** A fresh home whose extensions.json `write` replaces: the rolling window plus `extra`. */
function homeWithExtensions(window: number): { home: string; write: (extra: Record<string, unknown>) => void } {
  const home = tempHome();
  const file = path.join(home, 'extensions.json');
  const write = (extra: Record<string, unknown>) => fs.writeFileSync(file, JSON.stringify({ rolling: { contextWindowTokens: window }, ...extra }));
  write({});
  return { home, write };
}

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
    const { home, write } = homeWithExtensions(100_000);
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

// Issue 30, defect 6: "The session keeps the prompt the model last knew it by
// (`known_instructions`, `known_context`, and a hash of the tools in `known_tools`)... a changed
// one with the same tools is pinned."
describe('changed instructions across a restart', () => {
  test('with the same tools the old system prompt stays and one notice carries the new instructions; a compaction rebuilds the prompt; changed tools send the current one', async () => {
    const { home } = homeWithExtensions(8000);
    const BASH = [{ name: 'bash', description: 'run a shell command', input_schema: { type: 'object' } }];
    let d = await start({ home });
    let c = await d.connect();
    const prepare = (session: string, instructions: string, tools = BASH): Promise<Prepared> => c.call('prepare', { session, model: 'm', instructions, tools });
    const restart = async (signal: 'SIGTERM' | 'SIGKILL') => {
      await d.stop(signal);
      d = await start({ home });
      c = await d.connect();
    };
    for (const s of ['i', 'tools']) {
      await c.call('session.open', { session: s });
      await c.call('transcript.append', { session: s, rows: Array.from({ length: 30 }, (_, k) => stepTurn(k)).flat() });
    }
    const first = await prepare('i', INSTRUCTIONS);
    const firstTools = await prepare('tools', INSTRUCTIONS);
    assert.ok(first.system.startsWith(INSTRUCTIONS));

    const CHANGED = `${INSTRUCTIONS} Answer in French.`;
    await restart('SIGKILL');
    const pinned = await prepare('i', CHANGED);
    assert.equal(pinned.compacted, false);
    assert.equal(pinned.system, first.system, 'the system prompt the model knows stays pinned');
    assert.equal(JSON.stringify(pinned.inputs.slice(0, first.inputs.length)), JSON.stringify(first.inputs), 'the cached prefix is intact');
    const rows = await allRows(c, 'i');
    const told = rows.flatMap((r) => (r.body.kind === 'notice' && r.body.body.notice === 'capabilities_changed' ? [r.body.body] : []));
    assert.equal(told.length, 1, 'one notice');
    assert.equal(told[0]!.instructions, CHANGED, 'the notice carries the new instructions');
    assert.equal(texts(pinned).at(-1), capabilitiesNote(told[0]!.context, CHANGED), 'the model reads them at the end of the tail');
    assert.match(pinned.observation.sections[0]!.source, /instructions from before the last restart/);

    // Asked again, and across another restart: still pinned, told once.
    assert.equal((await prepare('i', CHANGED)).system, first.system);
    await restart('SIGTERM');
    assert.equal((await prepare('i', CHANGED)).system, first.system, 'still pinned after another adoption');
    assert.equal(notices(await allRows(c, 'i')).length, 1, 'told once');

    // The next compaction rebuilds the system prompt with the instructions the client sends.
    const compacted = await c.call('compact', { session: 'i' });
    assert.equal(compacted.compacted, true, compacted.reason ?? '');
    const rebuilt = await prepare('i', CHANGED);
    assert.ok(rebuilt.system.startsWith(CHANGED), rebuilt.system.slice(0, 120));

    // Changed instructions and a changed tool set: the cache misses anyway, the current prompt goes out.
    await restart('SIGTERM');
    const other = await prepare('tools', CHANGED, [...BASH, { name: 'edit', description: 'edit a file', input_schema: { type: 'object' } }]);
    assert.notEqual(other.system, firstTools.system);
    assert.ok(other.system.startsWith(CHANGED));
    assert.deepEqual(notices(await allRows(c, 'tools')), []);
    await d.stop();
  });

  test('while the old instructions are pinned, instructions the client changes again are told too, and the pin holds', async () => {
    const { home } = homeWithExtensions(100_000);
    let d = await start({ home });
    let c = await d.connect();
    const prepare = (instructions: string): Promise<Prepared> => c.call('prepare', { session: 'live', model: 'm', instructions });
    await c.call('session.open', { session: 'live' });
    await c.call('transcript.append', { session: 'live', rows: stepTurn(0) });
    const first = await prepare(INSTRUCTIONS);
    await d.stop('SIGTERM');
    d = await start({ home });
    c = await d.connect();
    assert.equal((await prepare(`${INSTRUCTIONS} v2`)).system, first.system);
    const third = await prepare(`${INSTRUCTIONS} v3`);
    assert.equal(third.system, first.system, 'the pin holds');
    const told = (await allRows(c, 'live')).flatMap((r) => (r.body.kind === 'notice' && r.body.body.notice === 'capabilities_changed' ? [r.body.body.instructions] : []));
    assert.deepEqual(told, [`${INSTRUCTIONS} v2`, `${INSTRUCTIONS} v3`], 'the second notice corrects the first');
    // Back to the instructions the system prompt carries: the standing notice is corrected again.
    const back = await prepare(INSTRUCTIONS);
    assert.equal(back.system, first.system);
    assert.equal(texts(back).at(-1), capabilitiesNote(notices(await allRows(c, 'live')).at(-1)!, INSTRUCTIONS));
    await d.stop();
  });
});

// Issue 30, defect 7: a restart corrects a notice that a change back made stale, as /reload does.
describe('a stale notice across a restart', () => {
  test('a change back while the daemon is down adds a notice with the restored context', async () => {
    const { home, write } = homeWithExtensions(100_000);
    let d = await start({ home });
    let c = await d.connect();
    const prepare = (): Promise<Prepared> => c.call('prepare', { session: 'back', model: 'm', instructions: INSTRUCTIONS });
    await c.call('session.open', { session: 'back' });
    await c.call('transcript.append', { session: 'back', rows: stepTurn(0) });
    const first = await prepare();
    assert.match(first.system, /- notes: /);

    write({ extensions: { disable: ['notes'] } });
    await c.call('command', { line: '/reload' });
    const off = notices(await allRows(c, 'back'));
    assert.equal(off.length, 1);
    assert.ok(!off[0]!.includes('- notes: '), 'the notice says notes are off');
    assert.equal((await prepare()).system, first.system, 'the old prompt is pinned');

    await d.stop('SIGTERM');
    write({});
    d = await start({ home });
    c = await d.connect();
    const after = await prepare();
    assert.equal(after.system, first.system, 'the system prompt already says what is enabled');
    const told = notices(await allRows(c, 'back'));
    assert.equal(told.length, 2, 'the stale notice is corrected');
    assert.match(told[1]!, /- notes: /);
    assert.equal(texts(after).at(-1), capabilitiesNote(told[1]!), 'the last note the model reads says notes are on');
    assert.equal(notices(await allRows(c, 'back')).length, 2);
    await prepare();
    assert.equal(notices(await allRows(c, 'back')).length, 2, 'once');
    await d.stop();
  });
});
