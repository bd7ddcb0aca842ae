// A long imported history over the real socket: the daemon's first prepare compacts it in stages
// (strategies/catch-up.ts), says so in the reply and in /context, elides the screenshots the
// stages left behind, and a restarted daemon sends the same request again without compacting.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import type { ParamsIn, Result } from '../../protocol/methods.ts';
import { CATCH_UP_ROWS } from '../../strategies/catch-up.ts';
import { pngBytes } from '../storage/factories.ts';
import { startDaemon, tempHome, type DaemonHandle } from './harness.ts';

type Rows = ParamsIn<'transcript.append'>['rows'];
const TURNS = Math.ceil((2.5 * CATCH_UP_ROWS) / 4);

function turn(i: number, png: Buffer | undefined): Rows {
  return [
    { kind: 'user', key: `u${i}`, content: [{ type: 'text', text: `step ${i}: fix src/f${i % 17}.ts` }] },
    { kind: 'assistant', key: `a${i}`, content: [{ type: 'tool_call', id: `c${i}`, name: 'read_file', arguments: { path: `src/f${i % 17}.ts` } }] },
    {
      kind: 'tool_result',
      key: `r${i}`,
      call_id: `c${i}`,
      content: [{ type: 'text', text: `export const f${i} = ${i};` }, ...(png === undefined ? [] : [{ type: 'image' as const, media_type: 'image/png' as const, data: png.toString('base64') }])],
    },
    { kind: 'assistant', key: `b${i}`, content: [{ type: 'text', text: `step ${i} done` }] },
  ];
}

const daemons: DaemonHandle[] = [];
after(async () => {
  for (const d of daemons) await d.stop();
});

test('a first prepare of a long history compacts it in stages, elides what they left behind, and survives a restart unchanged', async () => {
  const home = tempHome();
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: 8000 } }));
  let d = await startDaemon({ home });
  daemons.push(d);
  let client = await d.connect();
  await client.call('session.open', { session: 's' });
  const png = await pngBytes(40, 30);
  for (let i = 0; i < TURNS; i += 500) {
    const rows: Rows = [];
    for (let k = i; k < Math.min(TURNS, i + 500); k++) rows.push(...turn(k, k === 3 ? png : undefined));
    await client.call('transcript.append', { session: 's', rows });
  }
  const params = { session: 's', model: 'claude-sonnet-4-5', instructions: 'You are a coding agent.', tools: [] };
  const first: Result<'prepare'> = await client.call('prepare', params);
  assert.equal(first.compacted, true);
  const note = first.observation.notes.find((n) => /compaction\(s\) in stages/.test(n));
  assert.ok(note !== undefined, first.observation.notes.join('\n'));
  const stages = Number(/^(\d+) compaction\(s\) in stages/.exec(note)?.[1]);
  assert.ok(stages >= 2, note);
  assert.equal(first.observation.latched, false);
  assert.ok(first.observation.estimated_input_tokens < 8000, `${first.observation.estimated_input_tokens} tokens`);

  const db = new Database(path.join(home, 'albedo.db'), { readonly: true });
  try {
    const log = db.prepare<[], { ok: number; forced: number }>("SELECT ok, forced FROM compactions WHERE sid = (SELECT sid FROM sessions WHERE name = 's') ORDER BY id").all();
    assert.equal(log.length, stages + 1, 'one logged compaction a stage, and the request own');
    assert.ok(log.every((l) => l.ok === 1 && l.forced === 0));
    // The screenshot of turn 3 was evicted by the first stage: its payload is gone.
    assert.equal(db.prepare('SELECT count(*) FROM payloads').pluck().get(), 0);
  } finally {
    db.close();
  }
  const context: Result<'context'> = await client.call('context', { session: 's' });
  assert.equal(context.observation.last_compaction?.ok, true);

  // A restart changes nothing the model already saw: the same request, nothing compacted.
  await client.close();
  await d.stop();
  d = await startDaemon({ home });
  daemons.push(d);
  client = await d.connect();
  const again: Result<'prepare'> = await client.call('prepare', params);
  assert.equal(again.compacted, false);
  assert.deepEqual(again.inputs, first.inputs);
  await client.close();
});
