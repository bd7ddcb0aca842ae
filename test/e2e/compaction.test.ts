// The compaction engine over the real socket: a long scripted session whose client answers the
// daemon's summarize requests, then every compaction method (/compact, /context, /extensions,
// /reload, usage, dry runs) and the configuration files as an operator edits them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { fileURLToPath } from 'node:url';
import type { AlbedoClient } from '../../protocol/client.ts';
import type { ParamsIn, Result } from '../../protocol/methods.ts';
import { loadCatalog } from '../../strategies/catalog/models.ts';
import { parseSummaryPrompt } from '../../strategies/summarizer/prompt-format.ts';
import { assertCallsPaired } from '../strategies/engine-fixtures.ts';
import { pngBytes } from '../storage/factories.ts';
import { allRows, failsWith, startDaemon, tempHome, type DaemonHandle } from './harness.ts';

const WINDOW = 6000;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const INSTRUCTIONS = 'You are a careful coding agent working in /repo.';
const TOOLS = [{ name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } }];

type Prepared = Result<'prepare'>;
type Rows = ParamsIn<'transcript.append'>['rows'];

/** What a provider would receive: everything but the ids and the observation. */
function wire(p: Prepared): string {
  return JSON.stringify({ system: p.system, tools: p.tools, inputs: p.inputs });
}

async function scriptedTurn(i: number, png: Buffer): Promise<Rows> {
  const withImage = i % 25 === 7;
  return [
    { kind: 'user', key: `u${i}`, content: [{ type: 'text', text: `step ${i}: update src/feature${i % 13}.ts so that test ${i} passes` }] },
    {
      kind: 'assistant',
      key: `a${i}`,
      content: [
        { type: 'reasoning', provider: 'anthropic', text: `thinking about step ${i}`, encrypted: `opaque-${i}` },
        { type: 'text', text: `Looking at src/feature${i % 13}.ts first.` },
        { type: 'tool_call', id: `call_${i}`, name: 'read_file', arguments: { path: `src/feature${i % 13}.ts` } },
      ],
    },
    {
      kind: 'tool_result',
      key: `r${i}`,
      call_id: `call_${i}`,
      content: [
        { type: 'text', text: `export function feature${i}() {\n  return ${i};\n}\n`.repeat(4) },
        ...(withImage ? [{ type: 'image' as const, media_type: 'image/png' as const, data: png.toString('base64') }] : []),
      ],
    },
    { kind: 'assistant', key: `b${i}`, content: [{ type: 'text', text: `Done with step ${i}; test ${i} passes now.` }] },
  ];
}

describe('compaction over the socket', () => {
  let d: DaemonHandle;
  let client: AlbedoClient;
  let summarizeCalls: Array<{ purpose: string; prompt: string; max_output_tokens: number }> = [];
  let summarizerDown = false;

  async function connectSummarizingClient(): Promise<AlbedoClient> {
    return d.connect({
      summarize: async (params) => {
        summarizeCalls.push(params);
        if (summarizerDown) throw new Error('upstream model unavailable');
        const parts = parseSummaryPrompt(params.prompt);
        const steps = [...parts.transcript.matchAll(/step (\d+):/g)].map((m) => m[1]);
        return { text: `${parts.previousSummary ?? ''}\nsteps ${steps[0]}-${steps.at(-1)} done.`.trim() };
      },
    });
  }

  before(async () => {
    const home = tempHome();
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: WINDOW } }));
    d = await startDaemon({ home });
    client = await connectSummarizingClient();
  });
  after(async () => {
    await d.stop();
  });

  async function prepare(session: string, extra: Partial<ParamsIn<'prepare'>> = {}): Promise<Prepared> {
    return client.call('prepare', { session, model: 'claude-sonnet-4-5', instructions: INSTRUCTIONS, tools: TOOLS, ...extra });
  }

  test('a long session: every request fits, calls keep their results, prefixes are stable, failures and a restart change nothing', async () => {
    const session = 'long';
    await client.call('session.open', { session });
    const png = await pngBytes(900, 700);
    let previous: Prepared | undefined;
    let compactions = 0;
    let outage: Prepared | undefined;
    for (let i = 0; i < 240; i++) {
      await client.call('transcript.append', { session, rows: await scriptedTurn(i, png) });

      // From turn 150 the summarizer is down until a compaction is attempted: that request still
      // goes out, uncompacted, and nothing saved changes.
      summarizerDown = i >= 150 && outage === undefined;
      if (i === 200) {
        const beforeRestart = await prepare(session);
        assert.equal(beforeRestart.compacted, false, 'nothing due right before the restart');
        await d.stop();
        d = await startDaemon({ home: d.home });
        client = await connectSummarizingClient();
        const afterRestart = await prepare(session);
        assert.equal(wire(afterRestart), wire(beforeRestart), 'a restart changes nothing the next prepare sends');
        previous = afterRestart;
        continue;
      }

      let p: Prepared;
      try {
        p = await prepare(session);
      } finally {
        summarizerDown = false;
      }
      if (i >= 150 && outage === undefined && p.observation.failure !== null) {
        outage = p;
        assert.equal(p.compacted, false);
        assert.match(p.observation.failure, /upstream model unavailable/);
        assert.equal(p.observation.auto_failures, 1);
        assert.equal(p.observation.last_compaction?.ok, false);
      }
      assert.ok(p.observation.estimated_input_tokens <= WINDOW, `turn ${i}: ~${p.observation.estimated_input_tokens} tokens`);
      assertCallsPaired(p.inputs);
      // Encrypted reasoning from anthropic goes back to an anthropic model.
      assert.ok(p.inputs.some((inp) => inp.content.some((c) => c.type === 'reasoning' && c.encrypted !== undefined)));
      if (p.compacted) compactions += 1;
      else if (previous !== undefined) {
        const prevWire = JSON.stringify(previous.inputs);
        assert.equal(JSON.stringify(p.inputs.slice(0, previous.inputs.length)), prevWire, `turn ${i}: the prefix moved without a compaction`);
        assert.equal(p.system, previous.system);
      }
      previous = p;
    }
    assert.ok(compactions >= 5, `${compactions} compactions`);
    assert.ok(outage !== undefined, 'the outage hit a compaction');
    // Every compaction's rolling summary is followed by the notes rewrite (the notes layer is on by default).
    assert.ok(summarizeCalls.every((c) => c.purpose === 'rolling' || c.purpose === 'notes'));
    assert.ok(summarizeCalls.some((c) => c.purpose === 'notes'));
    assert.ok(summarizeCalls.every((c) => !c.prompt.includes('opaque-')), 'encrypted reasoning never reaches the summarizer');
    const final = await client.call('context', { session, format: 'text' });
    assert.deepEqual(final.observation.sections.map((s) => s.name), ['system', 'notes', 'artifact ledger', 'summary', 'recap', 'tail']);
    assert.match(final.text ?? '', /last compaction: .* rolling · ok · \d+ ms · backend client/);
  });

  test('usage.report keeps the provider count beside the estimate and calibrates the trigger per session and model', async () => {
    // A model of its own: the ratio it learns carries over to new sessions of that model.
    const model = 'gpt-5';
    await client.call('session.open', { session: 'usage' });
    const appended = await client.call('transcript.append', { session: 'usage', rows: await scriptedTurn(1, await pngBytes(10, 10)) });
    const p = await prepare('usage', { model });
    assert.equal(p.head, appended.head, 'the prepared request records the head it was built from');
    assert.equal(p.observation.head, appended.head);
    assert.equal(p.observation.provider_input_tokens, null);
    assert.equal(p.observation.token_ratio, 1, 'no report yet: the estimate is taken as it is');
    const measured = Math.round(p.observation.estimated_input_tokens * 1.3);
    await client.call('usage.report', { session: 'usage', prepared_id: p.prepared_id, input_tokens: measured, cached_tokens: 100 });
    const ctx = await client.call('context', { session: 'usage', format: 'text' });
    assert.equal(ctx.observation.provider_input_tokens, measured);
    assert.equal(ctx.observation.provider_cached_tokens, 100);
    assert.equal(ctx.observation.estimated_input_tokens, p.observation.estimated_input_tokens);
    const next = await prepare('usage', { model });
    assert.ok(Math.abs(next.observation.token_ratio - 1.3) < 0.01, `ratio learned: ${next.observation.token_ratio}`);
    assert.equal(next.observation.calibrated_input_tokens, Math.ceil(next.observation.estimated_input_tokens * next.observation.token_ratio));
    assert.match((await client.call('context', { session: 'usage', format: 'text' })).text ?? '', /estimated input ~[\d,]+ tokens × 1\.30 = ~[\d,]+/);
    // Another session of the same model starts calibrated; another model does not.
    await client.call('session.open', { session: 'usage-2' });
    await client.call('transcript.append', { session: 'usage-2', rows: await scriptedTurn(2, await pngBytes(10, 10)) });
    assert.ok(Math.abs((await prepare('usage-2', { model })).observation.token_ratio - 1.3) < 0.01);
    assert.equal((await prepare('usage-2', { model: 'some-uncatalogued-model' })).observation.token_ratio, 1);
    await failsWith(client.call('usage.report', { session: 'usage', prepared_id: 'nope', input_tokens: 1 }), 'unknown_prepared');
  });

  test('/compact compacts now, with a focus; its dry run writes nothing', async () => {
    const session = 'manual';
    await client.call('session.open', { session });
    for (let i = 0; i < 12; i++) await client.call('transcript.append', { session, rows: await scriptedTurn(i, await pngBytes(10, 10)) });
    await prepare(session);
    const dry = await client.call('compact', { session, dry_run: true });
    assert.equal(dry.compacted, false);
    assert.ok(dry.plan !== null && dry.plan.evict_rows > 0 && dry.plan.estimated_tokens_after < dry.plan.estimated_tokens_before, JSON.stringify(dry));
    assert.equal((await client.call('context', { session })).observation.last_compaction, null);

    summarizeCalls = [];
    const res = await client.call('command', { session, line: '/compact keep the decisions about feature3' });
    assert.equal(res.command, 'compact');
    const result = res.result as Result<'compact'>;
    assert.equal(result.compacted, true);
    assert.equal(parseSummaryPrompt(summarizeCalls[0]!.prompt).focus, 'keep the decisions about feature3');
    assert.match(res.text, /^compacted with rolling/);
    const ctx = await client.call('context', { session });
    assert.equal(ctx.observation.last_compaction?.forced, true);
    assert.equal(ctx.observation.provider_input_tokens, null, 'a manual compaction has only an estimate');
  });

  test('albedo /compact exits 1 with the reason when nothing was compacted', async () => {
    const session = 'cli-nothing';
    await client.call('session.open', { session });
    await client.call('transcript.append', { session, rows: [{ kind: 'user', content: [{ type: 'text', text: 'hello' }] }] });
    const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'cli/main.ts'), '--session', session, '/compact'], {
      cwd: root,
      env: { ...process.env, ALBEDO_HOME: d.home, ALBEDO_SOCKET: d.socket },
      encoding: 'utf8',
    });
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stdout, /not compacted: cannot compact further without splitting the newest exchange/);
  });

  test('/compact <strategy> makes it the session strategy first, even when already active by default; its dry run stores nothing and refuses what the real run refuses', async () => {
    const session = 'switch';
    await client.call('session.open', { session });
    await client.call('transcript.append', { session, rows: await scriptedTurn(0, await pngBytes(10, 10)) });
    const chosenBy = async () => (await client.call('extensions.list', { session })).extensions.find((e) => e.name === 'rolling')!.chosen_by;
    assert.equal(await chosenBy(), 'default');
    // The dry run plans with the named strategy but stores no choice; it refuses what the real run refuses.
    const dry = await client.call('compact', { session, strategy: 'rolling', dry_run: true });
    assert.equal(dry.strategy, 'rolling');
    assert.equal(await chosenBy(), 'default', 'a dry run stores no choice');
    const other = await client.call('compact', { session, strategy: 'lcm', dry_run: true });
    assert.equal(other.strategy, 'lcm');
    assert.equal(await chosenBy(), 'default', 'a dry run with another strategy stores no choice either');
    await failsWith(client.call('compact', { session, strategy: 'notes', dry_run: true }), 'unknown_strategy');
    await failsWith(client.call('compact', { session, strategy: 'nope', dry_run: true }), 'unknown_strategy');
    // Already the resolved strategy, yet only by default: /compact rolling makes it the session's own.
    const r = await client.call('compact', { session, strategy: 'rolling' });
    assert.equal(r.strategy, 'rolling');
    assert.match(r.reason ?? '', /nothing worth evicting yet/);
    assert.equal(await chosenBy(), 'session');
    // The slash form names a strategy by its first word, and makes it the session's own.
    const slash = await client.call('command', { session, line: '/compact snapcompact' });
    assert.equal((slash.result as { strategy: string }).strategy, 'snapcompact');
    await failsWith(client.call('compact', { session, strategy: 'notes' }), 'unknown_strategy');
  });

  test('/context and a dry run leave an old item-count rolling state byte-identical; the first prepare adopts it', async () => {
    const session = 'legacy-cut';
    await client.call('session.open', { session });
    for (let i = 0; i < 8; i++) {
      await client.call('transcript.append', {
        session,
        rows: [
          { kind: 'user', content: [{ type: 'text', text: `question ${i}` }] },
          { kind: 'assistant', content: [{ type: 'text', text: `answer ${i}` }] },
        ],
      });
    }
    // The format before user counts: 8 projected items (four user/assistant pairs) before the fifth user message.
    const fifthUser = (await allRows(client, session)).filter((r) => r.row_class === 'user')[4]!.seq;
    const db = new Database(path.join(d.home, 'albedo.db'));
    db.pragma('busy_timeout = 5000');
    try {
      const sid = (db.prepare('SELECT sid FROM sessions WHERE name = ?').get(session) as { sid: number }).sid;
      db.prepare('INSERT INTO rolling_state (sid, summary, cut, cut_seq, backend, updated_at) VALUES (?, ?, ?, ?, ?, ?)').run(
        sid,
        'questions 0-3 answered',
        JSON.stringify({ items: 8 }),
        fifthUser,
        'extractive',
        1,
      );
      const stored = () => JSON.stringify(db.prepare('SELECT * FROM rolling_state WHERE sid = ?').get(sid));
      const saved = stored();

      const ctx = await client.call('context', { session });
      assert.match(ctx.observation.sections.find((s) => s.name === 'summary')?.source ?? '', /4 user message/, 'the old state is read');
      assert.equal(stored(), saved, '/context writes nothing');
      await client.call('compact', { session, dry_run: true });
      assert.equal(stored(), saved, 'a dry run writes nothing');

      await prepare(session);
      const cut = JSON.parse((db.prepare('SELECT cut FROM rolling_state WHERE sid = ?').get(sid) as { cut: string }).cut) as Record<string, unknown>;
      assert.deepEqual([cut['format'], cut['users']], [2, 4], 'the first prepare upgrades the cut');
    } finally {
      db.close();
    }
  });

  test('/extensions lists and selects per session; the last strategy cannot be disabled', async () => {
    await client.call('session.open', { session: 'ext' });
    const list = await client.call('extensions.list', { session: 'ext' });
    assert.equal(list.strategy, 'rolling');
    const rolling = list.extensions.find((e) => e.name === 'rolling')!;
    assert.deepEqual([rolling.enabled, rolling.chosen_by], [true, 'default']);
    const res = await client.call('command', { session: 'ext', line: '/extensions' });
    assert.match(res.text, /\[x\] rolling/);
    await failsWith(client.call('extensions.select', { session: 'ext', disable: ['rolling'] }), 'invalid_config');
    await failsWith(client.call('extensions.select', { session: 'ext', enable: ['nope'] }), 'unknown_extension');
    const chosen = await client.call('extensions.select', { session: 'ext', enable: ['rolling'] });
    assert.equal(chosen.strategy, 'rolling');
    const again = await client.call('extensions.list', { session: 'ext' });
    assert.equal(again.extensions.find((e) => e.name === 'rolling')!.chosen_by, 'session');
  });

  test('unknown commands and sessionless commands get precise errors', async () => {
    await failsWith(client.call('command', { line: '/bogus' }), 'unknown_command');
    await assert.rejects(client.call('command', { line: '/context' }), /needs a session/);
    await assert.rejects(client.call('command', { line: 'compact please' }), /not a slash command/);
    await failsWith(client.call('context', { session: 'ghost' }), 'unknown_session');
  });

  test('an invalid extensions.json keeps the last good config and is reported; fixing it clears the report', async () => {
    const file = path.join(d.home, 'extensions.json');
    fs.writeFileSync(file, '{"rolling": {"triggerPercent": "lots"}');
    const reloaded = (await client.call('command', { line: '/reload' })).result as Result<'reload'>;
    assert.equal(reloaded.config_errors[0]?.file, 'extensions.json');
    const status = await client.call('daemon.status', {});
    assert.equal(status.config_errors.length, 1);
    await client.call('session.open', { session: 'cfg' });
    await client.call('transcript.append', { session: 'cfg', rows: await scriptedTurn(0, await pngBytes(10, 10)) });
    const p = await prepare('cfg');
    assert.equal(p.observation.window, WINDOW, 'the last good window still applies');
    assert.equal(p.observation.config_errors[0]?.file, 'extensions.json');
    fs.writeFileSync(file, JSON.stringify({ rolling: { contextWindowTokens: WINDOW } }));
    const fixed = await client.call('reload', {});
    assert.deepEqual(fixed.config_errors, []);
  });

  test('global selection rewrites extensions.json and applies to sessions without their own choice', async () => {
    const res = await client.call('extensions.select', { enable: ['rolling'] });
    assert.equal(res.strategy, 'rolling');
    const written = JSON.parse(fs.readFileSync(path.join(d.home, 'extensions.json'), 'utf8')) as { extensions: { enable: string[] }; rolling: unknown };
    assert.deepEqual(written.extensions.enable, ['rolling']);
    assert.deepEqual(written.rolling, { contextWindowTokens: WINDOW }, 'other settings are kept');
    const list = await client.call('extensions.list', {});
    assert.equal(list.extensions.find((e) => e.name === 'rolling')!.chosen_by, 'global');
  });

  test('after three failed automatic compactions a /reload lifts the pause', async () => {
    const session = 'latch';
    await client.call('session.open', { session });
    for (let i = 0; i < 40; i++) await client.call('transcript.append', { session, rows: await scriptedTurn(i, await pngBytes(10, 10)) });
    summarizerDown = true;
    try {
      for (let i = 0; i < 3; i++) assert.equal((await prepare(session)).observation.auto_failures, i + 1);
      const calls = summarizeCalls.length;
      const paused = await prepare(session);
      assert.equal(paused.observation.latched, true);
      assert.equal(summarizeCalls.length, calls, 'no summarizer call while paused');
      const text = await client.call('context', { session, format: 'text' });
      assert.match(text.text ?? '', /automatic compaction paused after 3 failures/);
    } finally {
      summarizerDown = false;
    }
    await client.call('command', { line: '/reload' });
    const resumed = await prepare(session);
    assert.equal(resumed.compacted, true);
    assert.equal(resumed.observation.auto_failures, 0);
  });

  test('inline images carry their bytes in the prepared request', async () => {
    const session = 'images';
    await client.call('session.open', { session });
    const png = await pngBytes(64, 48);
    await client.call('transcript.append', { session, rows: [{ kind: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image', media_type: 'image/png', data: png.toString('base64') }] }] });
    const ref = await prepare(session);
    const inline = await prepare(session, { images: 'inline' });
    const refImage = ref.inputs[0]!.content[1]!;
    const inlineImage = inline.inputs[0]!.content[1]!;
    assert.ok(refImage.type === 'image' && refImage.data === undefined && refImage.width === 64);
    assert.ok(inlineImage.type === 'image' && inlineImage.data === png.toString('base64'));
  });
});

describe('the models extension over the socket', () => {
  let d: DaemonHandle;
  let client: AlbedoClient;
  before(async () => {
    d = await startDaemon(); // no extensions.json: every window comes from the catalog
    client = await d.connect();
  });
  after(async () => {
    await d.stop();
  });

  /** What one prepare for `model` took from the catalog: window, provider (signed reasoning kept), modalities (live images). */
  async function seen(session: string, model: string) {
    const p = await client.call('prepare', { session, model, instructions: INSTRUCTIONS, tools: TOOLS });
    const parts = p.inputs.flatMap((i) => i.content);
    return {
      window: p.observation.window,
      source: p.observation.window_source,
      signed: parts.some((c) => c.type === 'reasoning' && c.encrypted !== undefined),
      images: parts.some((c) => c.type === 'image'),
    };
  }

  async function sessionWithImage(session: string): Promise<void> {
    await client.call('session.open', { session });
    // Turn 7 carries an image in its tool result and anthropic's signed reasoning.
    await client.call('transcript.append', { session, rows: await scriptedTurn(7, await pngBytes(10, 10)) });
  }

  test('disabled for a session or globally, the catalog gives no window, provider or modalities', async () => {
    await sessionWithImage('catalog');
    assert.deepEqual(await seen('catalog', 'claude-sonnet-4-5'), { window: 200000, source: 'catalog', signed: true, images: true });
    // The window is the shipped catalog's (the package's figure, which may change with it); what is
    // checked here is that it, the provider and the text-only input reach the request.
    const deepseekWindow = loadCatalog().lookup('deepseek-chat')?.context_window;
    assert.ok(deepseekWindow !== undefined && deepseekWindow > 0);
    assert.deepEqual(await seen('catalog', 'deepseek-chat'), { window: deepseekWindow, source: 'catalog', signed: false, images: false });

    await sessionWithImage('no-catalog');
    await client.call('extensions.select', { session: 'no-catalog', disable: ['models'] });
    // Unknown window (automatic compaction off), no provider for signed reasoning, images assumed readable.
    const off = { window: null, source: 'unknown', signed: false, images: true };
    assert.deepEqual(await seen('no-catalog', 'claude-sonnet-4-5'), off);
    assert.deepEqual(await seen('no-catalog', 'deepseek-chat'), off);
    assert.match((await client.call('context', { session: 'no-catalog', format: 'text' })).text ?? '', /context window unknown.*automatic compaction is off/);
    assert.equal((await seen('catalog', 'claude-sonnet-4-5')).source, 'catalog', 'other sessions keep the catalog');

    await client.call('extensions.select', { disable: ['models'] });
    assert.deepEqual(await seen('catalog', 'claude-sonnet-4-5'), off);
  });
});
