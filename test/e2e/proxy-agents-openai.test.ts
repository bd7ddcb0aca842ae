// Real agents through the proxy's OpenAI wires: pi with an `openai-completions` provider (Chat
// Completions) and Codex with a `wire_api = "responses"` provider (test/support/agents.ts),
// against a scripted upstream (openai-upstream.ts) behind the daemon's proxy, on a session that
// outgrows a 40,000-token window: 30 shell reads of 6 KB files. The verdict is what the
// upstream received and what the transcript holds.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { AlbedoClient } from '../../protocol/client.ts';
import { ensureAgents, runCodex, runPi } from '../support/agents.ts';
import { historyOf, openaiFileRead, type OpenAIFileRead } from '../support/openai-file-read.ts';
import { startOpenAIUpstream, type OpenAIUpstream, type OpenAIWire } from '../support/openai-upstream.ts';
import { LEDGER_HEADER } from '../../strategies/notes/ledger.ts';
import { startEach, tempHome } from './harness.ts';

const WINDOW = 40_000;
const KEY = 'sk-openai-proxy-e2e';
const start = startEach();
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-openai-agents-'));
const upstreams: OpenAIUpstream[] = [];

before(async () => {
  await ensureAgents();
});
after(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
  fs.rmSync(scratch, { recursive: true, force: true });
});

interface Run {
  sc: OpenAIFileRead;
  up: OpenAIUpstream;
  stdout: string;
  client: AlbedoClient;
}

async function throughProxy(agent: 'pi' | 'codex'): Promise<Run> {
  const dir = fs.mkdtempSync(path.join(scratch, `${agent}-`));
  const wire: OpenAIWire = agent === 'pi' ? 'chat' : 'responses';
  const sc = openaiFileRead({ dir: path.join(dir, 'work'), wire, toolName: agent === 'pi' ? 'bash' : 'exec_command', argKey: agent === 'pi' ? 'command' : 'cmd' });
  const up = await startOpenAIUpstream({ script: sc.script });
  upstreams.push(up);
  const home = tempHome();
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: WINDOW } }));
  const daemon = await start({ home, env: { ALBEDO_OPENAI_UPSTREAM: up.baseUrl } });
  const client = await daemon.connect();
  const base = (await client.call('daemon.status', {})).proxy.openai_base_url;
  assert.ok(base !== null);
  const common = { baseUrl: base, apiKey: KEY, home: path.join(dir, 'home'), cwd: path.join(dir, 'work'), prompt: sc.prompt, timeoutMs: 5 * 60_000 };
  const r = agent === 'pi' ? await runPi({ ...common, model: 'gpt-5.5', api: 'openai-completions' }) : await runCodex(common);
  assert.equal(r.code, 0, `${agent} exited ${r.code}: ${r.stderr.slice(-3000)}`);
  return { sc, up, stdout: r.stdout, client };
}

async function checkRun(agent: string, wire: OpenAIWire, run: Run, diagnostic: (s: string) => void): Promise<void> {
  const { sc, up, client } = run;
  assert.ok(run.stdout.includes(sc.finalText), `${agent} printed the final answer: ${run.stdout.slice(-400)}`);
  // The proxy ran the model's transcript_grep for the first file, long evicted, and the model quoted it.
  assert.ok(run.stdout.includes(sc.recalledText), `${agent} printed what the memory tool found`);
  const conv = up.of(wire, { conversation: true }).filter((r) => r.status === 200);
  const recall = conv.filter((r) => [...historyOf(r).calls.values()].some((args) => args.includes('"pattern"')));
  assert.ok(conv.length >= 31, `${conv.length} conversation requests`);
  for (const r of conv) {
    const tokens = Math.ceil(Buffer.byteLength(r.rawBody) / 4);
    assert.ok(tokens <= WINDOW, `request #${r.seq} is ~${tokens} tokens, over the ${WINDOW}-token window`);
    assert.deepEqual(sc.unpaired(r), [], `request #${r.seq} pairs every call with its output`);
  }
  const first = sc.files[0]!;
  assert.ok(conv[1]!.rawBody.includes(`${first.marker} line 010`), 'the first file was read into the request');
  // The last request before the recall (the grep's own output quotes the first file again).
  assert.ok(recall.length >= 1, 'the follow-up with the grep output went upstream');
  const last = conv[conv.length - 1 - recall.length]!;
  assert.ok(!last.rawBody.includes(`${first.marker} line 010`), 'the first file has left the request by the last step');
  // The evicted reads reached the model as the notes' artifact ledger, by their exact commands.
  assert.ok(last.rawBody.includes(LEDGER_HEADER.slice(0, 60)), 'the artifact ledger went upstream');
  assert.ok(sc.files.some((f) => last.rawBody.includes(`\`cat ${f.path}\``)), 'the ledger names the evicted reads by their commands');
  // The summaries went to the same upstream, in the agent's wire, with the agent's own key.
  const summaries = up.of(wire, { conversation: false }).filter((r) => /<transcript>|<previous-summary>/.test(r.rawBody));
  assert.ok(summaries.length > 0, 'the upstream wrote the summaries');
  for (const s of summaries) assert.equal(s.headers.authorization, `Bearer ${KEY}`);
  const { sessions } = await client.call('session.list', {});
  assert.equal(sessions.length, 1, `one session, no fork: ${JSON.stringify(sessions)}`);
  const session = sessions[0]!.session;
  for (const f of sc.files) {
    const hits = await client.call('transcript_grep', { session, pattern: `${f.marker} line 050` });
    assert.equal(hits.total, 1, `${f.marker} is stored once`);
  }
  const ctx = await client.call('context', { session });
  const largest = Math.max(...conv.map((r) => Math.ceil(Buffer.byteLength(r.rawBody) / 4)));
  diagnostic(`${agent}: ${conv.length} conversation requests, the largest ~${largest} tokens (bytes/4) against ${WINDOW}; ${summaries.length} summaries upstream`);
  assert.ok(ctx.observation.provider_input_tokens !== null && ctx.observation.provider_input_tokens > 0, 'the usage reached /context');
  assert.equal(ctx.observation.last_compaction?.backend, 'upstream');
}

test('pi with an openai-completions provider runs through the proxy on a session that outgrows the window', { timeout: 10 * 60_000 }, async (t) => {
  await checkRun('pi', 'chat', await throughProxy('pi'), (s) => t.diagnostic(s));
});

test('Codex with a responses provider runs through the proxy on a session that outgrows the window', { timeout: 10 * 60_000 }, async (t) => {
  const run = await throughProxy('codex');
  await checkRun('codex', 'responses', run, (s) => t.diagnostic(s));
  // Codex sends the answer's items back: the chain matched them, so the session never forked.
  const turns = run.up.of('responses', { conversation: true });
  assert.equal(turns[0]!.headers['x-albedo-token'], undefined);
});
