// Session kernels over the socket: one session's work runs in order, different sessions do not
// wait for each other, and a long scan yields to other requests.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { AlbedoClient } from '../../protocol/client.ts';
import { startDaemon, type DaemonHandle } from './harness.ts';

describe('session kernels', () => {
  let d: DaemonHandle;
  let a: AlbedoClient;
  let b: AlbedoClient;

  before(async () => {
    d = await startDaemon();
    a = await d.connect();
    b = await d.connect();
    await a.call('session.open', { session: 'big' });
    await b.call('session.open', { session: 'small' });
    // 40k rows; the pattern below is non-ASCII, so grep scans every row in batches.
    for (let batch = 0; batch < 8; batch++) {
      const rows = Array.from({ length: 5000 }, (_, i) => ({
        kind: 'user' as const,
        content: [{ type: 'text' as const, text: `row ${batch * 5000 + i} of a long session, nothing to see ${'x'.repeat(120)}` }],
      }));
      await a.call('transcript.append', { session: 'big', rows });
    }
  });
  after(async () => {
    await d.stop();
  });

  test("a long grep on one session does not hold up another session's append", async () => {
    const order: string[] = [];
    const grep = a.call('transcript_grep', { session: 'big', pattern: 'ünïcödé' }).then((r) => {
      order.push('grep');
      return r;
    });
    // Same connection: the append arrives after the grep, so only per-session queues and a
    // scan that yields let it finish first.
    const append = a
      .call('transcript.append', { session: 'small', rows: [{ kind: 'user', content: [{ type: 'text', text: 'quick' }] }] })
      .then(() => order.push('append'));
    const [result] = await Promise.all([grep, append]);
    assert.equal(result.total, 0);
    assert.deepEqual(order, ['append', 'grep']);
  });

  test("a cross-session scan does not hold up a session's read either", async () => {
    const order: string[] = [];
    const grep = a.call('transcript_grep', { pattern: 'ünïcödé' }).then(() => order.push('grep'));
    const read = a.call('transcript_read', { session: 'small' }).then(() => order.push('read'));
    await Promise.all([grep, read]);
    assert.deepEqual(order, ['read', 'grep']);
  });

  test('appends and reads of a session do not wait while its compaction waits on the model', { timeout: 30_000 }, async () => {
    let release!: () => void;
    const answered = new Promise<void>((resolve) => (release = resolve));
    let asked!: () => void;
    const summarizing = new Promise<void>((resolve) => (asked = resolve));
    const agent = await d.connect({
      summarize: async () => {
        asked();
        await answered;
        return { text: 'summary of the early rows' };
      },
    });
    await agent.call('session.open', { session: 'waits' });
    for (let i = 0; i < 20; i++) {
      await agent.call('transcript.append', { session: 'waits', rows: [{ kind: 'user', content: [{ type: 'text', text: `request ${i} ${'y'.repeat(4000)}` }] }, { kind: 'assistant', content: [{ type: 'text', text: `done ${i}` }] }] });
    }
    const prepared = agent.call('prepare', { session: 'waits', model: 'claude-sonnet-4-5', force: true });
    const first = await Promise.race([summarizing.then(() => 'asked'), prepared.then((p) => `prepared without asking: ${p.observation.failure ?? ''} ${p.observation.notes.join('; ')}`)]);
    assert.equal(first, 'asked');
    // The model call is out: the transcript lane still serves this session.
    const appended = await b.call('transcript.append', { session: 'waits', rows: [{ kind: 'user', content: [{ type: 'text', text: 'typed while the summary was written' }] }] });
    const read = await b.call('transcript.rows', { session: 'waits', after: appended.seqs[0]! - 1, limit: 5 });
    assert.equal(read.rows.length, 1);
    release();
    const done = await prepared;
    assert.equal(done.compacted, true, 'an append after the head it read does not void the summary');
    await agent.close();
  });

  test('work on one session runs in arrival order', async () => {
    await b.call('session.open', { session: 'ordered' });
    const calls = Array.from({ length: 20 }, (_, i) => b.call('transcript.append', { session: 'ordered', rows: [{ kind: 'user', content: [{ type: 'text', text: `m${i}` }] }] }));
    const results = await Promise.all(calls);
    const seqs = results.map((r) => r.seqs[0]!);
    assert.deepEqual([...seqs].sort((x, y) => x - y), seqs, 'seqs follow the order the requests were sent');
    const rows = await b.call('transcript.rows', { session: 'ordered', limit: 100 });
    assert.deepEqual(
      rows.rows.map((r) => (r.body.kind === 'user' && r.body.content[0]?.type === 'text' ? r.body.content[0].text : '')),
      Array.from({ length: 20 }, (_, i) => `m${i}`),
    );
  });
});
