// Sending a request on to the provider with Node's own HTTP stack, and the header and
// encoding rules on both legs: the agent's headers go up as they came (credentials included,
// never logged), less the hop-by-hop ones; the answer comes back as the upstream sent it.
import http from 'node:http';
import https from 'node:https';
import zlib from 'node:zlib';
import type { Transform } from 'node:stream';
import type { ByteChunks } from '../../protocol/byte-chunks.ts';

/** Headers that belong to one connection, never forwarded (RFC 9110 7.6.1), plus the proxy's own. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'accept-encoding',
  'x-albedo-token',
]);

/** What the tee can decode; the agent's `zstd` is not among them on Node 20. */
const DECODABLE = ['gzip', 'br'] as const;

/**
 * The agent's headers for the upstream. `accept-encoding` asks only for what the tee can
 * decode and the agent also accepts; the body's length is set for the body actually sent.
 */
export function upstreamHeaders(client: http.IncomingHttpHeaders, bodyBytes: number, bodyRewritten: boolean): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(client)) {
    if (v === undefined || HOP_BY_HOP.has(k)) continue;
    // A body the proxy rewrote is sent as plain JSON.
    if (bodyRewritten && k === 'content-encoding') continue;
    out[k] = v;
  }
  const accepts = String(client['accept-encoding'] ?? '')
    .toLowerCase()
    .split(',')
    .map((s) => s.trim().split(';')[0]);
  const enc = DECODABLE.filter((e) => accepts.includes(e));
  out['accept-encoding'] = enc.length === 0 ? 'identity' : enc.join(', ');
  out['content-length'] = String(bodyBytes);
  return out;
}

/** The upstream's response headers for the agent, less the hop-by-hop ones. */
export function clientHeaders(upstream: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(upstream)) {
    if (v === undefined || (HOP_BY_HOP.has(k) && k !== 'content-length')) continue;
    out[k] = v;
  }
  return out;
}

/** A streaming decoder for a response body in `encoding`, null for identity; undefined when it cannot be decoded. */
export function decoderFor(encoding: string | undefined): Transform | null | undefined {
  const e = (encoding ?? '').trim().toLowerCase();
  if (e === '' || e === 'identity') return null;
  if (e === 'gzip' || e === 'x-gzip') return zlib.createGunzip();
  if (e === 'br') return zlib.createBrotliDecompress();
  if (e === 'deflate') return zlib.createInflate();
  return undefined;
}

/** A whole request body decoded, or undefined for an encoding the proxy cannot read (forwarded as it is). */
export function decodeBody(body: Buffer, encoding: string | undefined): Buffer | undefined {
  const e = (encoding ?? '').trim().toLowerCase();
  try {
    if (e === '' || e === 'identity') return body;
    if (e === 'gzip' || e === 'x-gzip') return zlib.gunzipSync(body);
    if (e === 'br') return zlib.brotliDecompressSync(body);
    if (e === 'deflate') return zlib.inflateSync(body);
  } catch {
    return undefined;
  }
  return undefined;
}

/** `base` (the upstream's root, perhaps with a path of its own) joined with the agent's path and query. */
export function upstreamUrl(base: string, pathAndQuery: string): URL {
  const b = new URL(base);
  const prefix = b.pathname.replace(/\/+$/, '');
  const [p, q] = pathAndQuery.split('?', 2) as [string, string | undefined];
  b.pathname = `${prefix}${p.startsWith('/') ? p : `/${p}`}`;
  b.search = q === undefined ? '' : `?${q}`;
  return b;
}

/** A request body as it goes upstream: the agent's bytes, or a rewritten body in pieces (protocol/kept-json.ts). */
export type OutgoingBody = Buffer | ByteChunks;

/** Sends one request upstream; resolves with the response as soon as its headers arrive. */
export function sendUpstream(url: URL, method: string, headers: http.OutgoingHttpHeaders, body: OutgoingBody, signal: AbortSignal): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const lib = url.protocol === 'https:' ? https : http;
    const req = lib.request(url, { method, headers, signal }, resolve);
    req.on('error', reject);
    if (Buffer.isBuffer(body)) {
      req.end(body);
      return;
    }
    // The pieces go out in one write of the socket, not joined into one buffer first.
    req.cork();
    for (const c of body.chunks) req.write(c);
    req.end();
  });
}
