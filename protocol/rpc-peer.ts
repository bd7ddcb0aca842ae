// A symmetric JSON-RPC 2.0 endpoint over one duplex stream: validates and dispatches incoming
// requests and notifications (bounded in flight, cancellable through `$/cancelRequest`), sends
// our own requests and matches their responses. What a method means is left to the onRequest
// handler.
import type { Duplex } from 'node:stream';
import { DomainCode, RpcCode, toWireError, type AlbedoError, type WireError } from './errors.ts';
import { DEFAULT_MAX_LINE_BYTES, LineDecoder } from './framing.ts';
import { JSON_BYTES_THRESHOLD, parseJsonBytesWithTokens, type ParsedJsonBytes } from './json-bytes.ts';
import { topLevelMemberTokens } from './json-tokens.ts';
import { findInvalidText, parseMarked } from './invalid-utf8.ts';
import type { PartialLineBudget } from './line-budget.ts';
import { ByteChunks } from './byte-chunks.ts';

export interface RequestContext {
  /** The request's id; undefined for a notification, whose outcome nobody is told. */
  id: string | number | undefined;
  /** Aborted when the other side sends `$/cancelRequest` for this id, or the peer is disposed. */
  signal: AbortSignal;
  peer: RpcPeer;
}
export type RequestHandler = (method: string, params: unknown, ctx: RequestContext) => Promise<unknown>;

export interface RpcPeerOptions {
  /**
   * Answers incoming requests, and runs incoming notifications (all but `$/cancelRequest`, which
   * the peer handles itself) exactly like requests, only without a reply. Throw AlbedoError /
   * RpcError for deliberate failures.
   */
  onRequest: RequestHandler;
  /**
   * A notification failed on purpose (what a reply would have carried, had there been one).
   * Called once per failure; not for cancellations, and not for internal errors, which go to
   * onInternalError as for requests.
   */
  onNotificationError?: (error: WireError, method: string) => void;
  /** Logging hook for failures that were not deliberate (handler bugs, unencodable results). */
  onInternalError?: (err: unknown, method: string | undefined) => void;
  /** Called once, when the stream has closed. */
  onClose?: () => void;
  /** Cap on one incoming line, in bytes. Default DEFAULT_MAX_LINE_BYTES. */
  maxLineBytes?: number;
  /** Incoming requests handled at once; past it reading pauses and requests wait. Default 64. */
  maxInFlight?: number;
  /**
   * Requests that may wait for a slot while reading cannot pause (one of our requests awaits its
   * answer); past it new requests are refused with `busy`. Default maxInFlight.
   */
  maxQueued?: number;
  /**
   * Bytes of output queued for the other side (ours and the stream's) past which reading pauses,
   * so a side that sends requests but never reads the replies cannot grow our memory. Default
   * DEFAULT_MAX_QUEUED_OUTPUT_BYTES.
   */
  maxQueuedOutputBytes?: number;
  /** How long output may stay over maxQueuedOutputBytes before the connection is closed (ms). Default 30000. */
  slowReaderGraceMs?: number;
  /** Called once when a connection is closed for staying over maxQueuedOutputBytes. */
  onSlowReader?: (queuedBytes: number) => void;
  /**
   * Shared with other peers: a bound on all their partial lines together. A chunk that would take
   * it over gets message_too_large (data.scope "all_connections") and this connection is closed.
   */
  partialLineBudget?: PartialLineBudget;
}

/** Default bound on queued output per peer, in bytes. */
export const DEFAULT_MAX_QUEUED_OUTPUT_BYTES = 16 * 1024 * 1024;

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
 * open: reading and writing. draining: the other side ended its writes (a half-close); what was
 * read still runs and its replies go out, then the peer disposes itself. closing: disposed; the
 * queued output is flushed, then our side ends. closed: the stream has closed.
 */
export type PeerState = 'open' | 'draining' | 'closing' | 'closed';

/**
 * A value already serialized, as UTF-8 JSON: the peer splices the bytes into the line as they
 * are. A handler's result (a reply built from pieces kept encoded, daemon/prepare-reply.ts) or
 * the params of our own request (see `request`). `T` only records what the JSON holds. A reply's
 * ByteChunks go out as they are, in one write with the envelope around them (protocol/byte-chunks.ts).
 */
export class EncodedJson<T = unknown> {
  declare readonly holds?: T;
  constructor(readonly bytes: Buffer | ByteChunks) {}
}

/** A message queued for the stream: one line's bytes, whole or in chunks. */
type OutLine = Buffer | ByteChunks;

/** The end of a line around an EncodedJson result or params. */
const RESULT_LINE_END = Buffer.from('}\n');
type Id = string | number;
type Msg = Record<string, unknown>;

const CANCEL_METHOD = '$/cancelRequest';
/** After dispose, how long the other side gets to close before the stream is destroyed (ms). */
const CLOSE_GRACE_MS = 2000;

/** What a handler did: its result, or what it threw. */
type Outcome = { ok: true; value: unknown } | { ok: false; err: unknown };
/** Bytes of a line's reply made and not yet queued (counted in RpcPeer.heldReplyBytes). */
interface HeldReply {
  bytes: number;
}

interface Outgoing {
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

const isObject = (v: unknown): v is Msg => typeof v === 'object' && v !== null && !Array.isArray(v);
/**
 * The id rule, one for every number: a number id is usable only when the reply would carry the
 * very token that was sent, that is, a safe integer written as JSON.stringify writes it. The
 * parsed value alone cannot tell: past 2^53 `12345678901234567890` parses as ...7000, `1e400`
 * as Infinity (written as null), and `-0`, `1.0`, `1e0` or `1.0000000000000000001` as integers
 * whose echo would read differently. So the raw token (`rawToken`, from the line) is compared;
 * ids that fail are refused with -32600. Strings are echoed as parsed, which is exact.
 */
function usableId(v: unknown, rawToken: string | undefined): v is Id {
  return typeof v === 'string' || (typeof v === 'number' && Number.isSafeInteger(v) && rawToken === String(v));
}

/** Whether `usableId` needs raw tokens for the message(s) of a parsed line: only for number ids. */
function hasNumberId(value: unknown): boolean {
  return Array.isArray(value) ? value.some((m) => isObject(m) && typeof m.id === 'number') : isObject(value) && typeof value.id === 'number';
}

/**
 * A message's line as UTF-8 bytes with its "\n", encoded in one pass. A string handed to a
 * socket is measured (Buffer.byteLength) and then encoded again by the stream, at a fraction
 * of this speed for strings with any non-Latin-1 character; a buffer is written as it is.
 * A UTF-16 unit never takes more than 3 UTF-8 bytes, so the buffer is sized without measuring;
 * when that leaves much unused, the bytes are copied out so a queued line holds only its own.
 */
function encodeLine(line: string): Buffer {
  const buf = Buffer.allocUnsafe(line.length * 3 + 1);
  const n = buf.write(line, 0, 'utf8');
  buf[n] = 0x0a;
  const bytes = buf.subarray(0, n + 1);
  return buf.length - bytes.length > SLACK_BYTES ? Buffer.from(bytes) : bytes;
}

/** Unused bytes an encoded line may keep alive. */
const SLACK_BYTES = 64 * 1024;

function joined(bytes: Buffer | ByteChunks): Buffer {
  return bytes instanceof ByteChunks ? bytes.toBuffer() : bytes;
}

function errorLine(id: Id | null, error: WireError): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error });
}
function parseError(): string {
  return errorLine(null, { code: RpcCode.ParseError, message: 'parse error', data: { code: 'parse_error' } });
}
function invalidRequest(id: Id | null, message: string): string {
  return errorLine(id, { code: RpcCode.InvalidRequest, message, data: { code: 'invalid_request' } });
}

export class RpcPeer {
  private _state: PeerState = 'open';
  private readonly decoder: LineDecoder;
  private readonly maxInFlight: number;
  private readonly maxQueued: number;
  /** Incoming requests not yet answered (running or waiting for a slot), by id. */
  private readonly incoming = new Map<Id, AbortController>();
  /** Incoming notifications running or waiting for a slot (they have no id to key them by). */
  private readonly notifications = new Set<AbortController>();
  /** Lines read whose handling (and reply, if one is due) is not done yet. */
  private unfinishedLines = 0;
  private running = 0;
  private readonly slotWaiters: Array<() => void> = [];
  private readonly idleWaiters: Array<() => void> = [];
  private readonly outgoing = new Map<Id, Outgoing>();
  private nextId = 1;
  /** The other side said our line was too long: the reason to give pending requests at close. */
  private remoteFailure: RpcRemoteError | undefined;
  /**
   * Set by dispose({ answerWith }): requests it cuts off are answered with this error instead of
   * getting no reply, and our side ends only once they have been.
   */
  private cutOff: WireError | undefined;
  private readonly writeQueue: OutLine[] = [];
  /** UTF-8 bytes of the lines in writeQueue. */
  private writeQueueBytes = 0;
  /** UTF-8 bytes of replies made and not yet queued (single messages only; see onLine). */
  private heldReplyBytes = 0;
  private readonly maxQueuedOutputBytes: number;
  /** Runs while output is over maxQueuedOutputBytes; closes the connection when it fires. */
  private slowReaderTimer: NodeJS.Timeout | undefined;
  private waitingDrain = false;
  /** Our share of opts.partialLineBudget, in bytes. */
  private partialShare = 0;
  private closeTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly stream: Duplex,
    private readonly opts: RpcPeerOptions,
  ) {
    this.maxInFlight = Math.max(1, opts.maxInFlight ?? 64);
    this.maxQueued = Math.max(1, opts.maxQueued ?? this.maxInFlight);
    // Never below the stream's own buffer: past that a write returns false, so a 'drain' comes
    // to re-check the bound and resume reading.
    this.maxQueuedOutputBytes = Math.max(stream.writableHighWaterMark, opts.maxQueuedOutputBytes ?? DEFAULT_MAX_QUEUED_OUTPUT_BYTES);
    const limit = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.decoder = new LineDecoder({
      maxLineBytes: limit,
      onLine: (line) => this.onLine(line),
      // A line decoded whole past this would be a fresh large-object string (json-bytes.ts).
      bytesLineAbove: JSON_BYTES_THRESHOLD,
      onBytesLine: (line) => this.onBytesLine(line),
      onInvalidUtf8: (line) => this.onInvalidUtf8Line(line),
      onOverflow: () => {
        if (this._state !== 'open') return;
        this.send(
          errorLine(null, {
            code: DomainCode.message_too_large,
            message: `message exceeds ${limit} bytes`,
            data: { code: 'message_too_large', limit_bytes: limit },
          }),
        );
        this.dispose('message too large');
      },
    });
    stream.on('data', (chunk: Buffer | string) => {
      if (this._state !== 'open') return;
      this.decoder.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      this.accountPartialLine();
    });
    stream.on('end', () => this.onEnd());
    stream.on('error', (err) => this.dispose(`stream error: ${err.message}`));
    stream.on('close', () => {
      this.dispose('stream closed');
      this._state = 'closed';
      this.accountPartialLine();
      clearTimeout(this.closeTimer);
      clearTimeout(this.slowReaderTimer);
      this.opts.onClose?.();
    });
  }

  get state(): PeerState {
    return this._state;
  }

  /** Output not yet taken by the other side: replies made, our queue and the stream's buffer, in bytes. */
  get queuedOutputBytes(): number {
    return this.heldReplyBytes + this.writeQueueBytes + this.stream.writableLength;
  }

  /** Resolves once no incoming request or notification is running or waiting to run. */
  whenIdle(): Promise<void> {
    if (this.unfinishedLines === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Sends a request and resolves with its result. `params` may be an EncodedJson (params the
   * caller serialized already, e.g. ahead of a timed section): its bytes go into the line as they
   * are, so they must be one JSON value (an object or an array) with no newline outside strings.
   */
  request(method: string, params: unknown, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<unknown> {
    if (this._state !== 'open') return Promise.reject(new Error(`cannot send ${method}: connection is ${this._state}`));
    const { signal, timeoutMs } = opts;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = this.nextId++;
    let line: string | Buffer;
    try {
      line =
        params instanceof EncodedJson
          ? Buffer.concat([Buffer.from(`{"jsonrpc":"2.0","id":${id},"method":${JSON.stringify(method)},"params":`), joined(params.bytes), RESULT_LINE_END])
          : JSON.stringify({ jsonrpc: '2.0', id, method, params });
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = () => {
        this.outgoing.delete(id);
        this.updateReading();
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const giveUp = (reason: unknown) => {
        settle();
        this.notify(CANCEL_METHOD, { id });
        reject(reason);
      };
      const onAbort = () => giveUp(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) {
        const message = `${method} timed out after ${timeoutMs} ms`;
        timer = setTimeout(() => giveUp(new DOMException(message, 'TimeoutError')), timeoutMs);
      }
      this.outgoing.set(id, {
        resolve: (v) => (settle(), resolve(v)),
        reject: (e) => (settle(), reject(e)),
      });
      this.updateReading();
      this.send(line);
    });
  }

  notify(method: string, params: unknown): void {
    this.send(JSON.stringify({ jsonrpc: '2.0', method, params }));
  }

  /**
   * Idempotent. Tells the other side to cancel our requests still waiting for an answer and
   * rejects them, aborts every incoming request's signal, flushes what was already queued, then
   * ends the stream. An aborted request's late answer is dropped, unless `answerWith` is given:
   * then every request this cuts off is answered with that error (one that finishes anyway is
   * answered with its result), and the stream ends once they all have been.
   */
  dispose(reason = 'disposed', opts: { answerWith?: AlbedoError } = {}): void {
    if (this._state === 'closing' || this._state === 'closed') return;
    for (const id of this.outgoing.keys()) this.notify(CANCEL_METHOD, { id });
    if (opts.answerWith !== undefined) this.cutOff = toWireError(opts.answerWith).wire;
    this._state = 'closing';
    const abort = new Error(`connection closing: ${reason}`);
    for (const ac of this.incoming.values()) ac.abort(abort);
    for (const ac of this.notifications) ac.abort(abort);
    const failure = this.remoteFailure ?? new Error(`connection closed before a response arrived (${reason})`);
    for (const pending of [...this.outgoing.values()]) pending.reject(failure);
    for (const wake of this.slotWaiters.splice(0)) wake();
    this.stream.resume(); // keep reading (and dropping) so the other side's end is seen
    this.flush();
    this.closeTimer = setTimeout(() => this.stream.destroy(), CLOSE_GRACE_MS);
    this.closeTimer.unref();
  }

  /**
   * The other side ended its writes. With a half-open stream we can still answer: what was read
   * runs to the end and its replies go out, then we close (`printf ... | socat` and `nc -N`
   * clients work this way). Our own requests can no longer be answered and are rejected. A
   * stream that is not half-open has ended its writable side with the readable one: dispose.
   */
  private onEnd(): void {
    if (this._state !== 'open') return;
    if (!this.stream.allowHalfOpen || this.stream.writableEnded) {
      this.dispose('stream ended');
      return;
    }
    this._state = 'draining';
    const failure = new Error('connection closed before a response arrived (the other side ended its writes)');
    for (const pending of [...this.outgoing.values()]) pending.reject(failure);
    if (this.unfinishedLines === 0) this.dispose('stream ended');
  }

  // ---- writing ----

  /**
   * Queues one message: its JSON (no newline), or its whole line already encoded. Dropped once
   * the peer is closing, except the replies to requests cut off by dispose({ answerWith }).
   */
  private send(line: string | OutLine): void {
    if (this._state !== 'open' && this._state !== 'draining' && this.cutOff === undefined) return;
    const chunk = typeof line === 'string' ? encodeLine(line) : line;
    this.writeQueue.push(chunk);
    this.writeQueueBytes += chunk.length;
    this.flush();
  }

  /** One line into the stream; a chunked one corked, so its pieces go in one writev. False when the stream is full. */
  private write(line: OutLine): boolean {
    if (!(line instanceof ByteChunks)) return this.stream.write(line);
    this.stream.cork();
    let room = true;
    for (const c of line.chunks) room = this.stream.write(c);
    this.stream.uncork();
    return room;
  }

  private flush(): void {
    if (this.stream.destroyed) return;
    while (!this.waitingDrain && this.writeQueue.length > 0) {
      const chunk = this.writeQueue.shift()!;
      this.writeQueueBytes -= chunk.length;
      if (!this.write(chunk)) {
        this.waitingDrain = true;
        this.stream.once('drain', () => {
          this.waitingDrain = false;
          this.flush();
        });
      }
    }
    this.watchOutput();
    const repliesDue = this.cutOff !== undefined && this.unfinishedLines > 0;
    if (this._state === 'closing' && !this.waitingDrain && this.writeQueue.length === 0 && !repliesDue && !this.stream.writableEnded) {
      this.stream.end();
    }
  }

  // ---- reading ----

  private onLine(line: string): void {
    if (this._state !== 'open' || line === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      this.send(parseError());
      return;
    }
    // The raw id tokens cost a scan of the line, so only lines with a number id pay it.
    this.onValue(value, hasNumberId(value) ? topLevelMemberTokens(line, 'id') : []);
  }

  /** A line too long to decode whole: parsed from its bytes, its id tokens found by the same scan. */
  private onBytesLine(line: Buffer): void {
    if (this._state !== 'open') return;
    let parsed: ParsedJsonBytes;
    try {
      parsed = parseJsonBytesWithTokens(line, 'id');
    } catch {
      this.send(parseError());
      return;
    }
    this.onValue(parsed.value, parsed.tokens);
  }

  /**
   * A line that is not valid UTF-8. Its text is never used; but when it is JSON apart from those
   * bytes, each message in it is answered under its own id with the member that holds them, so
   * a client with several requests in flight learns which one failed. Otherwise -32700, id null.
   */
  private onInvalidUtf8Line(line: Buffer): void {
    if (this._state !== 'open') return;
    const marked = parseMarked(line);
    if (marked === undefined) {
      this.send(parseError());
      return;
    }
    this.onValue(marked.value, hasNumberId(marked.value) ? topLevelMemberTokens(marked.text, 'id') : [], marked.marker);
  }

  /**
   * One parsed line; `idTokens` as topLevelMemberTokens gives them (needed for number ids only).
   * `marker`, for a line that was not valid UTF-8, is what stands in its text for the bad bytes.
   */
  private onValue(value: unknown, idTokens: Array<string | undefined>, marker?: string): void {
    // The reply to a single message counts against the output bound from the moment it is made
    // (see invoke). A batch's replies are not counted while it waits for all of them: counted,
    // they could keep its own remaining requests from starting.
    const held: HeldReply = { bytes: 0 };
    let handled: Promise<string | OutLine | undefined>;
    if (!Array.isArray(value)) {
      handled = this.onMessage(value, idTokens[0], held, marker);
    } else if (value.length === 0) {
      handled = Promise.resolve(invalidRequest(null, 'empty batch'));
    } else {
      handled = Promise.all(value.map((m, i) => this.onMessage(m, idTokens[i], undefined, marker))).then((replies) => {
        const present = replies.filter((r) => r !== undefined).map((r) => (typeof r === 'string' ? r : joined(r).toString('utf8', 0, r.length - 1)));
        return present.length > 0 ? `[${present.join(',')}]` : undefined;
      });
    }
    this.unfinishedLines++;
    void handled.then((reply) => {
      this.heldReplyBytes -= held.bytes;
      if (reply !== undefined) this.send(reply);
      this.lineFinished();
    });
  }

  /** Keeps our share of the shared partial-line budget equal to what the decoder holds. */
  private accountPartialLine(): void {
    const budget = this.opts.partialLineBudget;
    if (budget === undefined) return;
    if (this._state !== 'open') this.decoder.clear();
    const held = this.decoder.bufferedBytes;
    if (budget.update(this.partialShare, held)) {
      this.partialShare = held;
      return;
    }
    this.decoder.clear();
    budget.update(this.partialShare, 0);
    this.partialShare = 0;
    this.send(
      errorLine(null, {
        code: DomainCode.message_too_large,
        message: `unfinished messages on all connections together exceed ${budget.maxBytes} bytes`,
        data: { code: 'message_too_large', limit_bytes: budget.maxBytes, scope: 'all_connections' },
      }),
    );
    this.dispose('partial-line budget exceeded');
  }

  /** One line is handled and its reply queued: wake idle waiters, finish a drain or a cut-off. */
  private lineFinished(): void {
    this.unfinishedLines--;
    if (this.unfinishedLines > 0) return;
    for (const wake of this.idleWaiters.splice(0)) wake();
    if (this._state === 'draining') this.dispose('stream ended');
    else if (this._state === 'closing') this.flush();
  }

  /**
   * Handles one message; resolves to the encoded reply, or undefined when none is due. Never
   * rejects. `rawId` is the id's token as written in the line (needed when the id is a number);
   * `held`, when given, is where the reply's bytes are counted until it is sent; `marker` is
   * onValue's.
   */
  private async onMessage(m: unknown, rawId: string | undefined, held: HeldReply | undefined, marker?: string): Promise<string | OutLine | undefined> {
    const id = isObject(m) && usableId(m.id, rawId) ? m.id : null;
    if (!isObject(m) || m.jsonrpc !== '2.0') return invalidRequest(id, 'not a JSON-RPC 2.0 message');
    if (marker !== undefined) {
      const refused = this.refuseInvalidUtf8(m, id, marker);
      if (refused !== null) return refused;
    }
    if (!('method' in m)) {
      const isResponse = ('result' in m || 'error' in m) && (id !== null || m.id === null);
      if (!isResponse) return invalidRequest(id, 'neither a request nor a response');
      this.onResponse(id, m);
      return undefined;
    }
    const { method, params } = m;
    if (typeof method !== 'string') return invalidRequest(id, 'method must be a string');
    if ('id' in m && id === null) return invalidRequest(null, 'request id must be a string or a safe integer in plain digits (ids are echoed exactly as sent)');
    if (params !== undefined && (typeof params !== 'object' || params === null)) {
      return invalidRequest(id, 'params must be an object or an array');
    }
    if (id !== null && this.incoming.has(id)) return invalidRequest(id, `request id ${JSON.stringify(id)} is already in flight`);
    if (id === null && method === CANCEL_METHOD) {
      const target = isObject(params) ? params.id : undefined;
      // Only ids that passed usableId are in flight, so any string or number may be looked up.
      if (typeof target === 'string' || typeof target === 'number') this.incoming.get(target)?.abort(new Error('request cancelled'));
      return undefined;
    }
    if (this.queueIsFull()) {
      const busy: WireError = {
        code: DomainCode.busy,
        message: 'too many requests are waiting on this connection while it awaits an answer from you; retry later',
        data: { code: 'busy', in_flight: this.running, queued: this.slotWaiters.length },
      };
      if (id !== null) return errorLine(id, busy);
      this.opts.onNotificationError?.(busy, method);
      return undefined;
    }
    return id === null ? this.runNotification(method, params) : this.runRequest(id, method, params, held);
  }

  /**
   * The answer to a message whose text holds bytes that are not UTF-8 (`marker` in the parsed
   * value), or null when this message has none and runs as usual. Bad bytes in the id itself
   * leave it unreadable: -32700 with id null. In params they are invalid params (-32602, with
   * the path as dispatch names zod's), anywhere else an invalid request (-32600). A response
   * that holds them fails the call it answers. A notification is reported, not answered.
   */
  private refuseInvalidUtf8(m: Msg, id: Id | null, marker: string): string | undefined | null {
    const bad = findInvalidText(m, marker);
    if (bad === undefined) return null;
    if (bad.path.length === 1 && bad.path[0] === 'id' && !bad.key) return parseError();
    const where = bad.path.map(String).join('.');
    const what = `${bad.key ? 'the key' : 'the text'} ${JSON.stringify(bad.text.slice(0, 200))} at ${where} is not valid UTF-8`;
    if (!('method' in m)) {
      if (id !== null) this.outgoing.get(id)?.reject(new RpcRemoteError(RpcCode.InvalidRequest, `the response holds text that is not valid UTF-8: ${what}`, { code: 'invalid_utf8', path: bad.path }));
      return undefined;
    }
    const method = typeof m.method === 'string' ? m.method.replaceAll(marker, '\uFFFD') : undefined;
    const inParams = bad.path[0] === 'params' && bad.path.length > 1;
    const wire: WireError = inParams
      ? {
          code: RpcCode.InvalidParams,
          message: `invalid params${method === undefined ? '' : ` for ${method}`}: ${what}`,
          data: { code: 'invalid_params', ...(method === undefined ? {} : { method }), issues: [{ path: bad.path.slice(1).map(String), message: 'not valid UTF-8', code: 'invalid_utf8' }] },
        }
      : { code: RpcCode.InvalidRequest, message: what, data: { code: 'invalid_request', path: bad.path.map(String) } };
    if (id !== null) return errorLine(id, wire);
    if (!('id' in m)) {
      this.opts.onNotificationError?.(wire, method ?? '?');
      return undefined;
    }
    return errorLine(null, wire);
  }

  private onResponse(id: Id | null, m: Msg): void {
    const error = m.error;
    const remote =
      'error' in m
        ? isObject(error) && typeof error.code === 'number' && typeof error.message === 'string'
          ? new RpcRemoteError(error.code, error.message, error.data)
          : new RpcRemoteError(RpcCode.InternalError, 'malformed error response', error)
        : undefined;
    if (id === null) {
      if (remote?.code === DomainCode.message_too_large) this.remoteFailure = remote;
      return;
    }
    // Unknown ids (e.g. answers to requests we cancelled or timed out) are dropped on purpose.
    const pending = this.outgoing.get(id);
    if (remote) pending?.reject(remote);
    else pending?.resolve(m.result);
  }

  /**
   * A single message's reply comes back as its encoded line (counted in `held` by its length);
   * a batch member's (no `held`) as its JSON, for the batch to join.
   */
  private async runRequest(id: Id, method: string, params: unknown, held: HeldReply | undefined): Promise<string | OutLine> {
    const ac = new AbortController();
    this.incoming.set(id, ac);
    try {
      return await this.invoke(method, params, { id, signal: ac.signal, peer: this }, (outcome) => {
        const asLine = held !== undefined;
        const reply = outcome.ok ? this.encodeResult(id, method, outcome.value, asLine) : this.encodeError(id, method, outcome.err, ac.signal.aborted);
        if (held === undefined) return reply;
        const line = typeof reply === 'string' ? encodeLine(reply) : reply;
        held.bytes += line.length;
        this.heldReplyBytes += line.length;
        return line;
      });
    } finally {
      this.incoming.delete(id);
    }
  }

  /** Runs a notification like a request; its failure is reported, since no reply can carry it. */
  private async runNotification(method: string, params: unknown): Promise<undefined> {
    const ac = new AbortController();
    this.notifications.add(ac);
    try {
      return await this.invoke(method, params, { id: undefined, signal: ac.signal, peer: this }, (outcome) => {
        if (outcome.ok || ac.signal.aborted) return undefined;
        const { wire, internal } = toWireError(outcome.err);
        if (internal) this.opts.onInternalError?.(outcome.err, method);
        else this.opts.onNotificationError?.(wire, method);
        return undefined;
      });
    } finally {
      this.notifications.delete(ac);
    }
  }

  /**
   * Calls the handler inside an in-flight slot; a request aborted while it waited never starts.
   * `finish` turns the outcome into the reply while the slot is still held, so the reply is
   * counted (see runRequest) before the freed slot lets another request start.
   */
  private async invoke<T>(method: string, params: unknown, ctx: RequestContext, finish: (outcome: Outcome) => T): Promise<T> {
    await this.acquireSlot();
    let outcome: Outcome;
    try {
      if (ctx.signal.aborted) throw ctx.signal.reason;
      outcome = { ok: true, value: await this.opts.onRequest(method, params, ctx) };
    } catch (err) {
      outcome = { ok: false, err };
    }
    try {
      return finish(outcome);
    } finally {
      this.releaseSlot();
    }
  }

  /** The reply's JSON; an EncodedJson result is spliced in as bytes, as a whole line when `asLine`. */
  private encodeResult(id: Id, method: string, result: unknown, asLine: boolean): string | OutLine {
    if (result instanceof EncodedJson) {
      const head = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":`;
      const bytes = result.bytes;
      if (!asLine) return `${head}${bytes.toString('utf8')}}`;
      return bytes instanceof ByteChunks ? new ByteChunks([Buffer.from(head), ...bytes.chunks, RESULT_LINE_END]) : Buffer.concat([Buffer.from(head), bytes, RESULT_LINE_END]);
    }
    try {
      return JSON.stringify({ jsonrpc: '2.0', id, result: result === undefined ? null : result });
    } catch (err) {
      return this.encodeError(id, method, err, false);
    }
  }

  private encodeError(id: Id, method: string, err: unknown, aborted: boolean): string {
    if (aborted && this.cutOff !== undefined) return errorLine(id, this.cutOff);
    if (aborted) {
      const data = { code: 'request_cancelled' };
      return errorLine(id, { code: RpcCode.RequestCancelled, message: 'request cancelled', data });
    }
    const { wire, internal } = toWireError(err);
    if (internal) this.opts.onInternalError?.(err, method);
    return errorLine(id, wire);
  }

  // ---- in-flight bound ----

  /**
   * A request may start when a slot is free and the output already queued is within its bound.
   * Pausing the reading is not enough for the second: one chunk can carry hundreds of requests,
   * and each that starts adds a reply. Gated here, the output of a side that never reads stays
   * under maxQueuedOutputBytes plus the replies of the requests already running.
   */
  private canStart(): boolean {
    return this.running < this.maxInFlight && this.queuedOutputBytes <= this.maxQueuedOutputBytes;
  }

  private acquireSlot(): Promise<void> {
    // Waiters keep their order: a new request starts at once only when none waits.
    if ((this.slotWaiters.length === 0 && this.canStart()) || this._state === 'closing' || this._state === 'closed') {
      this.takeSlot();
      return Promise.resolve();
    }
    return new Promise((resolve) => this.slotWaiters.push(() => (this.takeSlot(), resolve())));
  }
  private takeSlot(): void {
    this.running++;
    this.updateReading();
  }

  private releaseSlot(): void {
    this.running--;
    this.startWaiting();
    this.updateReading();
  }

  /** Starts waiting requests while they may start (a slot freed, or output went under its bound). */
  private startWaiting(): void {
    while (this.slotWaiters.length > 0 && this.canStart()) this.slotWaiters.shift()?.();
  }

  /**
   * The bound on requests waiting to start. While none may start reading pauses, so the wait
   * queue holds at most what the last chunk (or batch line) carried. But reading cannot
   * pause while one of our requests awaits its answer: the answer arrives on this stream behind
   * whatever the other side sent first, so pausing could leave a handler waiting on it forever
   * (a client summarize during /compact, while the agent keeps sending requests). Then the
   * queue would grow without bound; instead, past maxQueued waiting requests, new ones are
   * refused at once with `busy` and never start, which the other side may retry.
   */
  private queueIsFull(): boolean {
    return !this.canStart() && this.outgoing.size > 0 && this.slotWaiters.length >= this.maxQueued;
  }

  /**
   * The output bound. Replies pile up when the other side sends requests and never reads the
   * answers (the socket buffer fills, then ours). Past maxQueuedOutputBytes reading pauses and
   * no waiting request starts, so no new replies are made; if the output stays over the bound
   * for the grace period, the other side is not reading at all and the connection is closed
   * (onSlowReader).
   */
  private watchOutput(): void {
    const over = this.queuedOutputBytes > this.maxQueuedOutputBytes;
    if (over && this.slowReaderTimer === undefined && this._state !== 'closed') {
      this.slowReaderTimer = setTimeout(() => {
        this.slowReaderTimer = undefined;
        if (this.queuedOutputBytes <= this.maxQueuedOutputBytes) return;
        this.opts.onSlowReader?.(this.queuedOutputBytes);
        this.stream.destroy();
      }, this.opts.slowReaderGraceMs ?? 30_000);
      this.slowReaderTimer.unref();
    } else if (!over && this.slowReaderTimer !== undefined) {
      clearTimeout(this.slowReaderTimer);
      this.slowReaderTimer = undefined;
    }
    if (!over) this.startWaiting();
    this.updateReading();
  }

  /**
   * Reading pauses while every slot is taken or output is over its bound, except while our own
   * requests await answers: those arrive on this stream, and a handler may be the one waiting
   * for them (then requests read meanwhile wait to start, up to maxQueued, past which they get
   * `busy`).
   */
  private updateReading(): void {
    if (this._state !== 'open') return;
    const hold = (this.running >= this.maxInFlight || this.queuedOutputBytes > this.maxQueuedOutputBytes) && this.outgoing.size === 0;
    if (hold && !this.stream.isPaused()) this.stream.pause();
    else if (!hold && this.stream.isPaused()) this.stream.resume();
  }
}
