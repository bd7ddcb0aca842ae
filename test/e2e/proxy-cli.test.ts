// `albedo env` and `albedo run` against a real daemon with its proxy: the exports each agent
// reads, Codex's model provider (base URL without the token, the token in a header from the
// environment), and real Codex started by `albedo run codex` reaching a scripted upstream
// through the proxy while its own config.toml stays as it was.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ensureAgents } from '../support/agents.ts';
import { startEach, tempHome, type DaemonHandle } from './harness.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const entry = path.join(root, 'cli/main.ts');
const start = startEach();
const servers: http.Server[] = [];
after(() => {
  for (const s of servers) s.close();
});

interface Seen {
  path: string;
  headers: http.IncomingHttpHeaders;
}

/** A Responses upstream that answers every request with one streamed message ("all done"). */
async function responsesUpstream(): Promise<{ base: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push({ path: req.url ?? '', headers: req.headers });
      const item = { type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'all done', annotations: [] }] };
      const response = { id: 'resp_1', object: 'response', status: 'completed', model: 'gpt-5.5', output: [item], usage: { input_tokens: 900, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3, total_tokens: 903 } };
      const events = [
        { type: 'response.created', response: { ...response, status: 'in_progress', output: [] } },
        { type: 'response.output_item.added', output_index: 0, item: { ...item, status: 'in_progress', content: [] } },
        { type: 'response.output_text.delta', output_index: 0, item_id: 'msg_1', content_index: 0, delta: 'all done' },
        { type: 'response.output_item.done', output_index: 0, item },
        { type: 'response.completed', response },
      ];
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      events.forEach((e, i) => res.write(`event: ${e.type}\ndata: ${JSON.stringify({ ...e, sequence_number: i })}\n\n`));
      res.end();
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, seen };
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function albedo(d: DaemonHandle, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ALBEDO_HOME: d.home, ALBEDO_SOCKET: d.socket, NO_COLOR: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

test('albedo env prints each agent its variables; codex gets a model provider whose header carries the token', async () => {
  const d = await start({ env: { ALBEDO_OPENAI_UPSTREAM: 'http://127.0.0.1:9/v1' } });
  const token = fs.readFileSync(path.join(d.home, 'proxy.token'), 'utf8').trim();
  const claude = await albedo(d, ['env', 'claude']);
  assert.equal(claude.code, 0, claude.stderr);
  assert.match(claude.stdout, new RegExp(`^export ANTHROPIC_BASE_URL=http://127\\.0\\.0\\.1:\\d+/${token}/anthropic\\n$`));
  const openai = await albedo(d, ['env', 'openai']);
  assert.match(openai.stdout, new RegExp(`^export OPENAI_BASE_URL=http://127\\.0\\.0\\.1:\\d+/${token}/openai/v1\\n$`));

  const codex = await albedo(d, ['env', 'codex'], { OPENAI_API_KEY: 'sk-test' });
  assert.equal(codex.code, 0, codex.stderr);
  const lines = codex.stdout.trim().split('\n');
  assert.equal(lines[0], `export ALBEDO_PROXY_TOKEN=${token}`);
  assert.ok(lines.slice(1).every((l) => l.startsWith('#')), 'everything after the export is a comment, so eval "$(albedo env codex)" is safe');
  const toml = await albedo(d, ['env', 'codex', '--toml'], { OPENAI_API_KEY: 'sk-test' });
  assert.ok(!toml.stdout.includes(token), 'the config entry never holds the token');
  assert.match(toml.stdout, /^base_url = "http:\/\/127\.0\.0\.1:\d+\/openai\/v1"$/m);
  assert.match(toml.stdout, /^wire_api = "responses"$/m);
  assert.match(toml.stdout, /^env_key = "OPENAI_API_KEY"$/m);
  assert.match(toml.stdout, /^env_http_headers = \{ "x-albedo-token" = "ALBEDO_PROXY_TOKEN" \}$/m);
  // Signed in with ChatGPT (no API key): Codex's own login goes up instead of a key.
  const chatgpt = await albedo(d, ['env', 'codex', '--toml']);
  assert.match(chatgpt.stdout, /^requires_openai_auth = true$/m);
  assert.doesNotMatch(chatgpt.stdout, /env_key/);
  const json = JSON.parse((await albedo(d, ['env', 'codex', '--json'], { OPENAI_API_KEY: 'sk-test' })).stdout) as { codex: { token: string; base_url: string } };
  assert.equal(json.codex.token, token);

  const misuse = await albedo(d, ['env', 'claude', '--toml']);
  assert.equal(misuse.code, 2, 'a usage error');
});

test('albedo run codex reaches the upstream through the proxy with -c overrides; the token is sent as a header, never in a URL or a file', async () => {
  const { codex } = await ensureAgents();
  const up = await responsesUpstream();
  const d = await start({ env: { ALBEDO_OPENAI_UPSTREAM: up.base } });
  const token = fs.readFileSync(path.join(d.home, 'proxy.token'), 'utf8').trim();
  const home = tempHome();
  const codexHome = path.join(home, '.codex');
  fs.mkdirSync(codexHome, { recursive: true });
  const config = 'model = "gpt-5.5"\n';
  fs.writeFileSync(path.join(codexHome, 'config.toml'), config);
  const run = await albedo(d, ['run', 'codex', '--bin', codex, 'exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', 'say hi'], { HOME: home, CODEX_HOME: codexHome, OPENAI_API_KEY: 'sk-codex-test' });
  assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
  assert.match(run.stdout, /all done/);
  const turns = up.seen.filter((s) => s.path.startsWith('/v1/responses'));
  assert.ok(turns.length >= 1, `the upstream saw: ${up.seen.map((s) => s.path).join(', ')}`);
  for (const s of turns) {
    assert.equal(s.headers.authorization, 'Bearer sk-codex-test', "the agent's key goes up");
    assert.ok(!s.path.includes(token));
    assert.equal(s.headers['x-albedo-token'], undefined, 'the proxy token stops at the proxy');
  }
  assert.equal(fs.readFileSync(path.join(codexHome, 'config.toml'), 'utf8'), config, "the user's config.toml is unchanged");
  // The run's id rode in the base URL: its session is bound to the run (what `albedo mcp` looks up).
  const client = await d.connect();
  const { sessions } = await client.call('session.list', {});
  assert.equal(sessions.length, 1, JSON.stringify(sessions));
  assert.match(sessions[0]!.run ?? '', /^[0-9a-f]{12}$/);
});
