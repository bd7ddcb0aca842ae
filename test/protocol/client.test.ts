// AlbedoClient against a stand-in daemon (an RpcPeer with a few canned methods) on a real Unix
// socket: the initialize handshake, typed calls and their errors, close, and the reverse
// `summarize` request. Wire-level edge cases are in rpc-peer.test.ts.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { AlbedoClient, type SummarizeParams } from '../../protocol/client.ts';
import { AlbedoError, DomainCode, RpcCode, rpcError } from '../../protocol/errors.ts';
import { PROTOCOL_VERSION } from '../../protocol/methods.ts';
import { RpcRemoteError } from '../../protocol/rpc-message.ts';
import { RpcPeer, type RequestHandler } from '../../protocol/rpc-peer.ts';

async function startDaemon(t: TestContext, maxInFlight?: number) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-'));
  const sock = path.join(dir, 'daemon.sock');
  const inits: unknown[] = [];
  const peers: RpcPeer[] = [];
  let statusStarted!: () => void;
  const statusCalled = new Promise<void>((resolve) => (statusStarted = resolve));
  const onRequest: RequestHandler = async (method, params, { signal, peer }) => {
    switch (method) {
      case 'initialize':
        inits.push(params);
        return { protocol: PROTOCOL_VERSION, server: { name: 'stand-in', version: '0' } };
      case 'session.open': {
        if (!isObject(params) || params.session !== 'ask') return { session: 's1', created: true };
        const summary = (await peer.request('summarize', job, { signal })) as { text: string };
        return { session: summary.text, created: false };
      }
      case 'session.list':
        return { sessions: 'not a list' };
      case 'session.delete':
        throw new AlbedoError('unknown_session', 'no session "s9"');
      case 'daemon.status': // never answers until cancelled
        statusStarted();
        await once(signal, 'abort');
        throw signal.reason;
      default:
        throw rpcError(RpcCode.MethodNotFound, 'method_not_found', `method not found: ${method}`);
    }
  };
  const server = net.createServer((socket) => void peers.push(new RpcPeer(socket, { onRequest, maxInFlight })));
  server.listen(sock);
  await once(server, 'listening');
  t.after(async () => {
    for (const p of peers) p.dispose();
    await new Promise((resolve) => server.close(resolve));
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { sock, inits, peers, statusCalled };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const job: SummarizeParams = { session: 's1', purpose: 'compact', system: 'be brief', prompt: 'a b c', max_output_tokens: 100 };

async function connect(t: TestContext, sock: string, opts?: Parameters<typeof AlbedoClient.connect>[1]) {
  const client = await AlbedoClient.connect(sock, opts);
  t.after(() => client.close());
  return client;
}

async function remoteError(p: Promise<unknown>): Promise<RpcRemoteError> {
  const err = await p.then(
    () => assert.fail('expected a rejection'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof RpcRemoteError, String(err));
  return err;
}

test('connect sends initialize with the protocol version, client identity and summarize capability', async (t) => {
  const d = await startDaemon(t);
  await connect(t, d.sock);
  await connect(t, d.sock, { client: { name: 'cli', version: '1.2' }, summarize: async () => ({ text: '' }) });
  assert.deepEqual(d.inits, [
    { protocol: PROTOCOL_VERSION, client: { name: 'albedo-client', version: '0' }, capabilities: { summarize: false } },
    { protocol: PROTOCOL_VERSION, client: { name: 'cli', version: '1.2' }, capabilities: { summarize: true } },
  ]);
});

test('connect to a socket nobody listens on rejects', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-'));
  try {
    await assert.rejects(AlbedoClient.connect(path.join(dir, 'missing.sock')), { code: 'ENOENT' });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('call resolves with the result checked against the method table', async (t) => {
  const d = await startDaemon(t);
  const client = await connect(t, d.sock);
  assert.deepEqual(await client.call('session.open', {}), { session: 's1', created: true });
  await assert.rejects(client.call('session.list', {}), { name: 'ZodError' });
});

test('a domain error reaches the caller as RpcRemoteError with data.code', async (t) => {
  const d = await startDaemon(t);
  const client = await connect(t, d.sock);
  const err = await remoteError(client.call('session.delete', { session: 's9' }));
  assert.equal(err.code, DomainCode.unknown_session);
  assert.deepEqual(err.data, { code: 'unknown_session' });
  assert.equal(err.message, 'no session "s9"');
});

test('raw sends what the types would not allow and the peer refuses it', async (t) => {
  const d = await startDaemon(t);
  const client = await connect(t, d.sock);
  assert.equal((await remoteError(client.raw('session.open', 'not params'))).code, RpcCode.InvalidRequest);
  assert.equal((await remoteError(client.raw('no.such', {}))).code, RpcCode.MethodNotFound);
});

test('aborting a call cancels it on the daemon side', async (t) => {
  const d = await startDaemon(t);
  const client = await connect(t, d.sock);
  const ac = new AbortController();
  const pending = client.call('daemon.status', {}, { signal: ac.signal });
  await d.statusCalled;
  ac.abort();
  await assert.rejects(pending, { name: 'AbortError' });
  await d.peers[0]?.whenIdle(); // the handler saw its signal abort and finished
});

test('close rejects calls in flight, is idempotent, and marks the client closed', async (t) => {
  const d = await startDaemon(t);
  const client = await connect(t, d.sock);
  const rejected = assert.rejects(client.call('daemon.status', {}), /connection closed before a response arrived/);
  await d.statusCalled;
  assert.equal(client.closed, false);
  await Promise.all([client.close(), client.close()]);
  await client.close();
  assert.equal(client.closed, true);
  await rejected;
  await assert.rejects(client.call('session.open', {}), /connection is closed/);
});

test("the daemon's reverse summarize request is answered by the client's summarizer", async (t) => {
  const d = await startDaemon(t);
  const seen: SummarizeParams[] = [];
  await connect(t, d.sock, {
    summarize: async (params, signal) => {
      assert.equal(signal.aborted, false);
      seen.push(params);
      return { text: `summary of ${params.prompt}` };
    },
  });
  const daemonSide = d.peers[0];
  assert.ok(daemonSide);
  assert.deepEqual(await daemonSide.request('summarize', job), { text: 'summary of a b c' });
  assert.deepEqual(seen, [job]);
  const bad = await remoteError(daemonSide.request('summarize', { ...job, max_output_tokens: -1 }));
  assert.equal(bad.code, RpcCode.InvalidParams);
  assert.equal(seen.length, 1);
  assert.equal((await remoteError(daemonSide.request('other', {}))).code, RpcCode.MethodNotFound);
});

test('a daemon handler at its in-flight cap still reads the answer to its reverse request', async (t) => {
  const d = await startDaemon(t, 1);
  const client = await connect(t, d.sock, { summarize: async () => ({ text: 'from-client' }) });
  assert.deepEqual(await client.call('session.open', { session: 'ask' }), { session: 'from-client', created: false });
});

test('a client without a summarizer answers summarize with -32601', async (t) => {
  const d = await startDaemon(t);
  await connect(t, d.sock);
  const err = await remoteError(d.peers[0]!.request('summarize', job));
  assert.equal(err.code, RpcCode.MethodNotFound);
  assert.deepEqual(err.data, { code: 'method_not_found' });
});

test('a failing summarizer is reported as summarizer_failed', async (t) => {
  const d = await startDaemon(t);
  await connect(t, d.sock, {
    summarize: async () => {
      throw new Error('model overloaded');
    },
  });
  const err = await remoteError(d.peers[0]!.request('summarize', job));
  assert.equal(err.code, DomainCode.summarizer_failed);
  assert.equal(err.message, 'model overloaded');
});

test('cancelling the reverse summarize aborts the signal handed to the summarizer', async (t) => {
  const d = await startDaemon(t);
  let running!: () => void;
  const started = new Promise<void>((resolve) => (running = resolve));
  let sawAbort!: () => void;
  const aborted = new Promise<void>((resolve) => (sawAbort = resolve));
  await connect(t, d.sock, {
    summarize: async (_params, signal) => {
      running();
      await once(signal, 'abort');
      sawAbort();
      throw signal.reason;
    },
  });
  const ac = new AbortController();
  const pending = d.peers[0]!.request('summarize', job, { signal: ac.signal });
  await started;
  ac.abort();
  await assert.rejects(pending, { name: 'AbortError' });
  await aborted;
});
