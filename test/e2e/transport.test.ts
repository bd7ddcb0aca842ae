// The transport defects of issue 11 against the real albedod over its real socket: invalid
// UTF-8, notifications, a client's half-close, requests cut off by shutdown, and the start-up
// race. The same behaviour in isolation is in test/protocol/rpc-peer.test.ts.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, test } from 'node:test';
import { DomainCode, RpcCode } from '../../protocol/errors.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { imageIn, pngBytes, user } from '../storage/factories.ts';
import { allRows, failsWith, rawConnection, spawnDaemon, startEach, tempHome } from './harness.ts';

interface WireReply {
  jsonrpc: '2.0';
  id: string | number | null;
  result?: unknown;
  error?: { code: number; message: string; data?: { code: string; [k: string]: unknown } };
}

/** Daemons this file starts; each is killed when the file's tests end. */
const start = startEach();

const text = (r: StoredRow | undefined) => (r?.body.kind === 'user' && r.body.content[0]?.type === 'text' ? r.body.content[0].text : undefined);
const appendLine = (id: string | null, session: string, words: string | Buffer): Buffer => {
  const head = `{"jsonrpc":"2.0",${id === null ? '' : `"id":"${id}",`}"method":"transcript.append","params":{"session":"${session}","rows":[{"kind":"user","content":[{"type":"text","text":"`;
  return Buffer.concat([Buffer.from(head), Buffer.from(words), Buffer.from('"}]}]}}\n')]);
};

describe('transport against the real daemon', () => {
  // issue 11, defect 2: `c3 28 ff` inside a string was stored as `bad\uFFFD(\uFFFD end`.
  // issue 30, defect 10: the refusal came with id null; a client with several requests in flight
  // could not tell which had failed.
  test('an append whose line is not valid UTF-8 is refused under its own id, naming the text, and stores nothing', async () => {
    const d = await start();
    const c = await d.connect();
    await c.call('session.open', { session: 'utf' });
    const raw = await rawConnection(d.socket);
    await raw.initialize();
    raw.write(appendLine('bad', 'utf', Buffer.concat([Buffer.from('bad'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from(' end')])));
    const reply = (await raw.next()) as WireReply;
    assert.equal(reply.id, 'bad');
    assert.equal(reply.error?.code, RpcCode.InvalidParams);
    assert.equal(reply.error?.data?.code, 'invalid_params');
    assert.deepEqual(reply.error?.data?.issues, [{ path: ['rows', '0', 'content', '0', 'text'], message: 'not valid UTF-8', code: 'invalid_utf8' }]);
    assert.match(reply.error?.message ?? '', /transcript\.append: the text "bad\uFFFD\(\uFFFD end" at params\.rows\.0\.content\.0\.text is not valid UTF-8/);
    raw.write(appendLine('good', 'utf', 'good €'));
    assert.equal(((await raw.next()) as WireReply).id, 'good');
    assert.deepEqual((await allRows(c, 'utf')).map(text), ['good €']);
    raw.end();
  });

  // issue 11, defect 4: an append sent without an id stored nothing and reported nothing.
  test('a notification is run: an append without an id is stored, a failing one is logged with its method', async () => {
    const d = await start();
    const c = await d.connect();
    await c.call('session.open', { session: 'note' });
    const raw = await rawConnection(d.socket);
    await raw.initialize();
    raw.write(appendLine(null, 'note', 'sent as a notification'));
    raw.write(appendLine(null, 'nobody', 'to an unknown session'));
    // A session runs its calls in order: the notification is stored before the request after it.
    raw.write(appendLine('after', 'note', 'sent as a request'));
    const reply = (await raw.next()) as WireReply;
    assert.equal(reply.id, 'after');
    assert.deepEqual((await allRows(c, 'note')).map(text), ['sent as a notification', 'sent as a request']);
    const log = path.join(d.home, 'albedod.log');
    let failure: { method?: string; code?: string } | undefined;
    for (let i = 0; i < 500 && failure === undefined; i++) {
      const lines = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n') : [];
      failure = lines.filter((l) => l.includes('notification failed')).map((l) => JSON.parse(l) as { method?: string; code?: string })[0];
      if (failure === undefined) await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(failure?.method, 'transcript.append');
    assert.equal(failure?.code, 'unknown_session');
    raw.end();
  });

  // issue 11, defect 11: `12345678901234567890` came back as 12345678901234567000, and
  // `1.0000000000000000001`, which JSON.parse makes exactly 1, as 1.
  test('a number id that would not be echoed exactly as sent is refused with -32600 and nothing runs', async () => {
    const d = await start();
    const c = await d.connect();
    await c.call('session.open', { session: 'ids' });
    const raw = await rawConnection(d.socket);
    await raw.initialize();
    const appendWithId = (id: string, words: string): string => `{"jsonrpc":"2.0","id":${id},"method":"transcript.append","params":{"session":"ids","rows":[{"kind":"user","content":[{"type":"text","text":"${words}"}]}]}}\n`;
    for (const id of ['1.0000000000000000001', '12345678901234567890', '1e400', '2.0', '3e0']) {
      raw.write(appendWithId(id, `id ${id}`));
      const r = (await raw.next()) as WireReply;
      assert.equal(r.id, null, id);
      assert.equal(r.error?.code, RpcCode.InvalidRequest, id);
    }
    raw.write(appendWithId('4', 'id 4'));
    assert.deepEqual(((await raw.next()) as WireReply).id, 4);
    assert.deepEqual((await allRows(c, 'ids')).map(text), ['id 4']);
    raw.end();
  });

  // issue 11, defect 5: `printf ... | socat` clients got answers only for the fast requests.
  test('a client that half-closes after writing its requests gets every reply, then the daemon closes', async () => {
    const d = await start();
    const sock = net.createConnection(d.socket);
    await new Promise((resolve) => sock.once('connect', resolve));
    // Images are checked off the main thread, so these appends are still running when the end arrives.
    const images = await Promise.all([1, 2, 3].map((i) => pngBytes(800 + i, 600)));
    const requests = [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocol: 1, client: { name: 'half', version: '1' } } },
      { jsonrpc: '2.0', id: 2, method: 'session.open', params: { session: 'half' } },
      ...images.map((png, i) => ({
        jsonrpc: '2.0',
        id: 3 + i,
        method: 'transcript.append',
        params: { session: 'half', rows: [user(`image ${i}`, { images: [imageIn(png, 'image/png')] })] },
      })),
      { jsonrpc: '2.0', id: 6, method: 'transcript.rows', params: { session: 'half' } },
    ];
    let received = '';
    sock.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
    const closed = new Promise((resolve) => sock.once('close', resolve));
    sock.end(requests.map((r) => JSON.stringify(r) + '\n').join(''));
    await closed;
    const replies = received.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as WireReply);
    assert.deepEqual(
      replies.map((r) => [r.id, r.error?.data?.code ?? 'ok']),
      [1, 2, 3, 4, 5, 6].map((id) => [id, 'ok']),
    );
    assert.deepEqual((replies[5]?.result as { rows: StoredRow[] }).rows.map(text), ['image 0', 'image 1', 'image 2']);
  });

  // issue 11, defect 7: a request still running when the grace period ran out got a closed socket.
  test('a request cut off by shutdown is answered with shutting_down, a new one is refused with it', async () => {
    const home = tempHome();
    // A client summarizer that never answers keeps the compaction, and so the prepare, in flight.
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: 2000 }, summarizer: { provider: 'client' } }));
    const d = await start({ home, env: { ALBEDO_SHUTDOWN_GRACE_MS: '300' } });
    let asked!: () => void;
    const summarizing = new Promise<void>((resolve) => (asked = resolve));
    const c = await d.connect({ summarize: () => (asked(), new Promise(() => undefined)) });
    await c.call('session.open', { session: 'cut' });
    const rows = Array.from({ length: 40 }, (_, i) => [
      { kind: 'user' as const, content: [{ type: 'text' as const, text: `step ${i}: change src/file${i}.ts `.repeat(4) }] },
      { kind: 'assistant' as const, content: [{ type: 'text' as const, text: `changed src/file${i}.ts `.repeat(4) }] },
    ]).flat();
    await c.call('transcript.append', { session: 'cut', rows });
    const pending = c.call('prepare', { session: 'cut', model: 'm', instructions: 'work' });
    await summarizing;
    d.proc.kill('SIGTERM');
    const log = path.join(home, 'albedod.log');
    while (!(fs.existsSync(log) && fs.readFileSync(log, 'utf8').includes('albedod stopping'))) await new Promise((r) => setTimeout(r, 10));
    await failsWith(c.call('session.list', {}), 'shutting_down', DomainCode.shutting_down);
    await failsWith(pending, 'shutting_down', DomainCode.shutting_down);
    assert.equal(await new Promise((resolve) => d.proc.once('exit', resolve)), 0);
  });
});

// issue 11, defect 1: connections made as soon as the socket appeared were reset until the
// daemon was `running` (2-8 per start, in the first 15-60 ms).
test('connections made as soon as the socket appears are served, none is reset', async () => {
  const home = tempHome();
  const socketPath = path.join(home, 'albedod.sock');
  const p = spawnDaemon(home);
  try {
    const outcomes: Array<Promise<string>> = [];
    /** Connects once; resolves 'refused' when there is no socket yet, else what became of initialize. */
    const attempt = (): Promise<string> =>
      new Promise((resolve) => {
        const s = net.createConnection(socketPath);
        let connected = false;
        let got = '';
        s.on('error', (err: NodeJS.ErrnoException) => resolve(connected ? `error ${err.code}` : 'refused'));
        s.on('close', () => resolve(connected ? 'closed without a reply' : 'refused'));
        s.on('connect', () => {
          connected = true;
          s.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocol: 1, client: { name: 'race', version: '1' } } })}\n`);
        });
        s.setEncoding('utf8').on('data', (d: string) => {
          got += d;
          if (got.includes('\n')) {
            const reply = JSON.parse(got.slice(0, got.indexOf('\n'))) as WireReply;
            resolve(reply.error === undefined ? 'served' : `error ${reply.error.data?.code}`);
            s.destroy();
          }
        });
      });
    let first = 'refused';
    for (let i = 0; i < 5000 && first === 'refused'; i++) {
      assert.equal(p.proc.exitCode, null, p.stderr());
      first = await attempt();
      if (first === 'refused') {
        // The socket is there: connect many at once, the moment it is.
        if (fs.existsSync(socketPath)) { for (let k = 0; k < 40; k++) outcomes.push(attempt()); }
        else await new Promise((r) => setTimeout(r, 2));
      }
    }
    for (let k = 0; k < 40; k++) outcomes.push(attempt());
    const all = [first, ...(await Promise.all(outcomes))].filter((o) => o !== 'refused');
    assert.ok(all.length >= 41);
    assert.deepEqual(all.filter((o) => o !== 'served'), [], 'some early connections were not served');
  } finally {
    p.proc.kill('SIGKILL');
    await p.exited;
  }
});
