// The transport defects of issue 11 against the real albedod over its real socket: invalid
// UTF-8, notifications, a client's half-close, requests cut off by shutdown, and the start-up
// race. The same behaviour in isolation is in test/protocol/rpc-peer.test.ts.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { RpcCode } from '../../protocol/errors.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { imageIn, pngBytes, user } from '../storage/factories.ts';
import { allRows, rawConnection, startDaemon, type DaemonHandle } from './harness.ts';

interface WireReply {
  jsonrpc: '2.0';
  id: string | number | null;
  result?: unknown;
  error?: { code: number; message: string; data?: { code: string; [k: string]: unknown } };
}

const running: DaemonHandle[] = [];
after(async () => {
  await Promise.all(running.map((d) => d.stop('SIGKILL')));
});

async function start(opts?: Parameters<typeof startDaemon>[0]): Promise<DaemonHandle> {
  const d = await startDaemon(opts);
  running.push(d);
  return d;
}

const text = (r: StoredRow | undefined) => (r?.body.kind === 'user' && r.body.content[0]?.type === 'text' ? r.body.content[0].text : undefined);
const appendLine = (id: string | null, session: string, words: string | Buffer): Buffer => {
  const head = `{"jsonrpc":"2.0",${id === null ? '' : `"id":"${id}",`}"method":"transcript.append","params":{"session":"${session}","rows":[{"kind":"user","content":[{"type":"text","text":"`;
  return Buffer.concat([Buffer.from(head), Buffer.from(words), Buffer.from('"}]}]}}\n')]);
};

describe('transport against the real daemon', () => {
  // issue 11, defect 2: `c3 28 ff` inside a string was stored as `bad\uFFFD(\uFFFD end`.
  test('an append whose line is not valid UTF-8 gets -32700 and stores nothing', async () => {
    const d = await start();
    const c = await d.connect();
    await c.call('session.open', { session: 'utf' });
    const raw = await rawConnection(d.socket);
    await raw.initialize();
    raw.write(appendLine('bad', 'utf', Buffer.concat([Buffer.from('bad'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from(' end')])));
    assert.deepEqual(await raw.next(), {
      jsonrpc: '2.0',
      id: null,
      error: { code: RpcCode.ParseError, message: 'parse error', data: { code: 'parse_error' } },
    });
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
});
