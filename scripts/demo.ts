// npm run demo: the main job end to end on the embedded defaults. Starts a real albedod in a
// temporary home, plays a generated coding session into it over the socket, prepares before
// every model call with a small window so rolling compacts on the offline extractive
// summarizer, prints /context before and after, and stops the daemon.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AlbedoClient } from '../protocol/client.ts';
import type { Result } from '../protocol/methods.ts';
import { demoSession } from './demo-session.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WINDOW = 6000;

function banner(title: string): void {
  process.stdout.write(`\n${'─'.repeat(78)}\n${title}\n${'─'.repeat(78)}\n`);
}

async function main(): Promise<void> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-demo-'));
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: WINDOW } }, null, 2));
  const daemon = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'daemon/main.ts')], {
    cwd: root,
    env: { ...process.env, ALBEDO_HOME: home, CI: '1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    daemon.stdout.setEncoding('utf8').on('data', (d: string) => {
      if (d.includes('listening on')) resolve();
    });
    daemon.once('exit', (code) => reject(new Error(`albedod exited with ${code}`)));
  });
  process.stdout.write(`albedod running in ${home} (window ${WINDOW} tokens, extractive summarizer)\n`);

  const client = await AlbedoClient.connect(path.join(home, 'albedod.sock'), { client: { name: 'albedo-demo', version: '1' } });
  try {
    const { session } = await client.call('session.open', { session: 'demo', workspace: '/repo/todo-api' });
    const instructions = 'You are a coding agent working in /repo/todo-api. Be precise; run the tests before you claim a fix.';
    const tools = [
      { name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
      { name: 'bash', description: 'Run a shell command', input_schema: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } },
    ];
    let shownBefore = false;
    let compactions = 0;
    let last: Result<'prepare'> | undefined;
    for (const [i, turn] of demoSession().entries()) {
      await client.call('transcript.append', { session, rows: turn });
      const before = await client.call('context', { session, format: 'text' });
      last = await client.call('prepare', { session, model: 'claude-sonnet-4-5', instructions, tools });
      if (last.compacted) {
        compactions += 1;
        if (!shownBefore) {
          banner(`/context before the first compaction (turn ${i + 1})`);
          process.stdout.write(`${before.text}\n`);
          banner('/context after it');
          process.stdout.write(`${(await client.call('context', { session, format: 'text' })).text}\n`);
          const summary = last.inputs[0]?.content[0];
          banner('the summary the extractive backend wrote (first input of the request)');
          process.stdout.write(`${summary?.type === 'text' ? summary.text : '(none)'}\n`);
          shownBefore = true;
        }
      }
    }
    banner(`/context at the end: ${compactions} compaction(s) over the session`);
    process.stdout.write(`${(await client.call('context', { session, format: 'text' })).text}\n`);
    const grep = await client.call('transcript_grep', { session, pattern: 'ValidationError' });
    banner('the full transcript stays searchable: transcript_grep "ValidationError"');
    process.stdout.write(`${grep.total} matching row(s)\n${grep.matches.map((m) => `  #${m.seq}: ${m.preview}`).join('\n')}\n`);
  } finally {
    await client.close();
    daemon.kill('SIGTERM');
    await new Promise((resolve) => daemon.once('exit', resolve));
    fs.rmSync(home, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`demo failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
