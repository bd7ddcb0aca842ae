// Every session and transcript method of the wire contract, end to end: the real albedod in a
// temp home, its real SQLite file, typed clients and raw NDJSON over its real socket. One
// daemon serves the whole file; each test works in sessions of its own.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { AlbedoClient } from '../../protocol/client.ts';
import { DomainCode, RpcCode } from '../../protocol/errors.ts';
import { PROTOCOL_VERSION, type Result } from '../../protocol/methods.ts';
import type { RowIn, StoredRow } from '../../protocol/rows.ts';
import { assistant, imageIn, pngBytes, toolResult, user } from '../storage/factories.ts';
import { allRows, failsWith, loggedLine, rawConnection, startDaemon, type DaemonHandle } from './harness.ts';

let d: DaemonHandle;
let c: AlbedoClient;

before(async () => {
  d = await startDaemon();
  c = await d.connect();
});

after(async () => {
  await d.stop();
  fs.rmSync(d.home, { recursive: true, force: true });
});

// ---- helpers ----

function textOf(row: StoredRow): string {
  const b = row.body;
  if (b.kind === 'notice') return `notice:${b.body.notice}`;
  return b.content.map((p) => (p.type === 'text' ? p.text : p.type)).join('|');
}

async function summary(session: string) {
  const list = await c.call('session.list', {});
  return list.sessions.find((s) => s.session === session);
}

const segmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
const graphemes = (s: string): string[] => [...segmenter.segment(s)].map((g) => g.segment);

describe('albedod sessions and transcripts over the socket', { timeout: 120_000 }, () => {
  describe('initialize', () => {
    test('a method before initialize is refused with not_initialized, and initialize then unlocks the connection', async () => {
      const raw = await rawConnection(d.socket);
      try {
        raw.send({ jsonrpc: '2.0', id: 1, method: 'session.list', params: {} });
        const early = (await raw.next()) as { id: number; error: { code: number; data: { code: string; method: string } } };
        assert.equal(early.id, 1);
        assert.equal(early.error.code, DomainCode.not_initialized);
        assert.equal(early.error.data.code, 'not_initialized');
        assert.equal(early.error.data.method, 'session.list');

        const init = (await raw.initialize()) as { id: string; result: Result<'initialize'> };
        assert.equal(init.id, 'init');
        assert.equal(init.result.protocol, PROTOCOL_VERSION);
        assert.equal(init.result.server.name, 'albedod');

        raw.send({ jsonrpc: '2.0', id: 2, method: 'session.list', params: {} });
        const later = (await raw.next()) as { id: number; result: Result<'session.list'> };
        assert.equal(later.id, 2);
        assert.ok(Array.isArray(later.result.sessions));
      } finally {
        raw.end();
      }
    });

    test('initialize and a call pipelined in one write are both served, in order', async () => {
      const raw = await rawConnection(d.socket);
      try {
        raw.write(
          `${JSON.stringify({ jsonrpc: '2.0', id: 'i', method: 'initialize', params: { protocol: PROTOCOL_VERSION, client: { name: 'p', version: '1' } } })}\n` +
            `${JSON.stringify({ jsonrpc: '2.0', id: 's', method: 'daemon.status' })}\n`,
        );
        const first = (await raw.next()) as { id: string; result?: unknown };
        const second = (await raw.next()) as { id: string; result?: { pid: number } };
        assert.deepEqual([first.id, second.id].sort(), ['i', 's']);
        const status = first.id === 's' ? first : second;
        assert.equal((status.result as { pid: number } | undefined)?.pid, d.proc.pid);
      } finally {
        raw.end();
      }
    });

    test('a wrong protocol version is refused with -32602 unsupported_protocol and leaves the connection uninitialized', async () => {
      const raw = await rawConnection(d.socket);
      try {
        raw.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocol: 99, client: { name: 'old', version: '0' } } });
        const refused = (await raw.next()) as { id: number; error: { code: number; data: { code: string; supported: number[] } } };
        assert.equal(refused.id, 1);
        assert.equal(refused.error.code, RpcCode.InvalidParams);
        assert.equal(refused.error.data.code, 'unsupported_protocol');
        assert.deepEqual(refused.error.data.supported, [PROTOCOL_VERSION]);

        raw.send({ jsonrpc: '2.0', id: 2, method: 'daemon.status' });
        const still = (await raw.next()) as { id: number; error: { data: { code: string } } };
        assert.equal(still.id, 2);
        assert.equal(still.error.data.code, 'not_initialized');

        const init = (await raw.initialize()) as { result: Result<'initialize'> };
        assert.equal(init.result.protocol, PROTOCOL_VERSION);
      } finally {
        raw.end();
      }
    });
  });

  describe('session.open / session.list / session.delete', () => {
    test('session.open creates once, reopens with created false, and makes a fresh id when none is given', async () => {
      assert.deepEqual(await c.call('session.open', { session: 'open-a' }), { session: 'open-a', created: true });
      assert.deepEqual(await c.call('session.open', { session: 'open-a' }), { session: 'open-a', created: false });
      const fresh1 = await c.call('session.open', {});
      const fresh2 = await c.call('session.open', {});
      assert.equal(fresh1.created, true);
      assert.equal(fresh2.created, true);
      assert.notEqual(fresh1.session, fresh2.session);
      assert.match(fresh1.session, /^[A-Za-z0-9._:@-]+$/);
      const listed = (await c.call('session.list', {})).sessions.map((s) => s.session);
      assert.ok(listed.includes(fresh1.session) && listed.includes(fresh2.session));
    });

    test('session.open records a workspace, fills it in for a session without one, and never overwrites it', async () => {
      await c.call('session.open', { session: 'ws-a', workspace: '/work/alpha' });
      assert.equal((await summary('ws-a'))?.workspace, '/work/alpha');
      await c.call('session.open', { session: 'ws-a', workspace: '/work/other' });
      assert.equal((await summary('ws-a'))?.workspace, '/work/alpha');

      await c.call('session.open', { session: 'ws-b' });
      assert.equal((await summary('ws-b'))?.workspace, null);
      assert.deepEqual(await c.call('session.open', { session: 'ws-b', workspace: '/work/beta' }), {
        session: 'ws-b',
        created: false,
      });
      assert.equal((await summary('ws-b'))?.workspace, '/work/beta');
    });

    test('session.list reports head, row count and parent of each session', async () => {
      await c.call('session.open', { session: 'list-p' });
      const empty = await summary('list-p');
      assert.equal(empty?.head, 0);
      assert.equal(empty?.rows, 0);
      assert.equal(empty?.parent, null);

      const { seqs } = await c.call('transcript.append', { session: 'list-p', rows: [user('one'), user('two'), user('three')] });
      const full = await summary('list-p');
      assert.equal(full?.head, seqs[2]);
      assert.equal(full?.rows, 3);
      assert.equal(typeof full?.created_at, 'number');

      await c.call('session.fork', { session: 'list-p', branch: 'list-child' });
      const child = await summary('list-child');
      assert.equal(child?.parent, 'list-p');
      assert.equal(child?.rows, 3);
      assert.ok((child?.head ?? 0) > (full?.head ?? 0), 'copies get new seqs past the parent head');
      assert.deepEqual(await summary('list-p'), full, 'forking left the parent as it was');
    });

    test('session.delete removes the session and its rows, a second delete answers deleted false, children stay parentless', async () => {
      await c.call('session.open', { session: 'del-a' });
      await c.call('transcript.append', { session: 'del-a', rows: [user('to be deleted'), user('also gone')] });
      await c.call('session.fork', { session: 'del-a', branch: 'del-a-child' });
      const other = await c.call('transcript.append', { session: 'list-p', rows: [user('unrelated survivor')] });

      assert.deepEqual(await c.call('session.delete', { session: 'del-a' }), { deleted: true });
      assert.equal(await summary('del-a'), undefined);
      await failsWith(c.call('transcript.rows', { session: 'del-a' }), 'unknown_session');
      await failsWith(c.call('transcript_read', { session: 'del-a' }), 'unknown_session');
      const grep = await c.call('transcript_grep', { pattern: 'to be deleted' });
      assert.deepEqual(
        grep.matches.filter((m) => m.session === 'del-a'),
        [],
        'no row of the deleted session is found any more',
      );

      assert.deepEqual(await c.call('session.delete', { session: 'del-a' }), { deleted: false });

      const child = await summary('del-a-child');
      assert.equal(child?.parent, null);
      assert.deepEqual((await allRows(c, 'del-a-child')).map(textOf), ['to be deleted', 'also gone']);
      const survivor = await allRows(c, 'list-p');
      assert.equal(survivor.at(-1)?.seq, other.seqs[0]);
    });

    test('deleting the last session that shows an image collects its payload', async () => {
      const png = await pngBytes(5, 4);
      await c.call('session.open', { session: 'del-img' });
      await c.call('transcript.append', { session: 'del-img', rows: [user('an image', { images: [imageIn(png, 'image/png')] })] });
      const [row] = await allRows(c, 'del-img');
      const part = row?.body.kind === 'user' ? row.body.content[1] : undefined;
      assert.ok(part?.type === 'image');
      assert.equal((await c.call('payload.get', { hash: part.hash })).width, 5);
      // While a fork still shows the image, deleting the parent keeps the payload.
      await c.call('session.fork', { session: 'del-img', branch: 'del-img-fork' });
      await c.call('session.delete', { session: 'del-img' });
      assert.equal((await c.call('payload.get', { hash: part.hash })).height, 4);
      await c.call('session.delete', { session: 'del-img-fork' });
      await failsWith(c.call('payload.get', { hash: part.hash }), 'unknown_payload');
    });
  });

  describe('transcript.append and transcript.rows', () => {
    test('append answers one increasing seq per row and the session head', async () => {
      await c.call('session.open', { session: 'app-a' });
      const r = await c.call('transcript.append', { session: 'app-a', rows: [user('a'), assistant('b'), user('c')] });
      assert.equal(r.seqs.length, 3);
      assert.ok(r.seqs[0]! < r.seqs[1]! && r.seqs[1]! < r.seqs[2]!);
      assert.equal(r.head, r.seqs[2]);
      const rows = await allRows(c, 'app-a');
      assert.deepEqual(
        rows.map((x) => x.seq),
        r.seqs,
      );
      assert.deepEqual(rows.map(textOf), ['a', 'b', 'c']);
      assert.deepEqual(
        rows.map((x) => x.row_class),
        ['user', 'other', 'user'],
      );
      assert.ok(rows.every((x) => x.session === 'app-a' && typeof x.created_at === 'number'));
    });

    test('a retried key answers the stored seq and stores nothing new', async () => {
      await c.call('session.open', { session: 'app-key' });
      const first = await c.call('transcript.append', {
        session: 'app-key',
        rows: [user('hello', { key: 'k1' }), assistant('hi there', ['call-k'], { key: 'k2' })],
      });
      const before = await allRows(c, 'app-key');
      const retry = await c.call('transcript.append', {
        session: 'app-key',
        rows: [user('hello', { key: 'k1' }), assistant('hi there', ['call-k'], { key: 'k2' })],
      });
      assert.deepEqual(retry, first);
      assert.deepEqual(await allRows(c, 'app-key'), before);

      // A retry mixed with a new row: the old row answers its seq, only the new one is stored.
      const mixed = await c.call('transcript.append', {
        session: 'app-key',
        rows: [user('hello', { key: 'k1' }), user('new one', { key: 'k3' })],
      });
      assert.equal(mixed.seqs[0], first.seqs[0]);
      assert.ok(mixed.seqs[1]! > first.head);
      assert.deepEqual((await allRows(c, 'app-key')).map(textOf), ['hello', 'hi there|tool_call', 'new one']);
      assert.equal((await allRows(c, 'app-key')).map((r) => r.key).join(','), 'k1,k2,k3');
    });

    test('the same key with other content fails with key_conflict and stores nothing of the batch', async () => {
      await c.call('session.open', { session: 'app-conflict' });
      const first = await c.call('transcript.append', { session: 'app-conflict', rows: [user('original', { key: 'kc' })] });
      const before = await allRows(c, 'app-conflict');
      const err = await failsWith(
        c.call('transcript.append', { session: 'app-conflict', rows: [user('fresh row'), user('changed', { key: 'kc' })] }),
        'key_conflict',
      );
      assert.deepEqual(err.data, {
        code: 'key_conflict',
        session: 'app-conflict',
        key: 'kc',
        seq: first.seqs[0],
        index: 1,
      });
      assert.deepEqual(await allRows(c, 'app-conflict'), before);
    });

    test('a late tool result settles right after its call, seen through transcript.rows order', async () => {
      await c.call('session.open', { session: 'settle' });
      await c.call('session.open', { session: 'settle-other' });
      const a = await c.call('transcript.append', {
        session: 'settle',
        rows: [user('fix the bug'), assistant('reading it', ['c1'])],
      });
      await c.call('transcript.append', { session: 'settle-other', rows: [user('another session meanwhile')] });
      const typed = await c.call('transcript.append', { session: 'settle', rows: [user('also check the tests', { key: 'k' })] });
      const result = await c.call('transcript.append', { session: 'settle', rows: [toolResult('c1', 'file contents')] });

      // The result takes the slot right after its call; the user's message moves to the fresh seq.
      assert.deepEqual(result.seqs, [typed.seqs[0]]);
      assert.ok(result.head > typed.seqs[0]!);
      const rows = await allRows(c, 'settle');
      assert.deepEqual(rows.map(textOf), ['fix the bug', 'reading it|tool_call', 'file contents', 'also check the tests']);
      assert.deepEqual(
        rows.map((r) => r.seq),
        [a.seqs[0], a.seqs[1], typed.seqs[0], result.head],
      );
      assert.equal(rows[2]?.body.kind === 'tool_result' ? rows[2].body.call_id : undefined, 'c1');
      assert.equal(rows[3]?.key, 'k', 'the key follows its contents');

      // A retry of the moved message answers the seq its contents now live at.
      const retried = await c.call('transcript.append', { session: 'settle', rows: [user('also check the tests', { key: 'k' })] });
      assert.deepEqual(retried.seqs, [result.head]);
      assert.equal(retried.head, result.head);
      assert.deepEqual((await allRows(c, 'settle')).map(textOf), rows.map(textOf));
    });

    test('a tool result in the same batch as its call stays in order', async () => {
      await c.call('session.open', { session: 'same-batch' });
      const rows: RowIn[] = [user('go'), assistant('calling two', ['x1', 'x2']), toolResult('x2', 'second'), toolResult('x1', 'first')];
      const r = await c.call('transcript.append', { session: 'same-batch', rows });
      const stored = await allRows(c, 'same-batch');
      assert.deepEqual(
        stored.map((x) => x.seq),
        r.seqs,
      );
      assert.deepEqual(stored.map(textOf), ['go', 'calling two|tool_call|tool_call', 'second', 'first']);
    });

    test('an agent that reuses tool-call ids turn after turn has every row stored; a stray result is an orphan', async () => {
      // SWE-agent's shape: one turn per call, the same ids coming back once answered.
      await c.call('session.open', { session: 'reuse' });
      const turns: RowIn[][] = [
        [user('fix the Schema bug')],
        [assistant('reproduce first', ['call_bash']), toolResult('call_bash', 'Traceback: KeyError')],
        [assistant('open the file', ['call_open']), toolResult('call_open', '[file fields.py]')],
        [assistant('run it again', ['call_bash']), toolResult('call_bash', 'still KeyError')],
        [assistant('open the other file', ['call_open']), toolResult('call_open', '[file schema.py]')],
        [assistant('edit and rerun', ['call_bash']), toolResult('call_bash', 'all tests pass')],
      ];
      const seqs: number[] = [];
      for (const rows of turns) seqs.push(...(await c.call('transcript.append', { session: 'reuse', rows })).seqs);
      const stored = await allRows(c, 'reuse');
      assert.deepEqual(stored.map((r) => r.seq), seqs);
      assert.equal(stored.length, 11, 'no row refused');
      assert.ok(stored.every((r) => r.body.kind !== 'tool_result' || r.body.orphan === undefined));

      // A result for an id whose calls are all answered, in a batch with a sibling on each side.
      const batch = await c.call('transcript.append', {
        session: 'reuse',
        rows: [assistant('one more', ['call_find']), toolResult('call_bash', 'zebra-orphan output'), toolResult('call_find', 'found it')],
      });
      const after = await allRows(c, 'reuse');
      // The orphan is not settled; call_find's answer is, into its slot before the orphan.
      const [call, answered, orphan] = after.slice(-3);
      assert.deepEqual(batch.seqs, [call?.seq, orphan?.seq, answered?.seq]);
      assert.deepEqual(after.slice(-3).map(textOf), ['one more|tool_call', 'found it', 'zebra-orphan output']);
      assert.ok(orphan?.body.kind === 'tool_result' && orphan.body.orphan === true && orphan.body.call_id === 'call_bash');
      assert.ok(answered?.body.kind === 'tool_result' && answered.body.orphan === undefined);
      const grep = await c.call('transcript_grep', { session: 'reuse', pattern: 'zebra-orphan' });
      assert.deepEqual(grep.matches.map((m) => m.seq), [orphan.seq], 'orphan text is searchable');
      const read = await c.call('transcript_read', { session: 'reuse', from_seq: orphan.seq, to_seq: orphan.seq });
      assert.equal(read.text, `#${orphan.seq} tool_result call_bash\nzebra-orphan output`);
      // The model sees it as text, never as a result, and /context flags it.
      const sent = await c.call('prepare', { session: 'reuse', model: 'claude-sonnet-4-5' });
      assert.ok(sent.inputs.some((i) => i.role === 'user' && i.content.some((p) => p.type === 'text' && p.text.includes('[result of tool call call_bash, which has no matching call]\nzebra-orphan output'))));
      assert.ok(!sent.inputs.some((i) => i.content.some((p) => p.type === 'tool_result' && p.content.some((q) => q.type === 'text' && q.text.includes('zebra-orphan')))));
      const ctx = await c.call('context', { session: 'reuse', format: 'text' });
      assert.match(ctx.text ?? '', /1 tool result\(s\) in this session answer no open call/);

      // Reusing an id whose call is still running is refused, and nothing of that batch is kept.
      await c.call('transcript.append', { session: 'reuse', rows: [assistant('start a long run', ['call_bash'])] });
      const before = await allRows(c, 'reuse');
      await failsWith(
        c.call('transcript.append', { session: 'reuse', rows: [user('meanwhile'), assistant('again', ['call_bash'])] }),
        'duplicate_tool_call',
      );
      assert.deepEqual(await allRows(c, 'reuse'), before);
      // The answer goes to that newest call.
      const last = await c.call('transcript.append', { session: 'reuse', rows: [toolResult('call_bash', 'long run done')] });
      const final = await allRows(c, 'reuse');
      assert.equal(final.at(-1)?.seq, last.seqs[0]);
      assert.equal(final.at(-2)?.seq, before.at(-1)?.seq);
      const answer = final.at(-1)?.body;
      assert.ok(answer?.kind === 'tool_result' && answer.call_id === 'call_bash' && answer.orphan === undefined);
    });

    test('transcript.rows pages with after and next_after', async () => {
      await c.call('session.open', { session: 'paging' });
      const rows = Array.from({ length: 7 }, (_, i) => user(`row ${i}`));
      const { seqs } = await c.call('transcript.append', { session: 'paging', rows });
      const p1 = await c.call('transcript.rows', { session: 'paging', limit: 3 });
      assert.deepEqual(
        p1.rows.map((r) => r.seq),
        seqs.slice(0, 3),
      );
      assert.equal(p1.next_after, seqs[2]);
      const p2 = await c.call('transcript.rows', { session: 'paging', after: p1.next_after ?? 0, limit: 3 });
      assert.deepEqual(
        p2.rows.map((r) => r.seq),
        seqs.slice(3, 6),
      );
      assert.equal(p2.next_after, seqs[5]);
      const p3 = await c.call('transcript.rows', { session: 'paging', after: p2.next_after ?? 0, limit: 3 });
      assert.deepEqual(
        p3.rows.map((r) => r.seq),
        seqs.slice(6),
      );
      assert.equal(p3.next_after, null);
      // A page that ends exactly at the head says so.
      const exact = await c.call('transcript.rows', { session: 'paging', after: seqs[3]!, limit: 3 });
      assert.equal(exact.rows.length, 3);
      assert.equal(exact.next_after, null);
      const past = await c.call('transcript.rows', { session: 'paging', after: seqs[6]! });
      assert.deepEqual(past, { rows: [], next_after: null });
    });

    test('two clients appending to different sessions concurrently each get exactly their rows, in order', async () => {
      const c1 = await d.connect();
      const c2 = await d.connect();
      try {
        await c1.call('session.open', { session: 'conc-1' });
        await c2.call('session.open', { session: 'conc-2' });
        const n = 50;
        const calls: Array<Promise<{ who: 1 | 2; i: number; seqs: number[] }>> = [];
        for (let i = 0; i < n; i++) {
          calls.push(
            c1
              .call('transcript.append', { session: 'conc-1', rows: [user(`one ${i}`), assistant(`one reply ${i}`)] })
              .then((r) => ({ who: 1 as const, i, seqs: r.seqs })),
          );
          calls.push(
            c2
              .call('transcript.append', { session: 'conc-2', rows: [user(`two ${i}`)] })
              .then((r) => ({ who: 2 as const, i, seqs: r.seqs })),
          );
        }
        const results = await Promise.all(calls);
        const all = results.flatMap((r) => r.seqs);
        assert.equal(new Set(all).size, all.length, 'seqs are globally unique');

        const rows1 = await allRows(c1, 'conc-1');
        const rows2 = await allRows(c2, 'conc-2');
        assert.deepEqual(
          rows1.map(textOf),
          Array.from({ length: n }, (_, i) => [`one ${i}`, `one reply ${i}`]).flat(),
        );
        assert.deepEqual(
          rows2.map(textOf),
          Array.from({ length: n }, (_, i) => `two ${i}`),
        );
        // Each client's answers name exactly the rows stored, in the order sent.
        assert.deepEqual(
          rows1.map((r) => r.seq),
          results.filter((r) => r.who === 1).flatMap((r) => r.seqs),
        );
        assert.deepEqual(
          rows2.map((r) => r.seq),
          results.filter((r) => r.who === 2).flatMap((r) => r.seqs),
        );
        assert.ok(rows1.every((r) => r.session === 'conc-1') && rows2.every((r) => r.session === 'conc-2'));
        assert.equal((await summary('conc-1'))?.rows, 2 * n);
        assert.equal((await summary('conc-2'))?.rows, n);
      } finally {
        await c1.close();
        await c2.close();
      }
    });
  });

  describe('forks and excursions', () => {
    test('session.fork {at} copies the rows up to at with new seqs and leaves the parent untouched', async () => {
      await c.call('session.open', { session: 'fork-p', workspace: '/work/fork' });
      const { seqs } = await c.call('transcript.append', {
        session: 'fork-p',
        rows: [user('u1', { key: 'pk1' }), assistant('a1', ['fc1']), toolResult('fc1', 'r1'), user('u2'), assistant('a2')],
      });
      const parentBefore = await allRows(c, 'fork-p');
      const parentSummary = await summary('fork-p');

      const forked = await c.call('session.fork', { session: 'fork-p', at: seqs[2]!, branch: 'fork-b' });
      assert.deepEqual(forked, { session: 'fork-b', rows: 3, marker_seq: null });

      const branch = await allRows(c, 'fork-b');
      assert.deepEqual(branch.map(textOf), ['u1', 'a1|tool_call', 'r1']);
      assert.deepEqual(
        branch.map((r) => r.body),
        parentBefore.slice(0, 3).map((r) => r.body),
      );
      assert.deepEqual(
        branch.map((r) => r.key),
        ['pk1', null, null],
      );
      assert.deepEqual(
        branch.map((r) => r.created_at),
        parentBefore.slice(0, 3).map((r) => r.created_at),
      );
      assert.ok(branch.every((r) => r.seq > seqs[4]!), 'copies get fresh seqs');
      assert.ok(branch.every((r) => r.session === 'fork-b'));
      const b = await summary('fork-b');
      assert.equal(b?.parent, 'fork-p');
      assert.equal(b?.workspace, '/work/fork');

      assert.deepEqual(await allRows(c, 'fork-p'), parentBefore);
      assert.deepEqual(await summary('fork-p'), parentSummary);

      // The copy is a session of its own: its tool calls and keys carry over, appends stay in it.
      const retry = await c.call('transcript.append', { session: 'fork-b', rows: [user('u1', { key: 'pk1' })] });
      assert.deepEqual(retry.seqs, [branch[0]!.seq]);
      // fc1's answer was copied with it, so another result for it is an orphan of the branch.
      await c.call('transcript.append', { session: 'fork-b', rows: [toolResult('fc1', 'twice')] });
      const orphan = (await allRows(c, 'fork-b')).at(-1);
      assert.ok(orphan?.body.kind === 'tool_result' && orphan.body.orphan === true);
      await c.call('transcript.append', { session: 'fork-b', rows: [user('only in the branch')] });
      assert.deepEqual(await allRows(c, 'fork-p'), parentBefore);
    });

    test("a fork keeps the parent's extension choices and last prompt, and leaves its compaction history behind", async () => {
      await c.call('session.open', { session: 'fork-ext' });
      await c.call('transcript.append', { session: 'fork-ext', rows: [user('u1'), assistant('a1')] });
      const tools = [{ name: 'read_file', description: 'Read a file', input_schema: { type: 'object' } }];
      await c.call('prepare', { session: 'fork-ext', model: 'claude-sonnet-4-5', instructions: 'Work in /repo.', tools });
      await c.call('extensions.select', { session: 'fork-ext', disable: ['models'] });
      const parentList = await c.call('extensions.list', { session: 'fork-ext' });

      await c.call('session.fork', { session: 'fork-ext', branch: 'fork-ext-b' });
      const branchList = await c.call('extensions.list', { session: 'fork-ext-b' });
      assert.deepEqual(branchList, parentList);
      assert.equal(branchList.extensions.find((e) => e.name === 'models')?.chosen_by, 'session');
      // No prepare on the branch yet: /context sizes it from the inherited prompt.
      const ctx = await c.call('context', { session: 'fork-ext-b' });
      assert.equal(ctx.observation.model, 'claude-sonnet-4-5');
      assert.match(ctx.observation.sections[0]?.source ?? '', /^instructions \(~4 tokens\).* 7 tool schema/, "the agent's tool plus the six memory tools");
      assert.equal(ctx.observation.last_compaction, null);
    });

    test('session.fork without at copies the whole parent under a fresh id', async () => {
      await c.call('session.open', { session: 'fork-all' });
      await c.call('transcript.append', { session: 'fork-all', rows: [user('x'), user('y')] });
      const forked = await c.call('session.fork', { session: 'fork-all' });
      assert.notEqual(forked.session, 'fork-all');
      assert.equal(forked.rows, 2);
      assert.deepEqual((await allRows(c, forked.session)).map(textOf), ['x', 'y']);
    });

    test('session.fork refuses a seq of another session, a seq of no row and a taken branch id', async () => {
      await c.call('session.open', { session: 'fork-q' });
      await c.call('session.open', { session: 'fork-r' });
      await c.call('transcript.append', { session: 'fork-q', rows: [user('q')] });
      const theirs = await c.call('transcript.append', { session: 'fork-r', rows: [user('r')] });
      const before = await c.call('session.list', {});

      const mismatch = await failsWith(
        c.call('session.fork', { session: 'fork-q', at: theirs.seqs[0]!, branch: 'fork-q-bad' }),
        'row_session_mismatch',
      );
      assert.deepEqual(mismatch.data, { code: 'row_session_mismatch', session: 'fork-q', seq: theirs.seqs[0] });
      const unknown = await failsWith(c.call('session.fork', { session: 'fork-q', at: 2 ** 52, branch: 'fork-q-bad' }), 'unknown_row');
      assert.equal((unknown.data as { seq: number }).seq, 2 ** 52);
      await failsWith(c.call('session.fork', { session: 'fork-q', branch: 'fork-r' }), 'session_exists');
      await failsWith(c.call('session.fork', { session: 'fork-none', branch: 'fork-x' }), 'unknown_session');
      assert.deepEqual(await c.call('session.list', {}), before);
    });

    test('an excursion writes a marker in the parent and session.return answers it once, linked to the marker', async () => {
      await c.call('session.open', { session: 'exc-p' });
      const { seqs } = await c.call('transcript.append', { session: 'exc-p', rows: [user('plan the work'), assistant('ok')] });

      const fork = await c.call('session.fork', { session: 'exc-p', excursion: true, branch: 'exc-b' });
      assert.equal(fork.session, 'exc-b');
      assert.equal(fork.rows, 2, 'the marker is not copied');
      assert.ok(fork.marker_seq !== null && fork.marker_seq > seqs[1]!);

      const parent = await allRows(c, 'exc-p');
      assert.equal(parent.length, 3);
      assert.equal(parent[2]?.seq, fork.marker_seq);
      assert.deepEqual(parent[2]?.body, { kind: 'notice', body: { notice: 'excursion', branch: 'exc-b' } });
      assert.equal(parent[2]?.key, 'excursion:exc-b');
      assert.deepEqual((await allRows(c, 'exc-b')).map(textOf), ['plan the work', 'ok']);

      await c.call('transcript.append', { session: 'exc-b', rows: [user('side quest'), assistant('found it')] });
      const back = await c.call('session.return', { branch: 'exc-b', outcome: 'the answer is 42' });
      assert.equal(back.session, 'exc-p');
      const after = await allRows(c, 'exc-p');
      assert.equal(after.length, 4);
      assert.equal(after[3]?.seq, back.seq);
      assert.deepEqual(after[3]?.body, {
        kind: 'notice',
        body: { notice: 'excursion_return', branch: 'exc-b', marker_seq: fork.marker_seq, outcome: 'the answer is 42' },
      });
      const read = await c.call('transcript_read', { session: 'exc-p', from_seq: back.seq });
      assert.equal(read.text, `#${back.seq} notice excursion_return\nexcursion on branch exc-b returned\nthe answer is 42`);

      const again = await failsWith(c.call('session.return', { branch: 'exc-b', outcome: 'twice' }), 'excursion_returned');
      assert.equal((again.data as { seq: number }).seq, back.seq);
      assert.deepEqual(await allRows(c, 'exc-p'), after);
    });

    test('returning from a session that is not an excursion fails with not_an_excursion', async () => {
      await c.call('session.open', { session: 'plain-root' });
      await c.call('session.fork', { session: 'plain-root', branch: 'plain-fork' });
      await failsWith(c.call('session.return', { branch: 'plain-root', outcome: 'x' }), 'not_an_excursion');
      await failsWith(c.call('session.return', { branch: 'plain-fork', outcome: 'x' }), 'not_an_excursion');
      await failsWith(c.call('session.return', { branch: 'no-such-branch', outcome: 'x' }), 'unknown_session');
      assert.deepEqual(await allRows(c, 'plain-root'), []);
    });
  });

  describe('transcript_read', () => {
    const TEXTS = [
      'family 👩‍👩‍👧 at the table',
      'flag 🇫🇷 and thumbs 👍🏽',
      'cafe\u0301 with a combining accent',
      'windows\r\nline\r\nendings',
      '👩‍👩‍👧🇫🇷👍🏽e\u0301\r\n',
    ];

    test('concatenated pages of limit 1, 2, 3 and 7 reproduce the full read grapheme for grapheme', async () => {
      await c.call('session.open', { session: 'graph' });
      await c.call('transcript.append', {
        session: 'graph',
        rows: [...TEXTS.map((t) => user(t)), assistant('reply 👍🏽', ['g1']), toolResult('g1', 'e\u0301\u0301 done 🇫🇷🇫🇷')],
      });
      const full = await c.call('transcript_read', { session: 'graph', limit: 1_000_000 });
      assert.equal(full.offset, 0);
      assert.equal(full.next_offset, null);
      const rows = await allRows(c, 'graph');
      assert.ok(full.text.startsWith(`#${rows[0]!.seq} user\nfamily 👩‍👩‍👧 at the table\n\n`));
      for (const t of TEXTS) assert.ok(full.text.includes(t));
      const reference = graphemes(full.text);

      for (const limit of [1, 2, 3, 7]) {
        let offset: number | null = 0;
        let out = '';
        let pages = 0;
        while (offset !== null) {
          const page: Result<'transcript_read'> = await c.call('transcript_read', { session: 'graph', offset, limit });
          assert.equal(page.offset, offset);
          const got = graphemes(page.text);
          assert.deepEqual(got, reference.slice(offset, offset + limit), `limit ${limit}, offset ${offset}: whole graphemes`);
          out += page.text;
          const end: number = offset + got.length;
          assert.equal(page.next_offset, end < reference.length ? end : null);
          offset = page.next_offset;
          pages++;
        }
        assert.equal(out, full.text, `limit ${limit}`);
        assert.equal(pages, Math.ceil(reference.length / limit));
      }
    });

    test('offsets at or past the end answer an empty page with next_offset null', async () => {
      const full = await c.call('transcript_read', { session: 'graph', limit: 1_000_000 });
      const total = graphemes(full.text).length;
      for (const offset of [total, total + 1, 10 * total, Number.MAX_SAFE_INTEGER - 1_000_000]) {
        assert.deepEqual(await c.call('transcript_read', { session: 'graph', offset }), { text: '', offset, next_offset: null });
      }
      assert.deepEqual(await c.call('transcript_read', { session: 'graph', offset: Number.MAX_SAFE_INTEGER, limit: 1_000_000 }), {
        text: '',
        offset: Number.MAX_SAFE_INTEGER,
        next_offset: null,
      });
      const last = await c.call('transcript_read', { session: 'graph', offset: total - 1, limit: 5 });
      assert.equal(last.text, graphemes(full.text).at(-1));
      assert.equal(last.next_offset, null);
      await c.call('session.open', { session: 'read-empty' });
      assert.deepEqual(await c.call('transcript_read', { session: 'read-empty' }), { text: '', offset: 0, next_offset: null });
    });

    test('from_seq and to_seq render an inclusive range of the session', async () => {
      const rows = await allRows(c, 'graph');
      const r = await c.call('transcript_read', { session: 'graph', from_seq: rows[1]!.seq, to_seq: rows[2]!.seq });
      assert.equal(r.text, `#${rows[1]!.seq} user\n${TEXTS[1]}\n\n#${rows[2]!.seq} user\n${TEXTS[2]}`);
      assert.equal(r.next_offset, null);
      await failsWith(
        c.call('transcript_read', { session: 'graph', from_seq: rows[2]!.seq, to_seq: rows[1]!.seq }),
        'invalid_range',
      );
    });
  });

  describe('transcript_grep', () => {
    test('a session-scoped search counts every match and pages them in seq order', async () => {
      await c.call('session.open', { session: 'grep-s' });
      await c.call('session.open', { session: 'grep-s2' });
      const { seqs } = await c.call('transcript.append', {
        session: 'grep-s',
        rows: [user('zebra-needle one'), user('nothing here'), user('ZEBRA-NEEDLE two'), assistant('a zebra-needle three'), user('zebra-needle four'), user('Zebra-Needle five')],
      });
      await c.call('transcript.append', { session: 'grep-s2', rows: [user('zebra-needle elsewhere')] });
      const hits = [seqs[0], seqs[2], seqs[3], seqs[4], seqs[5]];

      const p1 = await c.call('transcript_grep', { session: 'grep-s', pattern: 'zebra-needle', limit: 2 });
      assert.equal(p1.total, 5);
      assert.equal(p1.offset, 0);
      assert.equal(p1.next_offset, 2);
      assert.deepEqual(
        p1.matches.map((m) => m.seq),
        hits.slice(0, 2),
      );
      assert.ok(p1.matches.every((m) => m.session === 'grep-s'));
      assert.equal(p1.matches[0]?.preview, 'zebra-needle one');
      assert.equal(p1.matches[1]?.preview, 'ZEBRA-NEEDLE two');

      const p3 = await c.call('transcript_grep', { session: 'grep-s', pattern: 'zebra-needle', offset: 4, limit: 2 });
      assert.equal(p3.total, 5);
      assert.equal(p3.next_offset, null);
      assert.deepEqual(
        p3.matches.map((m) => m.seq),
        hits.slice(4),
      );
      const past = await c.call('transcript_grep', { session: 'grep-s', pattern: 'zebra-needle', offset: 50 });
      assert.deepEqual(past, { total: 5, offset: 50, next_offset: null, matches: [] });
      const none = await c.call('transcript_grep', { session: 'grep-s', pattern: 'no such thing anywhere' });
      assert.deepEqual(none, { total: 0, offset: 0, next_offset: null, matches: [] });
    });

    test('a cross-session search covers every session, or only those of one workspace', async () => {
      await c.call('session.open', { session: 'gx-a', workspace: '/w/alpha' });
      await c.call('session.open', { session: 'gx-a2', workspace: '/w/alpha' });
      await c.call('session.open', { session: 'gx-b', workspace: '/w/beta' });
      await c.call('session.open', { session: 'gx-c' });
      for (const s of ['gx-a', 'gx-a2', 'gx-b', 'gx-c']) {
        await c.call('transcript.append', { session: s, rows: [user(`quokka-token in ${s}`)] });
      }
      const everywhere = await c.call('transcript_grep', { pattern: 'quokka-token' });
      assert.equal(everywhere.total, 4);
      assert.deepEqual(
        everywhere.matches.map((m) => m.session),
        ['gx-a', 'gx-a2', 'gx-b', 'gx-c'],
      );
      const alpha = await c.call('transcript_grep', { pattern: 'quokka-token', workspace: '/w/alpha' });
      assert.equal(alpha.total, 2);
      assert.deepEqual(
        alpha.matches.map((m) => m.session),
        ['gx-a', 'gx-a2'],
      );
      const alphaPage = await c.call('transcript_grep', { pattern: 'quokka-token', workspace: '/w/alpha', limit: 1 });
      assert.equal(alphaPage.total, 2);
      assert.equal(alphaPage.matches.length, 1);
      assert.equal(alphaPage.next_offset, 1);
      const nowhere = await c.call('transcript_grep', { pattern: 'quokka-token', workspace: '/w/none' });
      assert.equal(nowhere.total, 0);
      const scopedElsewhere = await c.call('transcript_grep', { pattern: 'quokka-token', session: 'gx-b', workspace: '/w/alpha' });
      assert.equal(scopedElsewhere.total, 0);
    });

    test('matching is Unicode case-insensitive: ÉCOLE finds école, composed or not', async () => {
      await c.call('session.open', { session: 'grep-u' });
      const { seqs } = await c.call('transcript.append', {
        session: 'grep-u',
        rows: [user("L'école est fermée"), user("l'e\u0301cole decomposed"), user('ECOLE without accent'), user('ΣΊΣΥΦΟΣ and 👍🏽')],
      });
      const r = await c.call('transcript_grep', { session: 'grep-u', pattern: 'ÉCOLE' });
      assert.equal(r.total, 2);
      assert.deepEqual(
        r.matches.map((m) => m.seq),
        [seqs[0], seqs[1]],
      );
      assert.equal(r.matches[0]?.preview, "L'école est fermée");
      const lower = await c.call('transcript_grep', { session: 'grep-u', pattern: 'école' });
      assert.deepEqual(lower.matches.map((m) => m.seq), [seqs[0], seqs[1]]);
      const greek = await c.call('transcript_grep', { session: 'grep-u', pattern: 'σίσυφος' });
      assert.deepEqual(greek.matches.map((m) => m.seq), [seqs[3]]);
    });

    test('matching folds case fully: GRÖSSE finds Größe, ß and ss meet, final sigma; one and two characters count exactly', async () => {
      await c.call('session.open', { session: 'grep-f' });
      const { seqs } = await c.call('transcript.append', {
        session: 'grep-f',
        rows: [user('Die Größe der Datei'), user('GRÖSSE Dateien'), user('ΟΔΥΣΣΕΥΣ'), user('the ﬁle ends in DB'), user('q')],
      });
      const ask = async (pattern: string): Promise<number[]> => (await c.call('transcript_grep', { session: 'grep-f', pattern })).matches.map((m) => m.seq);
      const expect = async (): Promise<void> => {
        assert.deepEqual(await ask('GRÖSSE'), [seqs[0], seqs[1]]);
        assert.deepEqual(await ask('straße'.slice(4)), [seqs[0], seqs[1]], '"ße" folds to "sse"');
        assert.deepEqual(await ask('ß'), [seqs[0], seqs[1]], 'a one-character pattern that folds to two');
        assert.deepEqual(await ask('ὀδυσσεύς'.normalize('NFD').replace(/\p{M}/gu, '')), [seqs[2]], 'a final sigma finds the capital one');
        assert.deepEqual(await ask('FILE'), [seqs[3]]);
        assert.deepEqual(await ask('db'), [seqs[3]], 'two characters at a row end');
        assert.deepEqual(await ask('Q'), [seqs[4]], 'one character, a whole row');
      };
      await expect();
      // The same answers once the idle-time indexer has had a chance to index these rows.
      await new Promise((resolve) => setTimeout(resolve, 300));
      await expect();
    });
  });

  describe('memory tools', () => {
    test('tools.list describes transcript_read and transcript_grep with JSON input schemas', async () => {
      const { tools } = await c.call('tools.list', { session: 'graph' });
      // The lcm_* tools of lcm-memory are on by default too; test/e2e/lcm-tools.test.ts covers them.
      assert.deepEqual(
        tools.map((t) => t.name).sort(),
        ['lcm_describe', 'lcm_expand', 'lcm_grep', 'lcm_list', 'transcript_grep', 'transcript_read'],
      );
      const read = tools.find((t) => t.name === 'transcript_read')!;
      const grep = tools.find((t) => t.name === 'transcript_grep')!;
      assert.ok(read.description.length > 20 && grep.description.length > 20);
      for (const t of [read, grep]) {
        assert.equal(t.input_schema.type, 'object');
        assert.equal(t.input_schema.additionalProperties, false);
        assert.ok(!('session' in (t.input_schema.properties as object)), 'the session is bound, not an argument');
      }
      assert.deepEqual(Object.keys(read.input_schema.properties as object).sort(), ['from_seq', 'limit', 'offset', 'to_seq']);
      assert.deepEqual(Object.keys(grep.input_schema.properties as object).sort(), ['limit', 'offset', 'pattern']);
      assert.deepEqual(grep.input_schema.required, ['pattern']);
      assert.ok(!Array.isArray(read.input_schema.required) || read.input_schema.required.length === 0);
      await failsWith(c.call('tools.list', { session: 'no-such-session' }), 'unknown_session');
    });

    test('tools.call answers what the direct method answers, bound to its session', async () => {
      const viaTool = await c.call('tools.call', { session: 'graph', name: 'transcript_read', arguments: { offset: 3, limit: 11 } });
      assert.equal(viaTool.name, 'transcript_read');
      assert.deepEqual(viaTool.result, await c.call('transcript_read', { session: 'graph', offset: 3, limit: 11 }));

      const grepTool = await c.call('tools.call', { session: 'grep-s', name: 'transcript_grep', arguments: { pattern: 'zebra-needle', limit: 3 } });
      assert.deepEqual(grepTool.result, await c.call('transcript_grep', { session: 'grep-s', pattern: 'zebra-needle', limit: 3 }));
      const r = grepTool.result;
      assert.equal(r.total, 5, "the other session's match is not counted");

      const defaults = await c.call('tools.call', { session: 'graph', name: 'transcript_read' });
      assert.deepEqual(defaults.result, await c.call('transcript_read', { session: 'graph' }));
    });

    test('tools.call refuses an unknown tool, bad arguments and an unknown session', async () => {
      const unknown = await failsWith(c.call('tools.call', { session: 'graph', name: 'rm_rf', arguments: {} }), 'unknown_tool');
      assert.equal((unknown.data as { tool: string }).tool, 'rm_rf');
      for (const args of [{ offset: -1 }, { limit: 'ten' }, { session: 'grep-s' }, { offset: 1.5 }]) {
        const bad = await failsWith(
          c.call('tools.call', { session: 'graph', name: 'transcript_read', arguments: args }),
          'invalid_tool_arguments',
        );
        assert.equal((bad.data as { tool: string }).tool, 'transcript_read');
      }
      await failsWith(c.call('tools.call', { session: 'graph', name: 'transcript_grep', arguments: {} }), 'invalid_tool_arguments');
      await failsWith(
        c.call('tools.call', { session: 'graph', name: 'transcript_grep', arguments: { pattern: 'x', workspace: '/w' } }),
        'invalid_tool_arguments',
      );
      await failsWith(c.call('tools.call', { session: 'no-such-session', name: 'transcript_read', arguments: {} }), 'unknown_session');
    });
  });

  describe('payload.get and daemon.status', () => {
    test('an appended PNG comes back byte for byte with its dimensions', async () => {
      const png = await pngBytes(37, 21);
      await c.call('session.open', { session: 'img' });
      const { seqs } = await c.call('transcript.append', {
        session: 'img',
        rows: [user('look at this', { images: [imageIn(png, 'image/png')] })],
      });
      const [row] = await allRows(c, 'img');
      assert.equal(row?.seq, seqs[0]);
      const part = row?.body.kind === 'user' ? row.body.content[1] : undefined;
      assert.ok(part?.type === 'image');
      assert.equal(part.media_type, 'image/png');
      assert.equal(part.width, 37);
      assert.equal(part.height, 21);
      assert.match(part.hash, /^[0-9a-f]{64}$/);

      const got = await c.call('payload.get', { hash: part.hash });
      assert.equal(got.hash, part.hash);
      assert.equal(got.media_type, 'image/png');
      assert.equal(got.width, 37);
      assert.equal(got.height, 21);
      assert.ok(Buffer.from(got.data, 'base64').equals(png));

      // Uploading the same bytes again, or referring to them by hash, stores one payload.
      await c.call('transcript.append', { session: 'img', rows: [user('again', { images: [imageIn(png, 'image/png')] })] });
      await c.call('transcript.append', {
        session: 'img',
        rows: [{ kind: 'user', content: [{ type: 'text', text: 'by hash' }, { type: 'image', hash: part.hash }] }],
      });
      const rows = await allRows(c, 'img');
      assert.deepEqual(
        rows.map((r) => (r.body.kind === 'user' ? r.body.content[1] : undefined)),
        [part, part, part],
      );
      const text = await c.call('transcript_read', { session: 'img' });
      assert.ok(text.text.includes(`[image ${part.hash.slice(0, 8)} 37x21]`));
    });

    test('payload.get of an unknown hash fails with unknown_payload', async () => {
      const hash = 'ab'.repeat(32);
      const err = await failsWith(c.call('payload.get', { hash }), 'unknown_payload');
      assert.equal((err.data as { hash: string }).hash, hash);
      await failsWith(c.call('payload.get', { hash: 'XYZ' }), 'invalid_params', RpcCode.InvalidParams);
    });

    test('daemon.status counts the sessions and the open connections', async () => {
      const extra = await d.connect();
      try {
        const status = await extra.call('daemon.status', {});
        assert.equal(status.sessions, (await c.call('session.list', {})).sessions.length);
        assert.ok(status.connections >= 2, `at least this test's two clients (${status.connections})`);
        assert.equal(status.pid, d.proc.pid);
        assert.equal(status.home, d.home);
        assert.ok(status.uptime_ms >= 0);
        assert.deepEqual(status.config_errors, []);
        const m = status.memory;
        assert.ok(m.rss_bytes > 0 && m.heap_used_bytes > 0 && m.external_bytes >= 0);
        assert.equal(m.partial_line_bytes, 0);
        assert.equal(m.partial_line_budget_bytes, 2 * 64 * 1024 * 1024);
        assert.ok(m.queued_output_bytes >= 0);
        await c.call('session.open', { session: 'status-extra' });
        assert.equal((await extra.call('daemon.status', {})).sessions, status.sessions + 1);
      } finally {
        await extra.close();
      }
    });

    // issue 35, target 3: when does search answer from the index after an import?
    test('daemon.status says how many rows the search index has not reached, and 0 once idle time has indexed them', async () => {
      const off = await startDaemon({ env: { ALBEDO_SEARCH_INDEXER: 'off' } });
      try {
        const oc = await off.connect();
        await oc.call('session.open', { session: 'behind' });
        await oc.call('transcript.append', { session: 'behind', rows: Array.from({ length: 7 }, (_, i) => user(`row ${i}`)) });
        assert.deepEqual((await oc.call('daemon.status', {})).search, { indexer: false, rows_behind: 7 });
        // Thousands of seqs behind, the rows are counted a window of seqs at a time, and counted,
        // not taken from the seqs: a deleted session's rows leave a gap of seqs, not rows.
        await oc.call('session.open', { session: 'gone' });
        for (let k = 0; k < 9; k++) await oc.call('transcript.append', { session: 'gone', rows: Array.from({ length: 1000 }, (_, i) => user(`gone ${k}.${i}`)) });
        await oc.call('session.delete', { session: 'gone' });
        await oc.call('transcript.append', { session: 'behind', rows: [user('row 7'), user('row 8')] });
        assert.deepEqual((await oc.call('daemon.status', {})).search, { indexer: false, rows_behind: 9 });
        // The count did not start the search worker (a V8 instance, tens of MiB for a minute):
        // the first search that needs it does.
        assert.equal((await oc.call('transcript_grep', { session: 'behind', pattern: 'row 8' })).total, 1);
        const started = (await loggedLine(off, 'search worker started')).split('\n').filter((l) => l.includes('search worker started'));
        assert.equal(started.length, 1);
        assert.equal((JSON.parse(started[0]!) as { ask: string }).ask, 'scan');
      } finally {
        await off.stop();
        fs.rmSync(off.home, { recursive: true, force: true });
      }
      await c.call('session.open', { session: 'indexed' });
      await c.call('transcript.append', { session: 'indexed', rows: Array.from({ length: 40 }, (_, i) => user(`indexed row ${i} quillwort`)) });
      let search = (await c.call('daemon.status', {})).search;
      for (let i = 0; i < 400 && search.rows_behind > 0; i++) {
        await new Promise((r) => setTimeout(r, 25));
        search = (await c.call('daemon.status', {})).search;
      }
      assert.deepEqual(search, { indexer: true, rows_behind: 0 });
      assert.equal((await c.call('transcript_grep', { session: 'indexed', pattern: 'quillwort' })).total, 40);
    });
  });
});
