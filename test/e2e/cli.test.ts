// The `albedo` CLI against a spawned daemon on its real socket: every verb in human and --json
// form on a small session, the exit codes (0 done, 1 the daemon said no, 2 usage), colour only
// on a terminal and never with NO_COLOR. Most runs call runCli in this process with captured
// streams (a spawn per run would cost seconds); the last tests spawn the real command, under a
// pseudo-terminal too, to check what only a process shows.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import type { AlbedoClient } from '../../protocol/client.ts';
import type { Result } from '../../protocol/methods.ts';
import { Observation } from '../../protocol/prepared.ts';
import { buildProgram, runCli } from '../../cli/program.ts';
import { pngBytes, user } from '../storage/factories.ts';
import { allRows, startDaemon, tempHome, type DaemonHandle } from './harness.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SESSION = 'cli-main';
const ESC = '\u001b[';

/** The text without its SGR escapes (`ESC[<n>m`). */
function stripStyles(s: string): string {
  return s
    .split(ESC)
    .map((part, i) => (i === 0 ? part : part.replace(/^\d+m/, '')))
    .join('');
}

let d: DaemonHandle;
let client: AlbedoClient;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in this process against the test daemon; `tty` makes stdout claim a terminal. */
async function cli(args: string[], opts: { env?: Record<string, string>; tty?: boolean } = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const env = { ALBEDO_HOME: d.home, ALBEDO_SOCKET: d.socket, ...opts.env };
  const code = await runCli(args, {
    stdout: { write: (s: string) => (stdout += s), isTTY: opts.tty === true, columns: 100 },
    stderr: { write: (s: string) => (stderr += s), isTTY: false },
    env,
  });
  return { code, stdout, stderr };
}

async function json<T = unknown>(args: string[]): Promise<T> {
  const r = await cli([...args, '--json']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as T;
}

function turns(from: number, count: number) {
  return Array.from({ length: count }, (_, k) => {
    const i = from + k;
    return [
      { kind: 'user' as const, key: `u${i}`, content: [{ type: 'text' as const, text: `step ${i}: make test ${i} pass in src/feature${i}.ts. `.repeat(3) }] },
      { kind: 'assistant' as const, key: `a${i}`, content: [{ type: 'text' as const, text: 'Reading it.' }, { type: 'tool_call' as const, id: `call-${i}`, name: 'read', arguments: { path: `src/feature${i}.ts` } }] },
      { kind: 'tool_result' as const, key: `r${i}`, call_id: `call-${i}`, content: [{ type: 'text' as const, text: `export const feature${i} = ${i};\n`.repeat(4) }] },
    ];
  }).flat();
}

before(async () => {
  const home = tempHome();
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: 8000 } }));
  d = await startDaemon({ home });
  client = await d.connect();
  await client.call('session.open', { session: SESSION });
  const png = (await pngBytes(8, 6)).toString('base64');
  await client.call('transcript.append', {
    session: SESSION,
    rows: [{ kind: 'user', key: 'img', content: [{ type: 'text', text: 'the screenshot of the quokka dashboard' }, { type: 'image', media_type: 'image/png', data: png }] }, ...turns(0, 30)],
  });
  const prepared = await client.call('prepare', {
    session: SESSION,
    model: 'some-model',
    instructions: 'You are a careful coding agent working in /repo. '.repeat(20),
    tools: [{ name: 'read', description: 'Read a file from the repository.', input_schema: { type: 'object', properties: { path: { type: 'string' } } } }],
  });
  await client.call('usage.report', { session: SESSION, prepared_id: prepared.prepared_id, input_tokens: 4321, cached_tokens: 1200 });
});
after(async () => {
  await d.stop();
});

describe('albedo against a running daemon', () => {
  test('every verb answers --help with its usage and exits 0', async () => {
    const { program } = buildProgram({ stdout: { write: () => true }, stderr: { write: () => true }, env: {} }, () => undefined);
    const verbs = program.commands.map((c) => c.name());
    for (const expected of ['status', 'sessions', 'context', 'compact', 'extensions', 'reload', 'grep', 'read', 'export', 'import', 'stop', '/compact', '/context', '/extensions', '/reload']) {
      assert.ok(verbs.includes(expected), `verb ${expected} is missing`);
    }
    for (const verb of verbs.filter((v) => v !== 'help')) {
      const r = await cli([verb, '--help']);
      assert.equal(r.code, 0, `${verb} --help: ${r.stderr}`);
      assert.match(r.stdout, new RegExp(`^Usage: albedo ${verb.replace('/', '\\/')}`), verb);
    }
    const top = await cli(['--help']);
    assert.equal(top.code, 0);
    assert.match(top.stdout, /Exit status: 0 done, 1 the daemon said no/);
  });

  // issue 30, defect 11: `albedo grep --help` did not mention --session, nor any verb its global options.
  test("every verb's --help, nested ones too, lists the global --session and --json", async () => {
    const { program } = buildProgram({ stdout: { write: () => true }, stderr: { write: () => true }, env: {} }, () => undefined);
    const paths: string[][] = [];
    const walk = (cmd: typeof program, at: string[]) => {
      for (const c of cmd.commands) {
        if (c.name() === 'help') continue;
        paths.push([...at, c.name()]);
        walk(c, [...at, c.name()]);
      }
    };
    walk(program, []);
    assert.ok(paths.some((p) => p.length > 1), 'the walk reaches nested verbs');
    for (const p of paths) {
      const r = await cli([...p, '--help']);
      assert.equal(r.code, 0, `${p.join(' ')} --help: ${r.stderr}`);
      assert.match(r.stdout, /^\s+-s, --session <id>\s+the session/m, `${p.join(' ')} --help names --session`);
      assert.match(r.stdout, /^\s+--json\s+print the result as JSON/m, `${p.join(' ')} --help names --json`);
    }
  });

  test("status: the daemon's version, pid and home; --json is daemon.status", async () => {
    const r = await cli(['status']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^albedod \\S+ · pid ${d.proc.pid} · up \\d+ s\\nhome ${d.home} · socket ${d.socket}\\n\\d+ sessions`));
    assert.match(r.stdout, /\ndatabase \d[\d.]* (?:B|KB|MB|GB) \(\+ .* WAL, .* free\) · \d+ image payloads · /);
    const s = await json<Result<'daemon.status'>>(['status']);
    assert.equal(s.pid, d.proc.pid);
    assert.equal(s.home, d.home);
    assert.equal(s.storage.parts, null, 'no page walk unless asked');
    // --storage walks the pages and prints the parts, largest first.
    const withParts = await cli(['status', '--storage']);
    assert.equal(withParts.code, 0, withParts.stderr);
    assert.match(withParts.stdout, /\n {2}\S.* (?:B|KB|MB|GB)( · .* (?:B|KB|MB|GB))+\n?$/);
    const walked = await json<Result<'daemon.status'>>(['status', '--storage']);
    assert.ok(walked.storage.parts !== null && Object.values(walked.storage.parts).reduce((a, b) => a + b, 0) > 0);
  });

  test('sessions: one line per session with its rows; --json is session.list', async () => {
    const list = await client.call('session.list', {});
    const mine = list.sessions.find((s) => s.session === SESSION)!;
    const r = await cli(['sessions']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^${SESSION} +${mine.rows} +#${mine.head} `, 'm'));
    assert.deepEqual(await json(['sessions']), list);
  });

  test("context: the window as a bar by section, shares, the estimate beside the provider's tokens; --json is the observation", async () => {
    const o = Observation.parse(await json(['context', SESSION]));
    assert.equal(o.session, SESSION);
    assert.equal(o.provider_input_tokens, 4321);
    const r = await cli(['context', SESSION]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(!r.stdout.includes(ESC), 'no colour when stdout is not a terminal');
    assert.match(r.stdout, /^session cli-main · strategy rolling · model some-model$/m);
    assert.match(r.stdout, /^window 8,000 tokens \(config\) · trigger 80% = 6,400 tokens · tail 25%$/m);
    // The bar: one cell row between brackets, the pinned prompt split into system and tools.
    const bar = /^\[(.+)\]$/m.exec(r.stdout)?.[1] ?? '';
    assert.match(bar, /^S+T+/, bar);
    assert.ok(bar.includes('|'), 'the trigger is marked on the bar');
    const sys = o.sections.find((s) => s.name === 'system')!;
    const instructions = Number(/instructions \(~(\d+) tokens\)/.exec(sys.source)?.[1]);
    assert.match(r.stdout, new RegExp(`^  system +~${instructions.toLocaleString('en-US')} +${((instructions * 100) / 8000).toFixed(1)}%  instructions$`, 'm'));
    assert.match(r.stdout, /^ {2}tools +~[\d,]+ +[\d.]+% {2}\d+ tool schema\(s\)/m);
    assert.match(r.stdout, /^ {2}tail +~[\d,]+ +[\d.]+% {2}rows #1-#\d+/m);
    assert.match(r.stdout, /^ {2}free +~[\d,]+ +[\d.]+% {2}before the trigger$/m);
    assert.match(r.stdout, /provider measured 4,321 \(1,200 cached, 28%\)/);
  });

  test('compact: compacts with the named strategy and shows the last compaction; nothing to do exits 1; --dry-run plans', async () => {
    const plan = await json<Result<'compact'>>(['compact', SESSION, '--dry-run']);
    assert.ok(plan.plan !== null && plan.plan.evict_rows > 0);
    assert.equal(plan.compacted, false);
    const r = await cli(['compact', SESSION, 'rolling', 'keep', 'the', 'feature', 'list']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^compacted with rolling$/m);
    assert.match(r.stdout, /^last compaction {2}\d{4}-\d\d-\d\dT[\d:.]+Z \(\d+ s ago\) · rolling \(forced\) · ok$/m);
    assert.match(r.stdout, /^ {2}backend extractive · ~[\d,]+ -> ~[\d,]+ tokens \(-\d+%\) · [\d,]+ ms · \d+ rows evicted$/m);
    assert.match(r.stdout, /^\[S+T+N*L*Σ+/m, 'the bar shows the summary after the pinned prompt (and the notes and their ledger, once written)');
    const ctx = await client.call('context', { session: SESSION });
    assert.equal(ctx.observation.last_compaction?.strategy, 'rolling');
    assert.equal(ctx.observation.last_compaction?.forced, true);

    await client.call('session.open', { session: 'cli-tiny' });
    await client.call('transcript.append', { session: 'cli-tiny', rows: [{ kind: 'user', content: [{ type: 'text', text: 'hello' }] }] });
    const none = await cli(['compact', 'cli-tiny', '--json']);
    assert.equal(none.code, 1);
    const body = JSON.parse(none.stdout) as Result<'compact'>;
    assert.equal(body.compacted, false);
    assert.ok(body.reason !== null);
  });

  test('extensions: lists, and enables and disables per session; --json is the method result', async () => {
    const list = await json<Result<'extensions.list'>>(['extensions', '--session', SESSION]);
    assert.equal(list.strategy, 'rolling');
    const r = await cli(['extensions', '--session', SESSION]);
    assert.match(r.stdout, /^strategy rolling$/m);
    assert.match(r.stdout, /^\[x\] rolling +strategy /m);
    const enabled = async () => (await client.call('extensions.list', { session: 'cli-tiny' })).extensions.find((e) => e.name === 'snapcompact-memory')?.enabled;
    assert.equal(await enabled(), true);
    const off = await json<Result<'extensions.select'>>(['extensions', '--session', 'cli-tiny', 'disable', 'snapcompact-memory']);
    assert.ok(!off.enabled.includes('snapcompact-memory'));
    assert.equal(await enabled(), false);
    const on = await cli(['extensions', '--session', 'cli-tiny', 'enable', 'snapcompact-memory']);
    assert.equal(on.code, 0, on.stderr);
    assert.match(on.stdout, /^selected for session cli-tiny\nstrategy rolling\n/);
    assert.match(on.stdout, /^\[x\] snapcompact-memory .* by session$/m);
    assert.equal(await enabled(), true);
    const bad = await cli(['extensions', 'rolling']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /say enable or disable before extension names/);
  });

  test('reload: the configuration version; --json is the reload result', async () => {
    const before = await json<Result<'reload'>>(['reload']);
    const r = await cli(['reload']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^configuration version \d+\n$/);
    assert.ok(Number(/\d+/.exec(r.stdout)?.[0]) >= before.version);
  });

  test('grep and read: what the memory tools answer, with paging flags', async () => {
    const expected = await client.call('transcript_grep', { pattern: 'QUOKKA dashboard', session: SESSION });
    assert.equal(expected.total, 1);
    const g = await cli(['grep', 'QUOKKA', 'dashboard', '--session', SESSION]);
    assert.equal(g.code, 0, g.stderr);
    assert.match(g.stdout, new RegExp(`^1 matching row\\(s\\)\\n${SESSION} #${expected.matches[0]!.seq}  `));
    assert.deepEqual(await json(['grep', 'QUOKKA dashboard', '--session', SESSION]), expected);

    const page = await client.call('transcript_read', { session: SESSION, offset: 10, limit: 200 });
    const r = await cli(['read', SESSION, '--offset', '10', '--limit', '200']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `${page.text}\n[… continue with: albedo read ${SESSION} --offset ${page.next_offset}]\n`);
    assert.deepEqual(await json(['read', SESSION, '--offset', '10', '--limit', '200']), page);
    // The session may come from ALBEDO_SESSION.
    const viaEnv = await cli(['read', '--limit', '200'], { env: { ALBEDO_SESSION: SESSION } });
    assert.equal(viaEnv.code, 0, viaEnv.stderr);
    assert.ok(viaEnv.stdout.startsWith((await client.call('transcript_read', { session: SESSION, limit: 200 })).text));
  });

  test('tools lists the memory tools with their arguments; tool runs one with name=value arguments', async () => {
    const listed = await client.call('tools.list', { session: SESSION });
    assert.deepEqual(await json(['tools', SESSION]), listed);
    const text = await cli(['tools', SESSION]);
    assert.equal(text.code, 0, text.stderr);
    for (const t of listed.tools) assert.ok(text.stdout.includes(t.name), t.name);
    assert.match(text.stdout, /^transcript_grep\(pattern, [^)]*limit\?[^)]*\)$/m, 'required arguments bare, optional ones with ?');

    // JSON values (the number) are JSON, the rest is text: the same answer as the tool over the socket.
    const expected = await client.call('tools.call', { session: SESSION, name: 'transcript_grep', arguments: { pattern: 'QUOKKA dashboard', limit: 5 } });
    const ran = await cli(['tool', 'transcript_grep', 'pattern=QUOKKA dashboard', 'limit=5', '--session', SESSION]);
    assert.equal(ran.code, 0, ran.stderr);
    assert.deepEqual(JSON.parse(ran.stdout), expected.result);
    assert.deepEqual(await json(['tool', 'transcript_grep', 'pattern=QUOKKA dashboard', 'limit=5', '--session', SESSION]), expected);

    const notPair = await cli(['tool', 'transcript_grep', 'QUOKKA', '--session', SESSION]);
    assert.equal(notPair.code, 2);
    assert.match(notPair.stderr, /"QUOKKA" is not key=value/);
    const twice = await cli(['tool', 'transcript_grep', 'pattern=a', 'pattern=b', '--session', SESSION]);
    assert.equal(twice.code, 2);
    assert.match(twice.stderr, /argument "pattern" is given twice/);
    const noSession = await cli(['tool', 'transcript_grep', 'pattern=a'], { env: { ALBEDO_SESSION: '' } });
    assert.equal(noSession.code, 2);
    // The daemon's refusals: an unknown tool, and arguments its schema rejects.
    const unknown = await cli(['tool', 'no_such_tool', '--session', SESSION]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no_such_tool/);
    const bad = await cli(['tool', 'transcript_grep', 'pattern=a', 'limit=lots', '--session', SESSION]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /limit/);
  });

  test('export writes rows transcript.append takes back; import stores them once, and again adds nothing', async () => {
    const dir = tempHome();
    const file = path.join(dir, 'exported.jsonl');
    const summary = await json<{ rows: number; images_inlined: number }>(['export', SESSION, '--out', file]);
    const source = await allRows(client, SESSION);
    const appendable = source.filter((r) => r.body.kind !== 'notice');
    assert.equal(summary.rows, appendable.length);
    assert.equal(summary.images_inlined, 1);
    const lines = fs.readFileSync(file, 'utf8').trimEnd().split('\n');
    assert.equal(lines.length, appendable.length);
    // Without --out the rows go to stdout and nothing else does.
    const piped = await cli(['export', SESSION]);
    assert.equal(piped.stdout, `${lines.join('\n')}\n`);

    const first = await cli(['import', file, '--session', 'cli-copy']);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, new RegExp(`^imported .+ \\(albedo\\) into cli-copy\\n  ${appendable.length} rows: 31 user, 30 assistant, 30 tool results · 30 tool calls · 1 images\\n  ${appendable.length} new, 0 already stored\n$`));
    const copy = await allRows(client, 'cli-copy');
    assert.deepEqual(
      copy.map((r) => [r.key, r.body]),
      appendable.map((r) => [r.key ?? `seq:${r.seq}`, r.body]),
      'the copy holds the same rows, the image stored by the same hash',
    );
    const again = await json<{ added: number; already_stored: number }>(['import', file, '--session', 'cli-copy']);
    assert.equal(again.added, 0);
    assert.equal(again.already_stored, appendable.length);

    // A broken line in an export is named, and nothing of the file is stored.
    const broken = path.join(dir, 'broken-export.jsonl');
    fs.writeFileSync(broken, [lines[0], lines[1], '{"kind":"user","content":[]}', lines[3]].join('\n'));
    const b = await cli(['import', broken, '--session', 'cli-broken']);
    assert.equal(b.code, 1);
    assert.match(b.stderr, /^albedo: line 3 is not a row transcript\.append accepts: .*\nnothing was stored/);
    const cut = path.join(dir, 'cut-export.jsonl');
    fs.writeFileSync(cut, `${lines[0]}\n${lines[1]!.slice(0, 20)}\n`);
    const c = await cli(['import', cut, '--session', 'cli-broken']);
    assert.equal(c.code, 1);
    assert.match(c.stderr, /^albedo: line 2: not JSON/);
    assert.equal((await client.call('session.list', {})).sessions.some((x) => x.session === 'cli-broken'), false);
  });

  test('an import that leaves the search index a thousand rows or more behind says so, with the count; --json always gives it', async () => {
    const off = await startDaemon({ env: { ALBEDO_SEARCH_INDEXER: 'off' } });
    try {
      const env = { ALBEDO_HOME: off.home, ALBEDO_SOCKET: off.socket };
      const dir = tempHome();
      const small = path.join(dir, 'small.jsonl');
      fs.writeFileSync(small, `${Array.from({ length: 5 }, (_, i) => JSON.stringify(user(`small ${i}`))).join('\n')}\n`);
      const s = await cli(['import', small, '--session', 'small'], { env });
      assert.equal(s.code, 0, s.stderr);
      assert.doesNotMatch(s.stdout, /search/);
      const big = path.join(dir, 'big.jsonl');
      fs.writeFileSync(big, `${Array.from({ length: 1200 }, (_, i) => JSON.stringify(user(`big ${i}`))).join('\n')}\n`);
      const b = await cli(['import', big, '--session', 'big'], { env });
      assert.equal(b.code, 0, b.stderr);
      assert.match(b.stdout, /\n {2}search: 1,205 rows not in the search index yet; searches read them one by one until it catches up \(`albedo status` shows how many are left\)\n$/);
      // Rows without keys are stored again: five more behind.
      const again = await cli(['import', small, '--session', 'small', '--json'], { env });
      assert.equal((JSON.parse(again.stdout) as { search_rows_behind: number }).search_rows_behind, 1210);
    } finally {
      await off.stop();
      fs.rmSync(off.home, { recursive: true, force: true });
    }
  });

  test("import reads another agent's transcript, and a malformed line stores nothing", async () => {
    const fixture = path.join(root, 'test/fixtures/transcripts/codex-rollout.jsonl');
    const r = await json<{ session: string; format: string; rows: number; added: number }>(['import', fixture]);
    assert.equal(r.format, 'codex');
    assert.equal(r.session, 'codex-rollout');
    assert.equal(r.added, r.rows);
    const stored = (await client.call('session.list', {})).sessions.find((s) => s.session === 'codex-rollout');
    assert.equal(stored?.rows, r.rows);

    const bad = path.join(tempHome(), 'broken.jsonl');
    fs.writeFileSync(bad, `${fs.readFileSync(fixture, 'utf8').split('\n').slice(0, 3).join('\n')}\n{not json\n`);
    const b = await cli(['import', bad, '--format', 'codex']);
    assert.equal(b.code, 1);
    assert.match(b.stderr, /line 4: not JSON/);
    assert.match(b.stderr, /nothing was stored/);
    assert.equal((await client.call('session.list', {})).sessions.some((s) => s.session === 'broken'), false);

    // A call id used again before its first call has a result: refused whole, named, no session made.
    const reused = path.join(tempHome(), 'reused-ids.jsonl');
    const call = (id: string) => JSON.stringify({ kind: 'assistant', content: [{ type: 'tool_call', id, name: 'run', arguments: {} }] });
    fs.writeFileSync(reused, [JSON.stringify({ kind: 'user', content: [{ type: 'text', text: 'go' }] }), call('c1'), call('c1')].join('\n') + '\n');
    const u = await cli(['import', reused]);
    assert.equal(u.code, 1);
    assert.match(u.stderr, /tool call id "c1" at row 3 is used again while its call at row 2 has no result yet\nnothing was stored/);
    assert.equal((await client.call('session.list', {})).sessions.some((s) => s.session === 'reused-ids'), false);
  });

  // issue 30, defect 9: a sentence only a subagent's file holds was found in no session.
  test("importing a Claude Code session brings its subagents' files as child sessions, says so, and again adds nothing", async () => {
    const sid = '7c1f0e2a-5b7d-4c1e-9f3a-2d6b8e4a1c90';
    const dir = tempHome();
    const main = path.join(dir, `${sid}.jsonl`);
    fs.copyFileSync(path.join(root, 'test/fixtures/transcripts/claude-code.jsonl'), main);
    fs.mkdirSync(path.join(dir, sid, 'subagents'), { recursive: true });
    fs.copyFileSync(path.join(root, 'test/fixtures/transcripts/claude-code-subagent.jsonl'), path.join(dir, sid, 'subagents', 'agent-a51c0de.jsonl'));
    fs.writeFileSync(path.join(dir, sid, 'subagents', 'notes.txt'), 'not a subagent file');
    const child = `${sid}:agent-a51c0de`;
    const sentence = 'applied twice: applyCoupon runs once in cartTotal';

    const checked = await cli(['import', main, '--dry-run']);
    assert.equal(checked.code, 0, checked.stderr);
    assert.match(checked.stdout, /\n {2}1 subagent checked as child sessions of 7c1f0e2a-\S+:\n {4}agent-a51c0de\.jsonl: 4 rows\n?$/);
    assert.equal((await client.call('session.list', {})).sessions.some((x) => x.session === child), false, 'a dry run stores nothing');

    const r = await cli(['import', main]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`\\n {2}1 subagent imported as child sessions of ${sid}:\\n {4}${child}: 4 rows \\(4 new, 0 already stored\\)\\n?$`));
    const listed = (await client.call('session.list', {})).sessions;
    assert.equal(listed.find((x) => x.session === child)?.parent, sid);
    assert.equal(listed.find((x) => x.session === child)?.rows, 4);
    const found = await client.call('transcript_grep', { pattern: sentence });
    assert.deepEqual([...new Set(found.matches.map((m) => m.session))], [child]);

    const again = await json<{ added: number; subagents: Array<{ session: string; rows: number; added: number; already_stored: number }> }>(['import', main]);
    assert.equal(again.added, 0);
    assert.deepEqual(again.subagents.map((c) => [c.session, c.rows, c.added, c.already_stored]), [[child, 4, 0, 4]]);
  });

  test('slash forms go to the daemon as typed, with --session or ALBEDO_SESSION', async () => {
    const ctx = await cli(['--session', SESSION, '/context']);
    assert.equal(ctx.code, 0, ctx.stderr);
    assert.match(ctx.stdout, /^session cli-main · strategy rolling/);
    assert.match(ctx.stdout, /^\[S+/m, 'shown as the inspector');
    const viaEnv = await cli(['/context', '--json'], { env: { ALBEDO_SESSION: SESSION } });
    assert.equal(Observation.parse(JSON.parse(viaEnv.stdout)).session, SESSION);
    const ext = await cli(['/extensions', '--session', SESSION]);
    assert.match(ext.stdout, /\[x\] rolling/);
    const reload = await cli(['/reload']);
    assert.match(reload.stdout, /^configuration version \d+/);
    const noSession = await cli(['/context']);
    assert.equal(noSession.code, 2);
    assert.match(noSession.stderr, /\/context needs a session/);
    const unknown = await cli(['/frobnicate', '--session', SESSION]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command \/frobnicate .*\[unknown_command\]/);
  });

  test('exit codes: 1 with the problem and the fix when the daemon says no, 2 for usage', async () => {
    const missing = await cli(['context', 'no-such-session']);
    assert.equal(missing.code, 1);
    assert.equal(missing.stdout, '');
    assert.equal(missing.stderr, 'albedo: unknown session "no-such-session" [unknown_session]\nlist the sessions with: albedo sessions\n');
    const asJson = await cli(['context', 'no-such-session', '--json']);
    assert.equal(asJson.code, 1);
    assert.deepEqual(JSON.parse(asJson.stderr), {
      error: { message: 'unknown session "no-such-session" [unknown_session]', exit_code: 1, hint: 'list the sessions with: albedo sessions' },
    });
    for (const args of [['frobnicate'], ['read', SESSION, '--limit', 'many'], ['context'], ['grep'], ['import', '/nonexistent/file.jsonl'], ['import', 'x', '--format', 'word'], []]) {
      const r = await cli(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.notEqual(r.stderr, '', args.join(' '));
    }
  });

  test('no daemon: exit 1, the message names the socket and how to start one, and none is started', async () => {
    const home = tempHome();
    const socket = path.join(home, 'albedod.sock');
    const r = await cli(['status'], { env: { ALBEDO_HOME: home, ALBEDO_SOCKET: socket } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`^albedo: no albedod is running for home ${home} \\(nothing answers at ${socket}\\)\\nstart it with: albedod`));
    assert.equal(fs.existsSync(socket), false, 'the CLI must not start a daemon');
    assert.deepEqual(fs.readdirSync(home), []);
  });

  test('colour only on a terminal, and never with NO_COLOR', async () => {
    const tty = await cli(['context', SESSION], { tty: true });
    assert.ok(tty.stdout.includes(ESC), 'a terminal gets colour');
    const noColor = await cli(['context', SESSION], { tty: true, env: { NO_COLOR: '1' } });
    assert.ok(!noColor.stdout.includes(ESC));
    assert.equal(noColor.stdout.replace(/\(\d+ s ago\)/g, ''), stripStyles(tty.stdout).replace(/\(\d+ s ago\)/g, ''), 'the same text, without escapes');
    const json = await cli(['context', SESSION, '--json'], { tty: true });
    assert.ok(!json.stdout.includes(ESC), 'JSON is never coloured');
  });
});

describe('albedo as a process', () => {
  const entry = path.join(root, 'cli/main.ts');
  const spawnCli = (args: string[], env: Record<string, string> = {}) =>
    spawnSync(process.execPath, ['--import', 'tsx', entry, ...args], { cwd: root, env: { ...process.env, ALBEDO_HOME: d.home, ALBEDO_SOCKET: d.socket, NO_COLOR: '', FORCE_COLOR: '', ...env }, encoding: 'utf8' });

  test('exits 0, 1 and 2 as runCli says; piped output has no colour', () => {
    const ok = spawnCli(['context', SESSION]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /^session cli-main/);
    assert.ok(!ok.stdout.includes(ESC));
    assert.equal(spawnCli(['context', 'no-such-session']).status, 1);
    assert.equal(spawnCli(['no-such-verb']).status, 2);
  });

  // `script` gives the command a pseudo-terminal, so the process sees a real TTY.
  const hasScript = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;
  test('on a terminal the output is coloured, unless NO_COLOR is set', { skip: hasScript ? false : 'util-linux script is not installed' }, () => {
    const underTty = (env: Record<string, string>) => {
      const cmd = [process.execPath, '--import', 'tsx', entry, 'context', SESSION].map((a) => `'${a}'`).join(' ');
      return spawnSync('script', ['-qec', cmd, '/dev/null'], { cwd: root, env: { ...process.env, ALBEDO_HOME: d.home, ALBEDO_SOCKET: d.socket, FORCE_COLOR: '', TERM: 'xterm', ...env }, encoding: 'utf8' });
    };
    const coloured = underTty({ NO_COLOR: '' });
    assert.equal(coloured.status, 0, coloured.stdout);
    assert.ok(coloured.stdout.includes(ESC), 'a terminal gets colour');
    const plain = underTty({ NO_COLOR: '1' });
    assert.equal(plain.status, 0, plain.stdout);
    assert.match(plain.stdout, /session cli-main/);
    assert.ok(!plain.stdout.includes(ESC), 'NO_COLOR turns colour off');
  });

  test('stop: the daemon stops in order and the socket is gone when albedo returns', async () => {
    const r = await cli(['stop', '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { ok: true, stopped: true });
    const code = await new Promise<number | null>((resolve) => (d.proc.exitCode !== null ? resolve(d.proc.exitCode) : d.proc.once('exit', resolve)));
    assert.equal(code, 0);
    assert.equal(fs.existsSync(d.socket), false);
  });
});
