// The prepare reply over the real socket: a prepare that repeats its predecessor (same head,
// same prompt) answers under the same prepared id and stores nothing new, anything that changes
// what would be sent makes a new record, and the bytes a client reads are exactly the JSON of
// the reply whether it is assembled from kept pieces or a batch member.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import type { AlbedoClient } from '../../protocol/client.ts';
import type { Result } from '../../protocol/methods.ts';
import { rawConnection, startDaemon, type DaemonHandle } from './harness.ts';

const INSTRUCTIONS = 'You are a careful coding agent. Ünïcödé in the prompt → two-byte strings.';
const TOOLS = [{ name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } }];

function turn(i: number) {
  return [
    { kind: 'user' as const, key: `u${i}`, content: [{ type: 'text' as const, text: `step ${i}: fix the bug in src/ä${i}.ts 🙂` }] },
    { kind: 'assistant' as const, key: `a${i}`, content: [{ type: 'tool_call' as const, id: `c${i}`, name: 'read_file', arguments: { path: `src/ä${i}.ts` } }] },
    { kind: 'tool_result' as const, key: `r${i}`, call_id: `c${i}`, content: [{ type: 'text' as const, text: `export const x${i} = ${i};\n` }] },
    { kind: 'assistant' as const, key: `b${i}`, content: [{ type: 'text' as const, text: `done ${i}` }] },
  ];
}

describe('prepare replies', () => {
  let d: DaemonHandle;
  let client: AlbedoClient;
  let db: Database.Database;
  const records = (): number => db.prepare("SELECT count(*) FROM prepared_requests p JOIN sessions s ON s.sid = p.sid WHERE s.name = 's'").pluck().get() as number;

  before(async () => {
    d = await startDaemon();
    client = await d.connect();
    await client.call('session.open', { session: 's' });
    for (let i = 0; i < 5; i++) await client.call('transcript.append', { session: 's', rows: turn(i) });
    db = new Database(path.join(d.home, 'albedo.db'), { readonly: true });
  });
  after(async () => {
    db.close();
    await d.stop();
  });

  /** A prepare's record is written after its reply, on the session's lane: /context runs after it. */
  async function settledRecords(): Promise<number> {
    await client.call('context', { session: 's' });
    return records();
  }

  test('a prepare that repeats the one before keeps its id and writes nothing; a change makes a new record', async () => {
    const params = { session: 's', model: 'test-model', instructions: INSTRUCTIONS, tools: TOOLS };
    const first = await client.call('prepare', params);
    const n = await settledRecords();
    const again = await client.call('prepare', params);
    assert.equal(again.prepared_id, first.prepared_id, 'the same request under the same id');
    assert.deepEqual(again, first);
    assert.equal(await settledRecords(), n, 'nothing new stored');
    const usage = await client.call('usage.report', { session: 's', prepared_id: again.prepared_id, input_tokens: 900 });
    assert.ok(usage !== undefined);

    const other = await client.call('prepare', { ...params, instructions: `${INSTRUCTIONS} Be brief.` });
    assert.notEqual(other.prepared_id, first.prepared_id, 'other instructions at the same head: a new record');
    assert.equal(await settledRecords(), n + 1);
    const back = await client.call('prepare', params);
    assert.notEqual(back.prepared_id, other.prepared_id);
    assert.notEqual(back.prepared_id, first.prepared_id, 'only the latest reply is reused');

    await client.call('transcript.append', { session: 's', rows: turn(5) });
    const later = await client.call('prepare', params);
    assert.notEqual(later.prepared_id, back.prepared_id, 'new rows: a new record');
    assert.equal(later.head, back.head + 4);
  });

  test('the reply line is the JSON of the result, alone and inside a batch', async () => {
    const raw = await rawConnection(d.socket);
    try {
      await raw.initialize();
      const params = { session: 's', model: 'test-model', instructions: INSTRUCTIONS, tools: TOOLS };
      raw.send({ jsonrpc: '2.0', id: 7, method: 'prepare', params });
      const single = (await raw.next()) as { id: number; result: Result<'prepare'> };
      assert.equal(single.id, 7);
      raw.send([
        { jsonrpc: '2.0', id: 'b1', method: 'prepare', params },
        { jsonrpc: '2.0', id: 'b2', method: 'session.list', params: {} },
      ]);
      const batch = (await raw.next()) as Array<{ id: string; result: unknown }>;
      const member = batch.find((m) => m.id === 'b1') as { result: Result<'prepare'> } | undefined;
      assert.ok(member !== undefined, 'the prepare answered inside the batch');
      assert.ok(batch.find((m) => m.id === 'b2')?.result !== undefined, 'beside another method');
      assert.deepEqual(member.result, single.result, 'same request, same id, same bytes');
      assert.equal(member.result.inputs.at(0)?.content.at(0)?.type, 'text');
      assert.match(JSON.stringify(single.result.inputs), /🙂/);
    } finally {
      raw.end();
    }
  });
});
