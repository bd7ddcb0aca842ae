// The proxy's listener: HTTP on 127.0.0.1 only, every path behind the home's secret token
// (`/<token>/anthropic/...`, `/<token>/openai/v1/...`, or the `x-albedo-token` header), routed
// to a wire's handler. A port that cannot be had is reported, never fatal: the daemon serves its
// socket all the same.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TransitTally } from '../../protocol/time-slice.ts';
import type { DaemonServices } from '../context.ts';
import { anthropicWire, handleCountTokens } from './anthropic.ts';
import { BodyMemo } from './body-memo.ts';
import { handleConversation, handlePassThrough, sendError, type ProxyCall } from './conversation.ts';
import { chatWire } from './openai-chat.ts';
import { handleResponsesCompact, responsesWire } from './openai-responses.ts';
import { openaiError } from './openai-shared.ts';
import type { ProxyErrorKind } from './wire.ts';

/** What `daemon.status` and `albedo env` say of the proxy. */
export interface ProxyStatus {
  listening: boolean;
  port: number | null;
  /** Why it is not listening (`off`, or the listen error). */
  error: string | null;
  anthropic_base_url: string | null;
  openai_base_url: string | null;
}

/** The home's proxy token, created (0600) at the first start. */
export function proxyToken(file: string): string {
  try {
    const t = fs.readFileSync(file, 'utf8').trim();
    if (t.length >= 32) return t;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const token = randomBytes(24).toString('base64url');
  fs.writeFileSync(file, `${token}\n`, { mode: 0o600 });
  fs.chmodSync(file, 0o600);
  return token;
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A refused request is logged at most once a minute. */
const REFUSAL_LOG_MS = 60_000;

export interface ProxyOptions {
  port: number | 'off';
  token: string;
  anthropicUpstream: string;
  openaiUpstream: string;
  /** Largest request body read, in bytes. */
  maxBodyBytes: number;
}

export class ProxyServer {
  private server: http.Server | undefined;
  private lastRefusalLog = 0;
  private refusedSince = 0;
  private readonly bodies = new BodyMemo();
  /** Request bodies still arriving: long work gives way to them (see giveWayTo). */
  private readonly receiving = new TransitTally();
  status: ProxyStatus = { listening: false, port: null, error: 'not started', anthropic_base_url: null, openai_base_url: null };

  constructor(
    private readonly daemon: DaemonServices,
    private readonly opts: ProxyOptions,
  ) {}

  /** Listens; a taken port or any listen error is logged once and kept in `status`. */
  async start(): Promise<void> {
    const wanted = this.opts.port;
    if (wanted === 'off') {
      this.status = { ...this.status, error: 'off (ALBEDO_PROXY_PORT or proxy.port in extensions.json)' };
      return;
    }
    const server = http.createServer((req, res) => void this.serve(req, res));
    server.keepAliveTimeout = 65_000;
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(wanted, '127.0.0.1', () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      const why = e.code === 'EADDRINUSE' ? `port ${wanted} on 127.0.0.1 is taken by another program (set ALBEDO_PROXY_PORT)` : `listen failed: ${e.message}`;
      this.daemon.log.error({ err, port: wanted }, `the proxy is not listening: ${why}`);
      this.status = { ...this.status, error: why };
      return;
    }
    this.server = server;
    const port = (server.address() as AddressInfo).port;
    const base = `http://127.0.0.1:${port}/${this.opts.token}`;
    this.status = { listening: true, port, error: null, anthropic_base_url: `${base}/anthropic`, openai_base_url: `${base}/openai/v1` };
    this.daemon.log.info({ port }, 'proxy listening on 127.0.0.1');
  }

  /** Request bodies still arriving: undefined when none, otherwise the bytes received so far. */
  transit(): number | undefined {
    return this.receiving.transit();
  }

  async close(): Promise<void> {
    const server = this.server;
    if (server === undefined) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  /** The path after the token, or null when the request does not carry the token. */
  private admitted(req: http.IncomingMessage): string | null {
    const url = req.url ?? '/';
    const header = req.headers['x-albedo-token'];
    if (typeof header === 'string' && sameToken(header, this.opts.token)) return url;
    const m = /^\/([^/?]+)(\/.*)?$/.exec(url);
    if (m !== null && sameToken(m[1]!, this.opts.token)) return m[2] ?? '/';
    return null;
  }

  private refuse(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.refusedSince++;
    const now = Date.now();
    if (now - this.lastRefusalLog >= REFUSAL_LOG_MS) {
      this.daemon.log.warn({ method: 'proxy', refused: this.refusedSince, remote: req.socket.remoteAddress }, 'proxy requests without the token were refused (404)');
      this.lastRefusalLog = now;
      this.refusedSince = 0;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found\n');
  }

  /** The wire family a path belongs to, with the path past its prefix. */
  private familyOf(path: string): { family: Family; rest: string } | null {
    for (const family of FAMILIES) {
      const m = family.prefix.exec(path);
      if (m !== null) return { family, rest: m[1]! };
    }
    return null;
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const admitted = this.admitted(req);
    if (admitted === null) return this.refuse(req, res);
    // Idle-time work waits while the request is read and prepared, until the upstream answers
    // (an answer streams for as long as the model writes; bounded units may run meanwhile).
    const answering = this.daemon.holdIdleWork();
    res.once('close', answering);
    // `albedo run` puts its run id in the base URLs it gives the agent: /run/<id>/<wire>/...
    const inRun = /^\/run\/([A-Za-z0-9_-]{1,64})(\/.*)$/.exec(admitted);
    const run = inRun === null ? null : inRun[1]!;
    const path = inRun === null ? admitted : inRun[2]!;
    const found = this.familyOf(path);
    const errorBody = found?.family.errorBody ?? anthropicWire.errorBody;
    try {
      if (found === null) {
        sendError(res, errorBody, 'not_found', `albedo proxy: no wire at ${path.split('?')[0] ?? ''} (served: /anthropic, /openai/v1)`);
        return;
      }
      const body = await readBody(req, this.opts.maxBodyBytes, this.receiving);
      if (body === null) {
        const msg = errorBody('invalid_request', `albedo proxy: the request body is larger than ${this.opts.maxBodyBytes} bytes`);
        res.writeHead(413, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(msg), connection: 'close' });
        res.end(msg);
        return;
      }
      const { family, rest } = found;
      const call: ProxyCall = { daemon: this.daemon, req, res, path: rest, body, upstream: family.upstream(this.opts), run, answering, bodies: this.bodies };
      const route = req.method === 'POST' ? family.routes[rest.split('?')[0] ?? ''] : undefined;
      await (route === undefined ? handlePassThrough(call, { name: family.name, errorBody }) : route(call));
    } catch (err) {
      this.daemon.log.error({ err, method: 'proxy' }, 'the proxy failed a request');
      sendError(res, errorBody, 'api', 'albedo proxy: internal error (see albedod.log)', 500);
    }
  }
}

/** The wires under one path prefix and one upstream: a POST to a route is handled, any other request passes through. */
interface Family {
  name: string;
  /** Matches the path after the token; its group is the path the upstream gets. */
  prefix: RegExp;
  upstream: (opts: ProxyOptions) => string;
  errorBody: (kind: ProxyErrorKind, message: string) => string;
  routes: Readonly<Record<string, (call: ProxyCall) => Promise<void>>>;
}

const FAMILIES: readonly Family[] = [
  {
    name: 'anthropic',
    prefix: /^\/anthropic(\/.*)$/,
    upstream: (o) => o.anthropicUpstream,
    errorBody: anthropicWire.errorBody,
    routes: {
      '/v1/messages': (call) => handleConversation(call, anthropicWire),
      '/v1/messages/count_tokens': handleCountTokens,
    },
  },
  {
    // The agent's base URL ends in /openai/v1; the upstream's includes its own version path.
    name: 'openai',
    prefix: /^\/openai(?:\/v1)?(\/.*)$/,
    upstream: (o) => o.openaiUpstream,
    errorBody: openaiError,
    routes: {
      '/chat/completions': (call) => handleConversation(call, chatWire),
      '/responses': (call) => handleConversation(call, responsesWire(call.upstream)),
      '/responses/compact': handleResponsesCompact,
    },
  },
];

/** The whole body, or null past `max` bytes; its bytes are counted in `tally` while they come. */
function readBody(req: http.IncomingMessage, max: number, tally: TransitTally): Promise<Buffer | null> {
  const received = tally.begin();
  return new Promise<Buffer | null>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      tally.add(c.length);
      n += c.length;
      if (n > max) over = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(over ? null : Buffer.concat(chunks)));
    req.on('error', reject);
    req.on('close', received);
  }).finally(received);
}
