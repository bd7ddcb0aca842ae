// docs/clients.md's Python client, run as the page prints it against a real daemon: it must
// initialize, append, prepare through a compaction that asks it for a summary, and map the
// prepared request onto Anthropic's Messages format. Skipped (saying why) without python3.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { startDaemon, tempHome } from '../e2e/harness.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const page = fs.readFileSync(path.join(root, 'docs/clients.md'), 'utf8');
const python = spawnSync('python3', ['--version'], { encoding: 'utf8' });
const skip = python.status === 0 ? false : 'python3 is not on PATH, so the Python client in docs/clients.md was not run';

function block(name: string): string {
  const m = new RegExp(`<!-- ${name} -->\\n\`\`\`python\\n([\\s\\S]*?)\`\`\``).exec(page);
  assert.ok(m, `docs/clients.md has a ${name} block`);
  return m[1]!;
}

test('the client block is about thirty lines of standard library Python', () => {
  const code = block('python-client');
  const lines = code.split('\n').filter((l) => l.trim() !== '').length;
  assert.ok(lines <= 40, `${lines} lines`);
  for (const m of code.matchAll(/^import (.+)$/gm)) for (const mod of m[1]!.split(',')) assert.ok(['json', 'os', 'socket'].includes(mod.trim()), mod);
});

test('the Python client of docs/clients.md answers summarize and gets a compacted request', { skip }, async () => {
  const home = tempHome();
  // A small window, so six turns are past the trigger and prepare compacts through the client.
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: 1600 } }));
  const daemon = await startDaemon({ home });
  try {
    const script = path.join(home, 'client.py');
    fs.writeFileSync(script, `${block('python-anthropic')}\n${block('python-client')}\nprint(json.dumps(to_anthropic(prepared, "claude-sonnet-4-5")))\n`);
    const env: NodeJS.ProcessEnv = { ...process.env, ALBEDO_HOME: home };
    delete env.ALBEDO_SOCKET;
    const r = spawnSync('python3', [script], { encoding: 'utf8', env, timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    const [summary, request] = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(summary!.compacted, true, r.stdout);
    const session = summary!.session as string;
    const client = await daemon.connect();
    const ctx = await client.call('context', { session });
    assert.equal(ctx.observation.last_compaction?.backend, 'client', 'the summary came from the Python client');
    const messages = request!.messages as Array<{ role: string; content: Array<{ type: string; text?: string }> }>;
    assert.ok(messages.length > 0 && messages.every((m, i) => i === 0 || m.role !== messages[i - 1]!.role), 'roles alternate');
    assert.ok(JSON.stringify(messages).includes('Summary of the conversation so far'), 'the answered summary is in the request');
    assert.equal(typeof request!.system, 'string');
  } finally {
    await daemon.stop();
  }
});
