// JSON-RPC 2.0 messages as the peer (rpc-peer.ts) writes and reads them: the id rule, a line
// encoded once, the error lines the peer answers with itself, values already serialized
// (EncodedJson) spliced into a line as bytes, and the error a response from the other side
// carries.
import { ByteChunks } from './byte-chunks.ts';
import { DomainCode, RpcCode, type WireError } from './errors.ts';
import { findInvalidText } from './invalid-utf8.ts';

/** An error response received from the other side. */
export class RpcRemoteError extends Error {
  readonly code: number;
  readonly data: unknown;
  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = 'RpcRemoteError';
    this.code = code;
    this.data = data;
  }
}

/**
 * A value already serialized, as UTF-8 JSON: the peer splices the bytes into the line as they
 * are. A handler's result (a reply built from pieces kept encoded, daemon/prepare-reply.ts) or
 * the params of our own request (see RpcPeer.request). `T` only records what the JSON holds. A
 * reply's ByteChunks go out as they are, in one write with the envelope around them
 * (protocol/byte-chunks.ts).
 */
export class EncodedJson<T = unknown> {
  declare readonly holds?: T;
  constructor(readonly bytes: Buffer | ByteChunks) {}
}

/** A message queued for the stream: one line's bytes, whole or in chunks. */
export type OutLine = Buffer | ByteChunks;
export type Id = string | number;
export type Msg = Record<string, unknown>;

export const CANCEL_METHOD = '$/cancelRequest';

/** The end of a line around an EncodedJson result or params. */
const RESULT_LINE_END = Buffer.from('}\n');

export const isObject = (v: unknown): v is Msg => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The id rule, one for every number: a number id is usable only when the reply would carry the
 * very token that was sent, that is, a safe integer written as JSON.stringify writes it. The
 * parsed value alone cannot tell: past 2^53 `12345678901234567890` parses as ...7000, `1e400`
 * as Infinity (written as null), and `-0`, `1.0`, `1e0` or `1.0000000000000000001` as integers
 * whose echo would read differently. So the raw token (`rawToken`, from the line) is compared;
 * ids that fail are refused with -32600. Strings are echoed as parsed, which is exact.
 */
export function usableId(v: unknown, rawToken: string | undefined): v is Id {
  return typeof v === 'string' || (typeof v === 'number' && Number.isSafeInteger(v) && rawToken === String(v));
}

/** Whether `usableId` needs raw tokens for the message(s) of a parsed line: only for number ids. */
export function hasNumberId(value: unknown): boolean {
  return Array.isArray(value) ? value.some((m) => isObject(m) && typeof m.id === 'number') : isObject(value) && typeof value.id === 'number';
}

/** Unused bytes an encoded line may keep alive. */
const SLACK_BYTES = 64 * 1024;

/**
 * A message's line as UTF-8 bytes with its "\n", encoded in one pass. A string handed to a
 * socket is measured (Buffer.byteLength) and then encoded again by the stream, at a fraction
 * of this speed for strings with any non-Latin-1 character; a buffer is written as it is.
 * A UTF-16 unit never takes more than 3 UTF-8 bytes, so the buffer is sized without measuring;
 * when that leaves much unused, the bytes are copied out so a queued line holds only its own.
 */
export function encodeLine(line: string): Buffer {
  const buf = Buffer.allocUnsafe(line.length * 3 + 1);
  const n = buf.write(line, 0, 'utf8');
  buf[n] = 0x0a;
  const bytes = buf.subarray(0, n + 1);
  return buf.length - bytes.length > SLACK_BYTES ? Buffer.from(bytes) : bytes;
}

/** A line's bytes in one buffer. */
export function joined(bytes: Buffer | ByteChunks): Buffer {
  return bytes instanceof ByteChunks ? bytes.toBuffer() : bytes;
}

export function errorLine(id: Id | null, error: WireError): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error });
}

export function parseError(): string {
  return errorLine(null, { code: RpcCode.ParseError, message: 'parse error', data: { code: 'parse_error' } });
}

export function invalidRequest(id: Id | null, message: string): string {
  return errorLine(id, { code: RpcCode.InvalidRequest, message, data: { code: 'invalid_request' } });
}

/**
 * The answer to input past a size bound, after which the connection closes: one line over
 * `limit` bytes (`line`), or the unfinished lines of all connections together over it.
 */
export function tooLargeLine(limit: number, scope: 'line' | 'all_connections'): string {
  if (scope === 'line') return errorLine(null, { code: DomainCode.message_too_large, message: `message exceeds ${limit} bytes`, data: { code: 'message_too_large', limit_bytes: limit } });
  return errorLine(null, {
    code: DomainCode.message_too_large,
    message: `unfinished messages on all connections together exceed ${limit} bytes`,
    data: { code: 'message_too_large', limit_bytes: limit, scope: 'all_connections' },
  });
}

/** A request's line; EncodedJson params go in as their bytes (one JSON value, no newline outside strings). */
export function requestLine(id: Id, method: string, params: unknown): string | Buffer {
  if (!(params instanceof EncodedJson)) return JSON.stringify({ jsonrpc: '2.0', id, method, params });
  return Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)},"params":`), joined(params.bytes), RESULT_LINE_END]);
}

/** A reply carrying an EncodedJson result: its JSON for a batch to join, or its whole line when `asLine`. */
export function encodedResult(id: Id, result: EncodedJson, asLine: boolean): string | OutLine {
  const head = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":`;
  const bytes = result.bytes;
  if (!asLine) return `${head}${bytes.toString('utf8')}}`;
  return bytes instanceof ByteChunks ? new ByteChunks([Buffer.from(head), ...bytes.chunks, RESULT_LINE_END]) : Buffer.concat([Buffer.from(head), bytes, RESULT_LINE_END]);
}

/** What the peer does with a message whose text holds bytes that are not UTF-8. */
export type InvalidUtf8Answer = { reply: string } | { failCall: RpcRemoteError } | { report: WireError; method: string };

/**
 * The answer to a message whose text holds bytes that are not UTF-8 (`marker` in the parsed
 * value), or null when this message has none and runs as usual. Bad bytes in the id itself
 * leave it unreadable: -32700 with id null. In params they are invalid params (-32602, with
 * the path as dispatch names zod's), anywhere else an invalid request (-32600). A response
 * that holds them fails the call it answers. A notification is reported, not answered.
 */
export function invalidUtf8Answer(m: Msg, id: Id | null, marker: string): InvalidUtf8Answer | null {
  const bad = findInvalidText(m, marker);
  if (bad === undefined) return null;
  if (bad.path.length === 1 && bad.path[0] === 'id' && !bad.key) return { reply: parseError() };
  const where = bad.path.map(String).join('.');
  const what = `${bad.key ? 'the key' : 'the text'} ${JSON.stringify(bad.text.slice(0, 200))} at ${where} is not valid UTF-8`;
  if (!('method' in m)) return { failCall: new RpcRemoteError(RpcCode.InvalidRequest, `the response holds text that is not valid UTF-8: ${what}`, { code: 'invalid_utf8', path: bad.path }) };
  const method = typeof m.method === 'string' ? m.method.replaceAll(marker, '\uFFFD') : undefined;
  const inParams = bad.path[0] === 'params' && bad.path.length > 1;
  const wire: WireError = inParams
    ? {
      code: RpcCode.InvalidParams,
      message: `invalid params${method === undefined ? '' : ` for ${method}`}: ${what}`,
      data: { code: 'invalid_params', ...(method === undefined ? {} : { method }), issues: [{ path: bad.path.slice(1).map(String), message: 'not valid UTF-8', code: 'invalid_utf8' }] },
    }
    : { code: RpcCode.InvalidRequest, message: what, data: { code: 'invalid_request', path: bad.path.map(String) } };
  if (id !== null) return { reply: errorLine(id, wire) };
  if (!('id' in m)) return { report: wire, method: method ?? '?' };
  return { reply: errorLine(null, wire) };
}

/** One incoming message, checked: what the peer does with it is decided by `kind`. */
export type Checked =
  /** Refused at once: the error line to send back. */
  | { kind: 'refused'; reply: string }
  /** Text with bytes that are not UTF-8 (`invalidUtf8Answer`); `id` when one is readable. */
  | { kind: 'invalid_utf8'; id: Id | null; answer: InvalidUtf8Answer }
  /** An answer to one of our requests (a null id: an error about a line we sent). */
  | { kind: 'response'; id: Id | null; msg: Msg }
  /** `$/cancelRequest` for one of the other side's requests. */
  | { kind: 'cancel'; target: Id | undefined }
  | { kind: 'request'; id: Id; method: string; params: unknown }
  | { kind: 'notification'; method: string; params: unknown };

/**
 * Checks one message of a parsed line against JSON-RPC 2.0 and the id rule. `rawId` is the id's
 * token as written (see usableId); `marker`, for a line that was not valid UTF-8, is what stands
 * in its text for the bad bytes.
 */
export function checkMessage(m: unknown, rawId: string | undefined, marker: string | undefined): Checked {
  const id = isObject(m) && usableId(m.id, rawId) ? m.id : null;
  const refuse = (message: string, to: Id | null = id): Checked => ({ kind: 'refused', reply: invalidRequest(to, message) });
  if (!isObject(m) || m.jsonrpc !== '2.0') return refuse('not a JSON-RPC 2.0 message');
  if (marker !== undefined) {
    const answer = invalidUtf8Answer(m, id, marker);
    if (answer !== null) return { kind: 'invalid_utf8', id, answer };
  }
  if (!('method' in m)) {
    const isResponse = ('result' in m || 'error' in m) && (id !== null || m.id === null);
    return isResponse ? { kind: 'response', id, msg: m } : refuse('neither a request nor a response');
  }
  const { method, params } = m;
  if (typeof method !== 'string') return refuse('method must be a string');
  if ('id' in m && id === null) return refuse('request id must be a string or a safe integer in plain digits (ids are echoed exactly as sent)', null);
  if (params !== undefined && (typeof params !== 'object' || params === null)) return refuse('params must be an object or an array');
  if (id !== null) return { kind: 'request', id, method, params };
  if (method !== CANCEL_METHOD) return { kind: 'notification', method, params };
  const target = isObject(params) ? params.id : undefined;
  // Only ids that passed usableId are in flight, so any string or number may be looked up.
  return { kind: 'cancel', target: typeof target === 'string' || typeof target === 'number' ? target : undefined };
}
