// Issue 11, defect 3: a tool call whose arguments nest thousands of levels, stored before
// appends bounded nesting, must not break its session. The row is written straight into SQLite
// between two runs of the real daemon; then every reader and renderer meets it over the socket.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { AlbedoClient } from '../../protocol/client.ts';
import { depthMarker } from '../../protocol/json-depth.ts';
import type { ParamsIn } from '../../protocol/methods.ts';
import { openDb } from '../../storage/db.ts';
import { allRows, startDaemon, tempHome, type DaemonHandle } from './harness.ts';

const SESSION = 'deep';
const LEVELS = 5000;
const PLACEHOLDER = '"DEEP-PLACEHOLDER"';
type Rows = ParamsIn<'transcript.append'>['rows'];

function turn(i: number, args: Record<string, unknown>): Rows {
  return [
    { kind: 'user', content: [{ type: 'text', text: `step ${i}: update src/feature${i}.ts so that test ${i} passes` }] },
    { kind: 'assistant', content: [{ type: 'tool_call', id: `call_${i}`, name: 'write_file', arguments: args }] },
    { kind: 'tool_result', call_id: `call_${i}`, content: [{ type: 'text', text: `wrote feature ${i}\n`.repeat(40) }] },
    { kind: 'assistant', content: [{ type: 'text', text: `Done with step ${i}.` }] },
  ];
}

describe('a session holding a tool call nested 5,000 levels deep, stored before the bound', { timeout: 120_000 }, () => {
  let d: DaemonHandle;
  let client: AlbedoClient;
  const prompts: string[] = [];

  before(async () => {
    const home = tempHome();
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: 6000 } }));
    const first = await startDaemon({ home });
    const c = await first.connect();
    await c.call('session.open', { session: SESSION });
    for (let i = 0; i < 20; i++) {
      await c.call('transcript.append', { session: SESSION, rows: turn(i, i === 1 ? { content: 'DEEP-PLACEHOLDER' } : { path: `src/feature${i}.ts` }) });
    }
    await first.stop();

    // What a daemon before the bound stored, as migration 16 keeps it: the body and its derived
    // text, both 5,000 levels deep (the text kept, since today's derivation clamps the depth).
    const deep = `${'{"a":'.repeat(LEVELS - 1)}{"leaf":"bottom"}${'}'.repeat(LEVELS - 1)}`;
    // openDb registers the SQL functions the search index triggers call.
    const db = openDb(path.join(home, 'albedo.db'));
    const changed = db
      .prepare('UPDATE transcript SET body = replace(body, ?, ?), legacy_text = replace(albedo_row_text(seq, body, legacy_text), ?, ?) WHERE instr(body, ?) > 0')
      .run(PLACEHOLDER, deep, PLACEHOLDER, deep, PLACEHOLDER).changes;
    db.close();
    assert.equal(changed, 1);

    d = await startDaemon({ home });
    client = await d.connect({
      summarize: async (params) => {
        prompts.push(params.prompt);
        return { text: 'steps done.' };
      },
    });
  });
  after(async () => {
    await d.stop();
  });

  test('rows read back with the over-deep part as a marker', async () => {
    const rows = await allRows(client, SESSION);
    assert.equal(rows.length, 80);
    const call = rows.flatMap((r) => (r.body.kind === 'assistant' ? r.body.content : [])).find((p) => p.type === 'tool_call' && p.id === 'call_1');
    assert.ok(call?.type === 'tool_call');
    const text = JSON.stringify(call.arguments);
    assert.ok(text.startsWith(`{"content":${'{"a":'.repeat(63)}"${depthMarker()}"`), text.slice(0, 200));
  });

  test('transcript_read and transcript_grep answer', async () => {
    const read = await client.call('transcript_read', { session: SESSION, limit: 1_000_000 });
    assert.ok(read.text.includes('"leaf":"bottom"'));
    const grep = await client.call('transcript_grep', { session: SESSION, pattern: 'bottom' });
    assert.equal(grep.total, 1);
  });

  test('prepare and a compaction succeed, and the summarizer sees the marker', async () => {
    const prepared = await client.call('prepare', { session: SESSION, model: 'claude-sonnet-4-5' });
    assert.ok(prepared.inputs.length > 0);
    assert.equal(prepared.compacted, true, 'the history is over the window: the prepare compacts it');
    // Right after that compaction a forced one may find nothing worth evicting; either way it answers.
    const compacted = await client.call('compact', { session: SESSION });
    assert.ok(compacted.compacted || /nothing worth evicting/.test(compacted.reason ?? ''), JSON.stringify(compacted));
    assert.ok(prompts.some((p) => p.includes(depthMarker())), 'the deep call was summarized');
    const again = await client.call('prepare', { session: SESSION, model: 'claude-sonnet-4-5' });
    assert.ok(again.inputs.length > 0);
    assert.equal((await allRows(client, SESSION)).length, 80);
    assert.ok(!d.stderr().includes('RangeError'), 'no stack overflow reached the log');
  });
});
