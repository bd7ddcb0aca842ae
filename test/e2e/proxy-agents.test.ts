// Real agents through the proxy: Claude Code and pi (pinned, installed into .agents/ by
// test/support/agents.ts) run against a scripted upstream behind the daemon's proxy, on a
// session that outgrows a 40,000-token window (30 shell reads of 6 KB files). What the
// upstream received is the verdict: every request fits and pairs its calls, the oldest file
// has left the request by the end, the summaries used the agent's key, and the transcript
// holds every output once, also across a 529 that Claude Code retries.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ensureAgents, runClaude, runPi } from '../support/agents.ts';
import { fileReadScenario, type FileReadScenario } from '../support/file-read-scenario.ts';
import { answer, blocksOf, startScriptedUpstream, type MessagesBody, type ScriptedUpstream } from '../support/scripted-upstream.ts';
import { LEDGER_HEADER } from '../../strategies/notes/ledger.ts';
import { startEach, tempHome } from './harness.ts';

const WINDOW = 40_000;
const KEY = 'sk-ant-proxy-e2e';
const start = startEach();
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-agents-'));
const upstreams: ScriptedUpstream[] = [];

before(async () => {
  await ensureAgents();
});
after(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
  fs.rmSync(scratch, { recursive: true, force: true });
});

/** Every tool_use of a request has its tool_result in it, and every result its call. */
function unpaired(body: MessagesBody): string[] {
  const calls = new Set<string>();
  const results = new Set<string>();
  for (const b of (body.messages ?? []).flatMap(blocksOf)) {
    if (b.type === 'tool_use' && typeof b.id === 'string') calls.add(b.id);
    if (b.type === 'tool_result' && typeof b.tool_use_id === 'string') results.add(b.tool_use_id);
  }
  return [...[...calls].filter((c) => !results.has(c)), ...[...results].filter((r) => !calls.has(r))];
}

interface Run {
  sc: FileReadScenario;
  up: ScriptedUpstream;
  stdout: string;
  /** The agent's HOME (its own session files are under it). */
  home: string;
  client: Awaited<ReturnType<Awaited<ReturnType<typeof start>>['connect']>>;
}

async function throughProxy(agent: 'claude' | 'pi', opts: { overloadAt?: number } = {}): Promise<Run> {
  const dir = fs.mkdtempSync(path.join(scratch, `${agent}-`));
  const sc = fileReadScenario({ dir: path.join(dir, 'work'), toolName: agent === 'claude' ? 'Bash' : 'bash', recall: true });
  let overloaded = false;
  const up = await startScriptedUpstream({
    script: (req) => {
      if (req.conversation && req.index === opts.overloadAt && !overloaded) {
        overloaded = true;
        return answer.overloaded();
      }
      return sc.script(req);
    },
  });
  upstreams.push(up);
  const home = tempHome();
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: WINDOW } }));
  const daemon = await start({ home, env: { ALBEDO_ANTHROPIC_UPSTREAM: up.baseUrl } });
  const client = await daemon.connect();
  const base = (await client.call('daemon.status', {})).proxy.anthropic_base_url;
  assert.ok(base !== null);
  const common = { baseUrl: base, apiKey: KEY, home: path.join(dir, 'home'), cwd: path.join(dir, 'work'), prompt: sc.prompt, timeoutMs: 5 * 60_000 };
  const r = agent === 'claude' ? await runClaude(common) : await runPi({ ...common, model: 'claude-sonnet-4-5' });
  assert.equal(r.code, 0, `${agent} exited ${r.code}: ${r.stderr.slice(-2000)}`);
  if (opts.overloadAt !== undefined) assert.ok(overloaded, 'the 529 was sent');
  return { sc, up, stdout: r.stdout, client, home: common.home };
}

async function checkRun(agent: string, run: Run): Promise<void> {
  const { sc, up, client } = run;
  assert.ok(run.stdout.includes(sc.finalText), `${agent} printed the final answer`);
  // The proxy ran the model's transcript_grep for the first file, long evicted, and the model quoted it.
  assert.ok(run.stdout.includes(sc.recalledText), `${agent} printed what the memory tool found: ${run.stdout.slice(-500)}`);
  assert.ok(!run.stdout.includes('transcript_grep'), `${agent} never saw the memory tool`);
  const conv = up.messages({ conversation: true }).filter((r) => r.status === 200);
  const recallRequests = conv.filter((r) => r.rawBody.includes('"name":"transcript_grep","input"'));
  assert.ok(recallRequests.length >= 1, 'the follow-up with the grep result went upstream');
  assert.ok(conv.length >= 31, `${conv.length} conversation requests`);
  for (const r of conv) {
    const tokens = Math.ceil(Buffer.byteLength(r.rawBody) / 4);
    assert.ok(tokens <= WINDOW, `request #${r.index} is ~${tokens} tokens, over the ${WINDOW}-token window`);
    assert.deepEqual(unpaired(r.body), [], `request #${r.index} pairs every call with its result`);
  }
  // The first file's content (its lines, not a summary's mention of its marker) is gone by the end.
  const first = sc.files[0]!;
  // The last request before the recall: the grep's own result quotes the first file again.
  const last = conv[conv.length - 1 - recallRequests.length]!;
  assert.ok(conv[1]!.rawBody.includes(`${first.marker} line 010`), 'the first file was read into the request');
  assert.ok(!last.rawBody.includes(`${first.marker} line 010`), 'the first file has left the request by the last step');
  // What the agent did before the compaction reached the model as the notes' artifact ledger:
  // the shell reads it ran, each by its exact command.
  assert.ok(last.rawBody.includes(LEDGER_HEADER.slice(0, 60)), 'the artifact ledger went upstream');
  assert.ok(sc.files.some((f) => last.rawBody.includes(`\`cat ${f.path}\``)), 'the ledger names the evicted reads by their commands');
  // The summaries went to the same upstream with the agent's own key.
  const summaries = up.messages({ conversation: false }).filter((r) => /<transcript>|<previous-summary>/.test(r.rawBody));
  assert.ok(summaries.length > 0, 'the upstream wrote the summaries');
  for (const s of summaries) assert.equal(s.headers['x-api-key'], KEY);
  // The transcript holds every file's output exactly once.
  const { sessions } = await client.call('session.list', {});
  assert.equal(sessions.length, 1, JSON.stringify(sessions));
  const session = sessions[0]!.session;
  for (const f of sc.files) {
    // A line deep in the file: the recall's grep call, its result and the final answer quote line 001.
    const hits = await client.call('transcript_grep', { session, pattern: `${f.marker} line 050` });
    assert.equal(hits.total, 1, `${f.marker} is stored once`);
  }
  // /context shows what the upstream measured for the last request.
  const ctx = await client.call('context', { session });
  assert.ok(ctx.observation.provider_input_tokens !== null && ctx.observation.provider_input_tokens > 0);
  assert.ok((ctx.observation.last_compaction?.backend ?? '') === 'upstream', JSON.stringify(ctx.observation.last_compaction));
}

/** Every tool name Claude Code's own session files (JSONL under ~/.claude/projects) show it calling. */
function claudeToolCalls(home: string): string[] {
  const root = path.join(home, '.claude', 'projects');
  const names: string[] = [];
  const files = fs.existsSync(root) ? (fs.readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith('.jsonl')) : [];
  assert.ok(files.length > 0, `Claude Code wrote its session under ${root}`);
  for (const f of files) {
    for (const line of fs.readFileSync(path.join(root, f), 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      const entry = JSON.parse(line) as { message?: { content?: unknown } };
      const content = entry.message?.content;
      if (!Array.isArray(content)) continue;
      for (const b of content as Array<{ type?: unknown; name?: unknown }>) if (b.type === 'tool_use' && typeof b.name === 'string') names.push(b.name);
    }
  }
  return names;
}

test('Claude Code runs through the proxy on a session that outgrows the window, across a 529 it retries', { timeout: 10 * 60_000 }, async () => {
  const run = await throughProxy('claude', { overloadAt: 6 });
  await checkRun('claude', run);
  const called = new Set(claudeToolCalls(run.home));
  assert.deepEqual([...called], ['Bash'], 'its own session file shows only calls of its own tools');
  assert.ok(run.up.messages({ conversation: true }).some((r) => r.status === 529));
});

test('pi runs through the proxy on a session that outgrows the window', { timeout: 10 * 60_000 }, async () => {
  await checkRun('pi', await throughProxy('pi'));
});
