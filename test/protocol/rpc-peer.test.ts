// RpcPeer over a real Unix socket: raw NDJSON bytes for malformed input, batches, cancellation,
// size and in-flight limits, and a second RpcPeer as client for outgoing requests and dispose.
// The typed client and reverse requests are covered in client.test.ts.
import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { AlbedoError, DomainCode, RpcCode, rpcError } from '../../protocol/errors.ts';
import { LineDecoder } from '../../protocol/framing.ts';
import { JSON_BYTES_THRESHOLD } from '../../protocol/json-bytes.ts';
import { PartialLineBudget } from '../../protocol/line-budget.ts';
import { EncodedJson, RpcRemoteError } from '../../protocol/rpc-message.ts';
import { NEXT_REQUEST_GRACE_MS, RpcPeer, type RequestHandler, type RpcPeerOptions } from '../../protocol/rpc-peer.ts';
import { ByteChunks, ChunkBuilder } from '../../protocol/byte-chunks.ts';

interface Reply {
  jsonrpc: string;
  id: string | number | null;
  result?: unknown;
  error?: { code: number; message: string; data?: { code: string } & Record<string, unknown> };
}

class Counter extends EventEmitter {
  n = 0;
  inc(): void {
    this.n++;
    this.emit('inc');
  }
  async reach(k: number): Promise<void> {
    while (this.n < k) await once(this, 'inc');
  }
}

/** Handlers blocked on the gate wait until the test lets them through, one by one. */
class Gate {
  private waiting: Array<() => void> = [];
  wait(): Promise<void> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  releaseOne(): void {
    this.waiting.shift()?.();
  }
  releaseAll(): void {
    for (const r of this.waiting.splice(0)) r();
  }
}

async function startServer(t: TestContext, opts: Partial<RpcPeerOptions> = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-'));
  const sock = path.join(dir, 'rpc.sock');
  const started = new Counter();
  const aborted = new Counter();
  const gate = new Gate();
  const internalErrors: Array<{ err: unknown; method: string | undefined }> = [];
  const notificationErrors: Array<{ code: number; method: string }> = [];
  const notifications: string[] = [];
  const noted = new Counter();
  const peers: RpcPeer[] = [];
  const sockets: net.Socket[] = [];
  const onRequest: RequestHandler = async (method, params, { id, signal, peer }) => {
    if (id === undefined) {
      notifications.push(method);
      noted.inc();
    }
    switch (method) {
      case 'note':
        return undefined;
      case 'explode':
        throw new Error('notification handler failed');
      case 'ask':
        // Answers with what the other side answers to our own request (a reverse request).
        started.inc();
        return peer.request('question', params);
      case 'echo':
        return params;
      case 'nothing':
        return undefined;
      case 'chunked':
        // A result already encoded in pieces, as a prepare reply with inline images is.
        return new EncodedJson(chunkedValue().bytes);
      case 'big':
        // A small request with a large reply (as transcript.rows is).
        started.inc();
        return 'b'.repeat(64 * 1024);
      case 'slow':
        started.inc();
        if (!signal.aborted) await once(signal, 'abort');
        aborted.inc();
        throw signal.reason;
      case 'gated':
        started.inc();
        await gate.wait();
        return 'done';
      case 'domain':
        throw new AlbedoError('unknown_session', 'no session "s1"', { session: 's1' });
      case 'boom':
        throw new Error('/home/secret/albedo.db exploded');
      default:
        throw rpcError(RpcCode.MethodNotFound, 'method_not_found', `method not found: ${method}`);
    }
  };
  // Half-open, as the daemon's server is: a client's end of writes still gets its replies.
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    sockets.push(socket);
    peers.push(
      new RpcPeer(socket, {
        onRequest,
        onNotificationError: (error, method) => notificationErrors.push({ code: error.code, method }),
        onInternalError: (err, method) => internalErrors.push({ err, method }),
        ...opts,
      }),
    );
  });
  server.listen(sock);
  await once(server, 'listening');
  t.after(async () => {
    gate.releaseAll();
    for (const p of peers) p.dispose('test over');
    await new Promise((resolve) => server.close(resolve));
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { sock, started, aborted, gate, internalErrors, notificationErrors, notifications, noted, peers, sockets };
}

/** A client that writes raw bytes and reads the replies as parsed lines. */
async function rawConnect(t: TestContext, sock: string) {
  const socket = net.createConnection(sock);
  await once(socket, 'connect');
  t.after(() => void socket.destroy());
  const inbox: unknown[] = [];
  const events = new EventEmitter();
  const decoder = new LineDecoder({
    onLine: (line) => {
      inbox.push(JSON.parse(line));
      events.emit('line');
    },
    onOverflow: () => assert.fail('reply too long'),
    onInvalidUtf8: () => assert.fail('reply not UTF-8'),
  });
  socket.on('data', (chunk: Buffer) => decoder.push(chunk));
  const closed = once(socket, 'close');
  return {
    socket,
    closed,
    send: (text: string) => void socket.write(text),
    async next(): Promise<unknown> {
      while (inbox.length === 0) {
        await Promise.race([once(events, 'line'), closed.then(() => assert.fail('closed while waiting for a reply'))]);
      }
      return inbox.shift();
    },
    async reply(): Promise<Reply> {
      const r = await this.next();
      assert.ok(!Array.isArray(r), 'expected a single reply');
      return r as Reply;
    },
    async batch(): Promise<Reply[]> {
      const r = await this.next();
      assert.ok(Array.isArray(r), 'expected a batch reply');
      return r as Reply[];
    },
  };
}

/** A second RpcPeer as the client side, for outgoing requests; `closed` settles on its onClose. */
async function peerConnect(t: TestContext, sock: string): Promise<{ client: RpcPeer; closed: Promise<void> }> {
  const socket = net.createConnection(sock);
  await once(socket, 'connect');
  let onClose!: () => void;
  const closed = new Promise<void>((resolve) => (onClose = resolve));
  const client = new RpcPeer(socket, {
    onClose,
    onRequest: async (method) => {
      throw rpcError(RpcCode.MethodNotFound, 'method_not_found', `method not found: ${method}`);
    },
  });
  t.after(() => client.dispose());
  return { client, closed };
}

const req = (id: unknown, method: string, params?: unknown) => ({ jsonrpc: '2.0', id, method, params });
const line = (v: unknown) => JSON.stringify(v) + '\n';

test('a line that is not JSON gets -32700 with id null, and the connection stays usable', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send('{"jsonrpc":"2.0","id":1,"method":\n');
  assert.deepEqual(await c.reply(), {
    jsonrpc: '2.0',
    id: null,
    error: { code: RpcCode.ParseError, message: 'parse error', data: { code: 'parse_error' } },
  });
  c.send('\r\n\n' + line(req(2, 'echo', { a: 1 }))); // blank lines are skipped, not answered
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 2, result: { a: 1 } });
});

test('an invalid request gets -32600 with its id when the id is readable, else null', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  const cases: Array<[unknown, string | number | null]> = [
    [{ jsonrpc: '1.0', id: 3, method: 'echo' }, 3],
    [{ id: 4, method: 'echo' }, 4],
    [{ jsonrpc: '2.0', id: 5, method: 7 }, 5],
    [{ jsonrpc: '2.0', id: 'p', method: 'echo', params: 'text' }, 'p'],
    [{ jsonrpc: '2.0', id: { x: 1 }, method: 'echo' }, null],
    [{ jsonrpc: '2.0', id: null, method: 'echo' }, null],
    [{ jsonrpc: '2.0', method: 1, params: 'bar' }, null],
    [42, null],
  ];
  for (const [msg, id] of cases) {
    c.send(line(msg));
    const r = await c.reply();
    assert.equal(r.id, id, JSON.stringify(msg));
    assert.equal(r.error?.code, RpcCode.InvalidRequest, JSON.stringify(msg));
    assert.equal(r.error?.data?.code, 'invalid_request');
  }
});

test('an empty batch gets a single -32600 error, not an array', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send('[]\n');
  const r = await c.reply();
  assert.equal(r.id, null);
  assert.equal(r.error?.code, RpcCode.InvalidRequest);
});

test('a mixed batch is answered in one array, in member order, leaving out the notification', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line([req(1, 'echo', ['hi']), { jsonrpc: '2.0', id: 2, method: 1 }, { jsonrpc: '2.0', method: 'note' }, req('x', 'domain', {}), 1]));
  const replies = await c.batch();
  assert.deepEqual(
    replies.map((r) => [r.id, r.error?.code ?? r.result]),
    [
      [1, ['hi']],
      [2, RpcCode.InvalidRequest],
      ['x', DomainCode.unknown_session],
      [null, RpcCode.InvalidRequest],
    ],
  );
  assert.deepEqual(srv.notifications, ['note']);
});

test('batch members are handled concurrently', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line([req(1, 'gated'), req(2, 'gated')]));
  await srv.started.reach(2); // would never happen if the second waited for the first
  srv.gate.releaseAll();
  assert.deepEqual((await c.batch()).map((r) => [r.id, r.result]), [[1, 'done'], [2, 'done']]);
});

test('a batch of only notifications gets no reply, even when a notification handler fails', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line([{ jsonrpc: '2.0', method: 'note' }, { jsonrpc: '2.0', method: 'explode', params: {} }]));
  c.send(line({ jsonrpc: '2.0', method: 'echo', params: [1] })); // a notification for a method that would answer
  c.send(line(req(9, 'echo', ['after'])));
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 9, result: ['after'] });
  assert.deepEqual(srv.notifications, ['note', 'explode', 'echo']);
  assert.equal(srv.internalErrors.length, 1);
  assert.equal(srv.internalErrors[0]?.method, 'explode');
});

test('a domain error goes out with its numeric code, message and data.code', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line(req(1, 'domain')));
  assert.deepEqual((await c.reply()).error, {
    code: DomainCode.unknown_session,
    message: 'no session "s1"',
    data: { code: 'unknown_session', session: 's1' },
  });
  assert.equal(srv.internalErrors.length, 0);
});

test('a plain Error becomes a generic internal error, and the original goes to onInternalError', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line(req(1, 'boom')));
  const r = await c.reply();
  assert.deepEqual(r.error, { code: RpcCode.InternalError, message: 'internal error', data: { code: 'internal_error' } });
  assert.doesNotMatch(JSON.stringify(r), /secret/);
  assert.equal(srv.internalErrors.length, 1);
  assert.equal(srv.internalErrors[0]?.method, 'boom');
  assert.match(String(srv.internalErrors[0]?.err), /exploded/);
});

test('a handler that returns undefined is answered with result null', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line(req(1, 'nothing')));
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 1, result: null });
});

test('a request reusing the id of one still in flight is rejected as invalid', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line(req(7, 'gated')));
  await srv.started.reach(1);
  c.send(line(req(7, 'echo')));
  assert.equal((await c.reply()).error?.code, RpcCode.InvalidRequest);
  srv.gate.releaseAll();
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 7, result: 'done' });
});

test('$/cancelRequest aborts the handler signal and the request is answered with -32800', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line(req('s', 'slow')));
  await srv.started.reach(1);
  c.send(line({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id: 's' } }));
  assert.deepEqual(await c.reply(), {
    jsonrpc: '2.0',
    id: 's',
    error: { code: RpcCode.RequestCancelled, message: 'request cancelled', data: { code: 'request_cancelled' } },
  });
  assert.equal(srv.aborted.n, 1);
  assert.equal(srv.internalErrors.length, 0);
});

test('an over-long line gets message_too_large and closes that connection only', async (t) => {
  const srv = await startServer(t, { maxLineBytes: 1024 });
  const bystander = await rawConnect(t, srv.sock);
  const c = await rawConnect(t, srv.sock);
  c.send('x'.repeat(4096)); // no newline: the cap trips before the line ends
  assert.deepEqual(await c.reply(), {
    jsonrpc: '2.0',
    id: null,
    error: {
      code: DomainCode.message_too_large,
      message: 'message exceeds 1024 bytes',
      data: { code: 'message_too_large', limit_bytes: 1024 },
    },
  });
  await c.closed;
  bystander.send(line(req(1, 'echo', ['still here'])));
  assert.deepEqual(await bystander.reply(), { jsonrpc: '2.0', id: 1, result: ['still here'] });
});

test('a request whose line is too long for the other side rejects with message_too_large', async (t) => {
  const srv = await startServer(t, { maxLineBytes: 1024 });
  const { client, closed } = await peerConnect(t, srv.sock);
  const err = await client.request('echo', ['y'.repeat(2048)]).then(
    () => assert.fail('should reject'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof RpcRemoteError);
  assert.equal(err.code, DomainCode.message_too_large);
  assert.deepEqual(err.data, { code: 'message_too_large', limit_bytes: 1024 });
  await closed;
});

test('past maxInFlight, a request is not started and reading pauses until a handler finishes', async (t) => {
  const srv = await startServer(t, { maxInFlight: 2 });
  const c = await rawConnect(t, srv.sock);
  // One write: the answer to the trailing invalid request proves the third request was read.
  c.send([req(1, 'gated'), req(2, 'gated'), req(3, 'gated'), { jsonrpc: '2.0', id: 'marker', method: 7 }].map(line).join(''));
  await srv.started.reach(2);
  assert.equal((await c.reply()).id, 'marker');
  const peer = srv.peers[0];
  assert.ok(peer);
  assert.equal(srv.started.n, 2);
  assert.equal(srv.sockets[0]?.isPaused(), true);

  srv.gate.releaseOne();
  await srv.started.reach(3);
  assert.equal((await c.reply()).id, 1);
  srv.gate.releaseAll();
  assert.deepEqual([(await c.reply()).id, (await c.reply()).id].sort(), [2, 3]);
  await peer.whenIdle();
  assert.equal(srv.sockets[0]?.isPaused(), false);
});

test('while a handler awaits a reverse request, requests past maxQueued are refused with busy, not queued', async (t) => {
  const srv = await startServer(t, { maxInFlight: 1, maxQueued: 2 });
  const c = await rawConnect(t, srv.sock);
  c.send(line(req(1, 'ask', { q: 'ok?' })));
  const question = (await c.next()) as { id: number; method: string };
  assert.equal(question.method, 'question');
  // The only slot is taken by the handler awaiting our answer, so reading must go on.
  // The trailing invalid request is answered at once: had 4 and 5 been queued, it would come first.
  c.send([req(2, 'echo', [2]), req(3, 'echo', [3]), req(4, 'echo', [4]), req(5, 'echo', [5]), { jsonrpc: '2.0', id: 'marker', method: 7 }].map(line).join(''));
  const refused = [await c.reply(), await c.reply()];
  assert.deepEqual(refused.map((r) => r.id), [4, 5], 'the requests past the bound were queued instead of refused');
  assert.equal((await c.reply()).id, 'marker');
  for (const r of refused) {
    assert.equal(r.error?.code, DomainCode.busy);
    assert.deepEqual(r.error?.data, { code: 'busy', in_flight: 1, queued: 2 });
  }
  assert.equal(srv.started.n, 1, 'no refused request started');

  c.send(line({ jsonrpc: '2.0', id: question.id, result: 'yes' }));
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 1, result: 'yes' });
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 2, result: [2] });
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 3, result: [3] });
  // With nothing of ours outstanding, a full slot pauses reading again instead of refusing.
  c.send([req(6, 'gated'), req(7, 'echo', [7]), req(8, 'echo', [8]), req(9, 'echo', [9])].map(line).join(''));
  await srv.started.reach(2);
  srv.gate.releaseAll();
  assert.deepEqual([(await c.reply()).id, (await c.reply()).id, (await c.reply()).id, (await c.reply()).id], [6, 7, 8, 9]);
});

test('outgoing requests resolve with the result or reject with RpcRemoteError', async (t) => {
  const srv = await startServer(t);
  const { client } = await peerConnect(t, srv.sock);
  assert.deepEqual(await client.request('echo', { n: 1 }), { n: 1 });
  const err = await client.request('domain', {}).then(
    () => assert.fail('should reject'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof RpcRemoteError);
  assert.equal(err.code, DomainCode.unknown_session);
  assert.deepEqual(err.data, { code: 'unknown_session', session: 's1' });
});

/** A value and its JSON in pieces: short runs joined by the builder, two long pieces kept whole. */
function chunkedValue(): { value: unknown; bytes: ByteChunks } {
  const value = { a: 'ä'.repeat(40_000), n: [1, 2], b: 'frame '.repeat(30_000), end: 'Größe' };
  const out = new ChunkBuilder();
  out.push(Buffer.from('{"a":'));
  out.push(Buffer.from(JSON.stringify(value.a)));
  for (const piece of [',"n":', '[1,', '2]', ',"b":']) out.push(Buffer.from(piece));
  out.push(Buffer.from(JSON.stringify(value.b)));
  out.push(Buffer.from(`,"end":${JSON.stringify(value.end)}}`));
  return { value, bytes: out.finish() };
}

test('a result encoded as ByteChunks arrives as the value it encodes, alone, beside others and in a batch', async (t) => {
  const { value, bytes } = chunkedValue();
  assert.equal(bytes.chunks.length, 5, 'the long pieces stay whole, each run of short ones is joined');
  assert.equal(bytes.toString(), JSON.stringify(value));
  const srv = await startServer(t);
  const { client } = await peerConnect(t, srv.sock);
  assert.deepEqual(await client.request('chunked', {}), value);
  // Lines never interleave: each reply is written whole before the next.
  const many = await Promise.all([client.request('chunked', {}), client.request('echo', { k: 1 }), client.request('chunked', {}), client.request('big', {})]);
  assert.deepEqual(many, [value, { k: 1 }, value, 'b'.repeat(64 * 1024)]);
  const c = await rawConnect(t, srv.sock);
  c.send(line([req(1, 'chunked', {}), req(2, 'echo', ['x'])]));
  assert.deepEqual((await c.batch()).map((r) => r.result), [value, ['x']]);
});

test('ByteChunks compare by their bytes, however they are cut', () => {
  const whole = Buffer.from('x'.repeat(40_000));
  const a = new ByteChunks([Buffer.from('{"t":"'), whole, Buffer.from('"}')]);
  const b = new ByteChunks([Buffer.from('{"t":"'), whole, Buffer.from('"}')]);
  const cutElsewhere = new ByteChunks([Buffer.from(`{"t":"${'x'.repeat(39_999)}`), Buffer.from('x"}')]);
  const other = new ByteChunks([Buffer.from('{"t":"'), Buffer.from('y'.repeat(40_000)), Buffer.from('"}')]);
  assert.ok(a.equals(b));
  assert.ok(a.equals(cutElsewhere));
  assert.ok(!a.equals(other));
  assert.ok(!a.equals(new ByteChunks([Buffer.from('{}')])));
  assert.equal(a.length, whole.length + 8);
});

test('params given as EncodedJson go out as their bytes and arrive as the value they encode', async (t) => {
  const srv = await startServer(t);
  const { client } = await peerConnect(t, srv.sock);
  const params = { rows: [{ text: 'Größe — 日本語 😀\nline two' }], n: 1 };
  assert.deepEqual(await client.request('echo', new EncodedJson(Buffer.from(JSON.stringify(params)))), params);
  // The reply matches its request by id, like any other: a second one gets its own answer.
  const both = await Promise.all([client.request('echo', new EncodedJson(Buffer.from('[1,2]'))), client.request('echo', { k: 'v' })]);
  assert.deepEqual(both, [[1, 2], { k: 'v' }]);
  const err = await client.request('domain', new EncodedJson(Buffer.from('{}'))).then(
    () => assert.fail('should reject'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof RpcRemoteError);
  assert.equal(err.code, DomainCode.unknown_session);
});

test('lines of any size and script arrive byte for byte: multi-byte characters, surrogate pairs, long ASCII', async (t) => {
  const srv = await startServer(t);
  const { client } = await peerConnect(t, srv.sock);
  const mixed = { text: 'Größe — 日本語 😀 '.repeat(5000), lone: 'x' };
  assert.deepEqual(await client.request('echo', mixed), mixed);
  const ascii = { text: 'a'.repeat(300_000) };
  assert.deepEqual(await client.request('echo', ascii), ascii);
  assert.deepEqual(await client.request('echo', { e: 'é' }), { e: 'é' });
});

test('aborting an outgoing request rejects it and sends $/cancelRequest to the other side', async (t) => {
  const srv = await startServer(t);
  const { client } = await peerConnect(t, srv.sock);
  const ac = new AbortController();
  const pending = client.request('slow', {}, { signal: ac.signal });
  await srv.started.reach(1);
  ac.abort();
  await assert.rejects(pending, { name: 'AbortError' });
  await srv.aborted.reach(1);
});

test('an outgoing request past its timeout rejects and is cancelled on the other side', async (t) => {
  const srv = await startServer(t);
  const { client } = await peerConnect(t, srv.sock);
  await assert.rejects(client.request('slow', {}, { timeoutMs: 20 }), { name: 'TimeoutError', message: /slow timed out/ });
  await srv.aborted.reach(1);
});

test('dispose rejects pending outgoing requests, is idempotent, and the other side aborts its handlers', async (t) => {
  const srv = await startServer(t);
  const { client, closed } = await peerConnect(t, srv.sock);
  const pending = client.request('slow', {});
  await srv.started.reach(1);
  client.dispose('done here');
  client.dispose('again');
  assert.equal(client.state, 'closing');
  await assert.rejects(pending, /connection closed before a response arrived \(done here\)/);
  await assert.rejects(client.request('echo', {}), /connection is closing/);
  client.notify('note', {}); // dropped, not thrown
  await srv.aborted.reach(1); // the server saw the stream end and aborted the in-flight handler
  await srv.peers[0]?.whenIdle();
  await closed;
  assert.equal(client.state, 'closed');
});

// issue 11, defect 2: the bytes `c3 28 ff` inside a string were decoded with U+FFFD and stored.
// issue 30, defect 10: such a request was answered with id null, so its client never learned
// which of its requests had failed; its own id is now kept.
const BAD = Buffer.from([0xc3, 0x28, 0xff]);
const withBad = (head: string, tail: string) => Buffer.concat([Buffer.from(head), BAD, Buffer.from(tail)]);

test('a request with invalid UTF-8 in a param is refused under its own id (-32602 naming it), reaches no handler, and the connection stays usable', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.socket.write(withBad('{"jsonrpc":"2.0","id":1,"method":"gated","params":{"text":"bad', ' end"}}\n'));
  const r = await c.reply();
  assert.equal(r.id, 1);
  assert.equal(r.error?.code, RpcCode.InvalidParams);
  assert.equal(r.error?.data?.code, 'invalid_params');
  assert.deepEqual((r.error?.data as { issues?: unknown }).issues, [{ path: ['text'], message: 'not valid UTF-8', code: 'invalid_utf8' }]);
  assert.match(r.error.message, /^invalid params for gated: the text "bad\uFFFD\(\uFFFD end" at params\.text is not valid UTF-8$/);
  c.send(line(req(2, 'echo', ['fine €'])));
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 2, result: ['fine €'] });
  assert.equal(srv.started.n, 0);
});

test("invalid UTF-8 in the method name or a key gets the request's id; in the id itself, or in a line that is not JSON, -32700 with id null", async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  const parseError = { jsonrpc: '2.0', id: null, error: { code: RpcCode.ParseError, message: 'parse error', data: { code: 'parse_error' } } };

  c.socket.write(withBad('{"jsonrpc":"2.0","id":"m","method":"gat', 'ed"}\n'));
  const method = await c.reply();
  assert.equal(method.id, 'm');
  assert.equal(method.error?.code, RpcCode.InvalidRequest);
  assert.deepEqual(method.error?.data, { code: 'invalid_request', path: ['method'] });

  c.socket.write(withBad('{"jsonrpc":"2.0","id":7,"method":"gated","params":{"rows":[{"te', 'xt":"x"}]}}\n'));
  const key = await c.reply();
  assert.equal(key.id, 7);
  assert.equal(key.error?.code, RpcCode.InvalidParams);
  assert.deepEqual((key.error?.data as { issues?: unknown }).issues, [{ path: ['rows', '0', 'te\uFFFD(\uFFFDxt'], message: 'not valid UTF-8', code: 'invalid_utf8' }]);
  assert.match(key.error.message, /the key "te\uFFFD\(\uFFFDxt" at params\.rows\.0\.te\uFFFD\(\uFFFDxt is not valid UTF-8$/);

  c.socket.write(withBad('{"jsonrpc":"2.0","id":"ab', '","method":"gated"}\n'));
  assert.deepEqual(await c.reply(), parseError);
  c.socket.write(withBad('{"jsonrpc":"2.0","id":3,"method":"gated"', '\n'));
  assert.deepEqual(await c.reply(), parseError, 'the bad bytes where JSON allows no text');
  assert.equal(srv.started.n, 0);
});

test('in a batch with invalid UTF-8, each message is answered under its own id and the valid ones run', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.socket.write(withBad('[{"jsonrpc":"2.0","id":"ok","method":"echo","params":["fine"]},{"jsonrpc":"2.0","id":"no","method":"echo","params":["b', '"]}]\n'));
  const replies = await c.batch();
  assert.deepEqual(replies[0], { jsonrpc: '2.0', id: 'ok', result: ['fine'] });
  assert.equal(replies[1]?.id, 'no');
  assert.equal(replies[1]?.error?.code, RpcCode.InvalidParams);
  assert.deepEqual((replies[1]?.error?.data as { issues?: unknown }).issues, [{ path: ['0'], message: 'not valid UTF-8', code: 'invalid_utf8' }]);
});

// issue 11, defect 4: a notification was handed to a hook that ignored it, so nothing ran.
test('a notification runs like a request, in a slot, with no reply; a failure is reported once with its method', async (t) => {
  const srv = await startServer(t, { maxInFlight: 1 });
  const c = await rawConnect(t, srv.sock);
  // One write; the answer to the trailing invalid request proves the lines before it were read.
  c.send(line({ jsonrpc: '2.0', method: 'gated' }) + line(req(1, 'echo', ['behind'])) + line({ jsonrpc: '2.0', id: 'marker', method: 7 }));
  assert.equal((await c.reply()).id, 'marker', 'the notification was not answered');
  await srv.started.reach(1);
  const peer = srv.peers[0];
  assert.ok(peer);
  let idle = false;
  void peer.whenIdle().then(() => (idle = true));
  assert.equal(srv.sockets[0]?.isPaused(), true, 'the notification holds the only slot');
  assert.equal(idle, false);
  srv.gate.releaseOne();
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 1, result: ['behind'] });
  await peer.whenIdle();
  assert.equal(idle, true, 'whenIdle waited for the notification');

  c.send(line({ jsonrpc: '2.0', method: 'domain', params: {} }));
  c.send(line({ jsonrpc: '2.0', method: 'boom' }));
  c.send(line({ jsonrpc: '2.0', method: 'no.such.method' }));
  c.send(line(req(2, 'echo', ['after'])));
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 2, result: ['after'] });
  assert.deepEqual(srv.notifications, ['gated', 'domain', 'boom', 'no.such.method']);
  assert.deepEqual(srv.notificationErrors, [
    { code: DomainCode.unknown_session, method: 'domain' },
    { code: RpcCode.MethodNotFound, method: 'no.such.method' },
  ]);
  assert.deepEqual(srv.internalErrors.map((e) => e.method), ['boom']);
});

// issue 11, defect 5: the stream's `end` disposed the peer and aborted what was still running.
test('after the other side ends its writes, requests in flight finish, their replies go out, then it closes', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send([req(1, 'gated'), req(2, 'echo', ['quick']), req(3, 'gated')].map(line).join(''));
  await srv.started.reach(2);
  c.socket.end();
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 2, result: ['quick'] });
  const peer = srv.peers[0];
  assert.ok(peer);
  while (peer.state === 'open') await new Promise((r) => setImmediate(r)); // the end is seen after the data
  assert.equal(peer.state, 'draining');
  srv.gate.releaseAll();
  assert.deepEqual([await c.reply(), await c.reply()], [
    { jsonrpc: '2.0', id: 1, result: 'done' },
    { jsonrpc: '2.0', id: 3, result: 'done' },
  ]);
  await c.closed;
  assert.equal(srv.aborted.n, 0);
});

test('a half-closed connection rejects our own requests at once: their answers can never arrive', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line(req(1, 'ask', { q: 'ok?' })));
  const question = (await c.next()) as { method: string };
  assert.equal(question.method, 'question');
  c.socket.end();
  const r = await c.reply();
  assert.equal(r.id, 1);
  assert.equal(r.error?.code, RpcCode.InternalError, 'the handler saw its reverse request fail');
  await c.closed;
});

// issue 11, defect 7: requests cut off by shutdown got a closed socket and no reply.
test('dispose with answerWith answers every request it cuts off with that error, a finished one with its result', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line(req(1, 'slow')) + line(req(2, 'gated')) + line([req(3, 'slow'), req(4, 'echo', [4])]));
  await srv.started.reach(3);
  const peer = srv.peers[0];
  assert.ok(peer);
  peer.dispose('daemon shutting down', { answerWith: new AlbedoError('shutting_down', 'albedod is shutting down') });
  const cutOff = { code: DomainCode.shutting_down, message: 'albedod is shutting down', data: { code: 'shutting_down' } };
  const first = [await c.next(), await c.next()];
  assert.deepEqual(
    first.sort((a, b) => (Array.isArray(a) ? 1 : 0) - (Array.isArray(b) ? 1 : 0)),
    [
      { jsonrpc: '2.0', id: 1, error: cutOff },
      [
        { jsonrpc: '2.0', id: 3, error: cutOff },
        { jsonrpc: '2.0', id: 4, result: [4] },
      ],
    ],
  );
  srv.gate.releaseAll(); // this one ignores its signal and finishes: its true outcome goes out
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 2, result: 'done' });
  await c.closed;
});

test('dispose without answerWith still drops the late answers and ends at once', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  c.send(line(req(1, 'slow')));
  await srv.started.reach(1);
  srv.peers[0]?.dispose('gone');
  await c.closed;
  await srv.aborted.reach(1);
});

// issue 11, defect 11: `12345678901234567890` came back as 12345678901234567000, `1e400` as null,
// and `1.0000000000000000001` (which JSON.parse makes exactly 1) as 1.
test('a numeric id that would not come back as sent gets -32600 with id null; safe integers are echoed', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  for (const id of ['12345678901234567890', '1e400', '-1e400', '9007199254740992', '1.5', '-0', '1.0000000000000000001', '1.0', '1e0', '10E-1', '7.00']) {
    c.send(`{"jsonrpc":"2.0","id":${id},"method":"echo","params":[1]}\n`);
    const r = await c.reply();
    assert.equal(r.id, null, id);
    assert.equal(r.error?.code, RpcCode.InvalidRequest, id);
    assert.match(r.error?.message ?? '', /safe integer/);
  }
  c.send('{"jsonrpc":"2.0","id":9007199254740991,"method":"echo","params":[1]}\n{"jsonrpc":"2.0","id":-9007199254740991,"method":"echo","params":[2]}\n');
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 9007199254740991, result: [1] });
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: -9007199254740991, result: [2] });
  // In a batch each element's own token counts; a repeated id counts as JSON.parse reads it (the
  // last), and an escaped key is the same member.
  c.send('[{"jsonrpc":"2.0","id":3,"method":"echo","params":[3]},{"jsonrpc":"2.0","id":4.0,"method":"echo","params":[4]}]\n');
  assert.deepEqual(
    new Set((await c.batch()).map((r) => `${String(r.id)} ${r.error?.code ?? 'ok'}`)),
    new Set(['3 ok', `null ${RpcCode.InvalidRequest}`]),
  );
  c.send('{"jsonrpc":"2.0","id":5,"method":"echo","params":[5],"id":5.0}\n{"jsonrpc":"2.0","\\u0069d":6e0,"method":"echo","params":[6]}\n');
  assert.equal((await c.reply()).error?.code, RpcCode.InvalidRequest);
  assert.equal((await c.reply()).error?.code, RpcCode.InvalidRequest);
  c.send('{"jsonrpc":"2.0","id":6,"method":"echo","params":[6],"note":"\\"id\\":6.0"}\n');
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 6, result: [6] });
  assert.equal(srv.started.n, 0);
});

test('a line over the bytes threshold is parsed from its bytes: ids come back as sent, corruptions get -32700', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  const rows = Array.from({ length: 60 }, (_, i) => ({ key: `k${i}`, text: `row ${i} é€𝄞 "q" \\ ${'x'.repeat(1500)}` }));
  const params = JSON.stringify({ session: 's', rows });
  const big = (head: string, tail = '') => `{"jsonrpc":"2.0",${head}"method":"echo","params":${params}${tail}}`;
  assert.ok(Buffer.byteLength(big('')) > JSON_BYTES_THRESHOLD);
  // The request line never reaches JSON.parse whole (the reply, parsed by this test, does).
  const parse = JSON.parse;
  const whole: string[] = [];
  t.mock.method(JSON, 'parse', (text: string) => {
    if (text.includes('"method":"echo","params":{')) whole.push(text);
    return parse(text) as unknown;
  });
  c.send(big('"id":7,') + '\n');
  assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: 7, result: { session: 's', rows } });
  t.mock.restoreAll();
  assert.deepEqual(whole, []);
  // The number id rule reads the token from the line: the last of repeated ids, an escaped key.
  const refused: Array<[string, string]> = [
    ['"id":7.0,', ''],
    ['"id":8,', ',"id":8.0'],
    ['"\\u0069d":1e0,', ''],
  ];
  for (const [head, tail] of refused) {
    c.send(big(head, tail) + '\n');
    const r = await c.reply();
    assert.equal(r.id, null, head + tail);
    assert.equal(r.error?.code, RpcCode.InvalidRequest, head + tail);
  }
  c.send(big('"id":8.0,', ',"id":9') + '\n');
  assert.equal((await c.reply()).id, 9);
  // A batch over the threshold whose second element alone is over it too.
  c.send(`[{"jsonrpc":"2.0","id":10,"method":"echo","params":[10]},${big('"id":11,')},{"jsonrpc":"2.0","id":12.0,"method":"echo","params":[12]}]\n`);
  assert.deepEqual(
    (await c.batch()).map((r) => [r.id, r.error?.code ?? 'ok']),
    [
      [10, 'ok'],
      [11, 'ok'],
      [null, RpcCode.InvalidRequest],
    ],
  );
  const line = big('"id":13,');
  const corruptions = [line.replace('}]}', '},]}'), line.replace('},{', '} {'), line + ' x', line.replace('"session":', '"session"'), line.slice(0, -1)];
  for (const bad of corruptions) {
    c.send(bad + '\n');
    assert.deepEqual(await c.reply(), { jsonrpc: '2.0', id: null, error: { code: RpcCode.ParseError, message: 'parse error', data: { code: 'parse_error' } } });
  }
  c.send(line + '\r\n');
  assert.equal((await c.reply()).id, 13);
});

// issue 11, defect 6: 1,500 unread replies of ~300 KB took RSS from ~155 MB to 690-890 MB.
test('past maxQueuedOutputBytes of unread replies, reading pauses; it resumes once the other side reads', async (t) => {
  const bound = 256 * 1024;
  const srv = await startServer(t, { maxInFlight: 1000, maxQueuedOutputBytes: bound });
  const c = await rawConnect(t, srv.sock);
  c.socket.pause(); // a client that sends and does not read
  const payload = 'p'.repeat(64 * 1024);
  const count = 200; // ~13 MB of replies: far more than the socket buffers and the bound together
  c.send(Array.from({ length: count }, (_, i) => line(req(i, 'echo', [payload]))).join(''));
  for (let i = 0; i < 1000 && srv.sockets[0] === undefined; i++) await new Promise((r) => setImmediate(r));
  const server = srv.sockets[0];
  assert.ok(server);
  const peer = srv.peers[0];
  assert.ok(peer);
  await once(server, 'pause');
  assert.ok(peer.queuedOutputBytes > bound);
  assert.ok(peer.queuedOutputBytes < bound + 2 * (payload.length + 1024), `queued ${peer.queuedOutputBytes} bytes`);
  c.socket.resume();
  const ids: unknown[] = [];
  for (let i = 0; i < count; i++) ids.push((await c.reply()).id);
  assert.deepEqual(ids, Array.from({ length: count }, (_, i) => i));
  assert.equal(server.isPaused(), false);
});

// issue 11, defect 6 (what was left): 500 small requests in one chunk each made a 300 KB reply
// although reading had paused, so unread replies still grew the daemon by ~170 MB.
test('requests already read do not start while the output is over its bound; they run once the other side reads', async (t) => {
  const bound = 256 * 1024;
  const maxInFlight = 4;
  const reply = 64 * 1024 + 100;
  const srv = await startServer(t, { maxInFlight, maxQueuedOutputBytes: bound });
  const c = await rawConnect(t, srv.sock);
  c.socket.pause();
  const count = 300; // one small chunk of requests, ~20 MB of replies
  c.send(Array.from({ length: count }, (_, i) => line(req(i, 'big'))).join(''));
  for (let i = 0; i < 100_000 && (srv.peers[0]?.queuedOutputBytes ?? 0) <= bound; i++) await new Promise((r) => setImmediate(r));
  const peer = srv.peers[0];
  assert.ok(peer && peer.queuedOutputBytes > bound);
  // Ungated, every request already read would have run by now (each turn finishes many).
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
  assert.ok(peer.queuedOutputBytes <= bound + maxInFlight * reply, `queued ${peer.queuedOutputBytes} bytes`);
  assert.ok(srv.started.n < count, `${srv.started.n} of ${count} started`);
  c.socket.resume();
  const ids: unknown[] = [];
  for (let i = 0; i < count; i++) ids.push((await c.reply()).id);
  assert.deepEqual(ids, Array.from({ length: count }, (_, i) => i));
  assert.equal(srv.started.n, count);
});

test('a connection whose output stays over the bound for the grace period is closed and reported', async (t) => {
  const reported: number[] = [];
  const srv = await startServer(t, { maxQueuedOutputBytes: 64 * 1024, slowReaderGraceMs: 50, onSlowReader: (n) => reported.push(n) });
  const c = await rawConnect(t, srv.sock);
  c.socket.pause();
  const payload = 'q'.repeat(64 * 1024);
  c.send(Array.from({ length: 100 }, (_, i) => line(req(i, 'echo', [payload]))).join(''));
  await c.closed.catch(() => undefined); // closed, or our write met the closed socket first
  assert.equal(reported.length, 1);
  assert.ok((reported[0] ?? 0) > 64 * 1024);
});

// issue 11, defect 6: 4 x 32 MiB partial lines on four connections held +122 MB.
test("a chunk that takes all connections' partial lines over the shared budget closes that connection only", async (t) => {
  const budget = new PartialLineBudget(100 * 1024);
  const srv = await startServer(t, { partialLineBudget: budget });
  const a = await rawConnect(t, srv.sock);
  const b = await rawConnect(t, srv.sock);
  const head = '{"jsonrpc":"2.0","id":1,"method":"echo","params":["';
  a.send(head + 'a'.repeat(60 * 1024));
  for (let i = 0; i < 10_000 && budget.heldBytes < 60 * 1024; i++) await new Promise((r) => setImmediate(r));
  assert.ok(budget.heldBytes >= 60 * 1024);
  b.send(head + 'b'.repeat(60 * 1024));
  assert.deepEqual(await b.reply(), {
    jsonrpc: '2.0',
    id: null,
    error: {
      code: DomainCode.message_too_large,
      message: `unfinished messages on all connections together exceed ${100 * 1024} bytes`,
      data: { code: 'message_too_large', limit_bytes: 100 * 1024, scope: 'all_connections' },
    },
  });
  await b.closed;
  a.send('"]}\n');
  assert.equal(((await a.reply()).result as string[])[0]?.length, 60 * 1024);
  assert.equal(budget.heldBytes, 0);
});

/** Polls `ok` once a turn of the event loop, up to `turns` times. */
async function until(ok: () => boolean, turns = 10_000): Promise<void> {
  for (let i = 0; i < turns && !ok(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(ok(), 'never came true');
}

// issue 35, target 1: long work (a compaction) gives way to bytes in transit (time-slice.ts);
// a peer reports its own.
test('a request line part-way in is in transit; once answered, the connection is not, after NEXT_REQUEST_GRACE_MS', async (t) => {
  const srv = await startServer(t);
  const c = await rawConnect(t, srv.sock);
  const whole = line(req(1, 'echo', ['x'.repeat(1000)]));
  c.send(whole.slice(0, 500));
  await until(() => srv.peers[0]?.transit !== undefined);
  const peer = srv.peers[0]!;
  const before = peer.transit!;
  c.send(whole.slice(500));
  assert.equal((await c.reply()).id, 1);
  await new Promise((r) => setTimeout(r, NEXT_REQUEST_GRACE_MS + 2));
  assert.equal(peer.transit, undefined);
  // What moved is counted: the rest of the line in, the reply out.
  c.send(whole.slice(0, 10));
  await until(() => peer.transit !== undefined);
  assert.ok(peer.transit! >= before + 500 + whole.length, `${peer.transit} after ${before}`);
});

test('replies the client has not read yet are in transit, and the count grows as it reads them', async (t) => {
  const srv = await startServer(t, { maxInFlight: 1000, maxQueuedOutputBytes: 256 * 1024 });
  const c = await rawConnect(t, srv.sock);
  c.socket.pause();
  const payload = 'r'.repeat(64 * 1024);
  const count = 40; // ~2.6 MB of replies: far more than the socket buffers and the bound hold
  c.send(Array.from({ length: count }, (_, i) => line(req(i, 'echo', [payload]))).join(''));
  // Over the bound the peer stops reading: from then on nothing moves until the client reads.
  await until(() => srv.sockets[0]?.isPaused() === true, 1_000_000);
  const peer = srv.peers[0]!;
  const stuck = peer.transit;
  assert.ok(stuck !== undefined);
  await new Promise((r) => setTimeout(r, NEXT_REQUEST_GRACE_MS + 2));
  assert.equal(peer.transit, stuck, 'nothing moved while the client did not read');
  c.socket.resume();
  for (let i = 0; i < count; i++) await c.reply();
  await new Promise((r) => setTimeout(r, NEXT_REQUEST_GRACE_MS + 2));
  assert.equal(peer.transit, undefined);
  c.send(line(req('again', 'echo', [1])).slice(0, 5));
  await until(() => peer.transit !== undefined);
  const moved = (peer as { transit: number | undefined }).transit ?? 0;
  assert.ok(moved > stuck + 512 * 1024, `${moved} after ${stuck}`);
});

test('after a reply, the connection counts as busy for the grace, unless it already has a request in flight', async (t) => {
  const srv = await startServer(t, { nextRequestGraceMs: 60_000 });
  const c = await rawConnect(t, srv.sock);
  c.send(line(req(1, 'echo', [1])));
  assert.equal((await c.reply()).id, 1);
  const peer = srv.peers[0]!;
  const answered = peer.transit;
  assert.ok(answered !== undefined, 'just answered: its client may ask again at once');
  c.send(line(req(2, 'gated')));
  await srv.started.reach(1);
  assert.equal(peer.transit, undefined, 'the next request came: nothing more to wait for');
  srv.gate.releaseOne();
  assert.equal((await c.reply()).id, 2);
  assert.ok((peer.transit ?? 0) > answered);
});
