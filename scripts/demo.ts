// npm run demo: the main job end to end on the embedded defaults. Starts a real albedod in a
// temporary home, plays a generated coding session into it over the socket, prepares before
// every model call with a small window so rolling compacts on the offline extractive
// summarizer, prints /context before and after; then plays the same session under lcm and
// snapcompact, shows lcm's tree and writes snapcompact's frames to a folder it names, greps a
// fact from evicted history, and stops the daemon.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DAEMON_NODE_FLAGS } from '../daemon/node-flags.ts';
import { AlbedoClient } from '../protocol/client.ts';
import type { Result } from '../protocol/methods.ts';
import { renderContext } from '../cli/context-view.ts';
import { colourWanted, makeStyle } from '../cli/io.ts';
import { demoSession } from './demo-session.ts';

/** What `albedo context <session>` prints, for the observation the daemon answered. */
function contextView(r: Result<'context'>): string {
  return renderContext(r.observation, { style: makeStyle(colourWanted(process.stdout, process.env)), columns: process.stdout.columns ?? 100 });
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WINDOW = 6000;

function banner(title: string): void {
  process.stdout.write(`\n${'─'.repeat(78)}\n${title}\n${'─'.repeat(78)}\n`);
}

async function main(): Promise<void> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-demo-'));
  fs.writeFileSync(
    path.join(home, 'extensions.json'),
    JSON.stringify({ rolling: { contextWindowTokens: WINDOW }, lcm: { contextWindowTokens: WINDOW }, snapcompact: { contextWindowTokens: 5000, archivePercent: 40 } }, null, 2),
  );
  const daemon = spawn(process.execPath, [...DAEMON_NODE_FLAGS, '--import', 'tsx', path.join(root, 'daemon/main.ts')], {
    cwd: root,
    env: { ...process.env, ALBEDO_HOME: home, CI: '1', ALBEDO_PROXY_PORT: process.env.ALBEDO_PROXY_PORT ?? '0' },
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
      const before = await client.call('context', { session });
      last = await client.call('prepare', { session, model: 'claude-sonnet-4-5', instructions, tools });
      if (last.compacted) {
        compactions += 1;
        if (!shownBefore) {
          banner(`/context before the first compaction (turn ${i + 1})`);
          process.stdout.write(`${contextView(before)}\n`);
          banner('/context after it');
          process.stdout.write(`${contextView(await client.call('context', { session }))}\n`);
          const summary = last.inputs[0]?.content[0];
          banner('the summary the extractive backend wrote (first input of the request)');
          process.stdout.write(`${summary?.type === 'text' ? summary.text : '(none)'}\n`);
          shownBefore = true;
        }
      }
    }
    banner(`/context at the end: ${compactions} compaction(s) over the session`);
    process.stdout.write(`${contextView(await client.call('context', { session }))}\n`);
    const grep = await client.call('transcript_grep', { session, pattern: 'ValidationError' });
    banner('the full transcript stays searchable: transcript_grep "ValidationError"');
    process.stdout.write(`${grep.total} matching row(s)\n${grep.matches.map((m) => `  #${m.seq}: ${m.preview}`).join('\n')}\n`);

    // The same session under the other two strategies, each chosen for its own session.
    for (const strategy of ['lcm', 'snapcompact'] as const) {
      const s = `demo-${strategy}`;
      await client.call('session.open', { session: s, workspace: '/repo/todo-api' });
      await client.call('extensions.select', { session: s, enable: [strategy] });
      let n = 0;
      for (const turn of demoSession()) {
        await client.call('transcript.append', { session: s, rows: turn });
        if ((await client.call('prepare', { session: s, model: 'claude-sonnet-4-5', instructions, tools })).compacted) n += 1;
      }
      banner(`/context under ${strategy}: ${n} compaction(s)`);
      process.stdout.write(`${contextView(await client.call('context', { session: s }))}\n`);
      if (strategy === 'lcm') {
        const list = await client.call('lcm_list', { session: s });
        banner(`lcm's tree: ${list.total} node(s); lcm_grep finds evicted detail and lcm_expand reads it back`);
        for (const x of list.nodes.slice(0, 6)) process.stdout.write(`  node ${x.node}  #${x.first_seq}-#${x.last_seq}  depth ${x.depth}${x.frontier ? '  frontier' : ''}  ${x.preview}\n`);
        const hit = await client.call('lcm_grep', { session: s, pattern: 'ValidationError' });
        const node = hit.source.matches.find((m) => m.node !== null)?.node;
        process.stdout.write(`  lcm_grep "ValidationError": ${hit.source.total} row(s), ${hit.summaries.total} summar${hit.summaries.total === 1 ? 'y' : 'ies'}\n`);
        if (node !== undefined && node !== null) {
          const page = await client.call('lcm_expand', { session: s, node, limit: 400 });
          process.stdout.write(`  lcm_expand {"node":${node}}:\n${page.text.replaceAll(/^/gm, '    ')}\n`);
        }
      } else {
        const listed = await client.call('frames', { session: s });
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-demo-frames-'));
        for (const [k, f] of listed.frames.entries()) {
          const png = await client.call('payload.get', { hash: f.hash });
          fs.writeFileSync(path.join(dir, `frame-${String(k + 1).padStart(3, '0')}.png`), Buffer.from(png.data, 'base64'));
        }
        banner(`snapcompact's frames: ${listed.frames.length} written to ${dir} (open them to see what the model reads)`);
        for (const f of listed.frames) process.stdout.write(`  ${f.width}x${f.height}  ${f.caption}\n`);
      }
    }
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
