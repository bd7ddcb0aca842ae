// A symmetric JSON-RPC 2.0 endpoint over one duplex stream: validates and dispatches incoming
// requests (bounded in flight, cancellable through `$/cancelRequest`), sends our own requests and
// matches their responses. What a method means is left to the onRequest handler.
import type { Duplex } from 'node:stream';
import { DomainCode, RpcCode, toWireError, type WireError } from './errors.ts';
import { DEFAULT_MAX_LINE_BYTES, LineDecoder } from './framing.ts';

export interface RequestContext {
  id: string | number;
  /** Aborted when the other side sends `$/cancelRequest` for this id, or the peer is disposed. */
  signal: AbortSignal;
  peer: RpcPeer;
}
export type RequestHandler = (method: string, params: unknown, ctx: RequestContext) => Promise<unknown>;

export interface RpcPeerOptions {
  /** Answers incoming requests; throw AlbedoError / RpcError for deliberate failures. */
  onRequest: RequestHandler;
  /** Incoming notifications other than `$/cancelRequest`, which the peer handles itself. */
  onNotification?: (method: string, params: unknown) => void;
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
}

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

export type PeerState = 'open' | 'closing' | 'closed';
type Id = string | number;
type Msg = Record<string, unknown>;

const CANCEL_METHOD = '$/cancelRequest';
/** After dispose, how long the other side gets to close before the stream is destroyed (ms). */
const CLOSE_GRACE_MS = 2000;

interface Outgoing {
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

const isObject = (v: unknown): v is Msg => typeof v === 'object' && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is Id => typeof v === 'string' || typeof v === 'number';

function errorLine(id: Id | null, error: WireError): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error });
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
  private running = 0;
  private readonly slotWaiters: Array<() => void> = [];
  private readonly idleWaiters: Array<() => void> = [];
  private readonly outgoing = new Map<Id, Outgoing>();
  private nextId = 1;
  /** The other side said our line was too long: the reason to give pending requests at close. */
  private remoteFailure: RpcRemoteError | undefined;
  private readonly writeQueue: string[] = [];
  private waitingDrain = false;
  private closeTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly stream: Duplex,
    private readonly opts: RpcPeerOptions,
  ) {
    this.maxInFlight = Math.max(1, opts.maxInFlight ?? 64);
    this.maxQueued = Math.max(1, opts.maxQueued ?? this.maxInFlight);
    const limit = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.decoder = new LineDecoder({
      maxLineBytes: limit,
      onLine: (line) => this.onLine(line),
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
      if (this._state === 'open') this.decoder.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    });
    stream.on('end', () => this.dispose('stream ended'));
    stream.on('error', (err) => this.dispose(`stream error: ${err.message}`));
    stream.on('close', () => {
      this.dispose('stream closed');
      this._state = 'closed';
      clearTimeout(this.closeTimer);
      this.opts.onClose?.();
    });
  }

  get state(): PeerState {
    return this._state;
  }

  /** Resolves once no incoming request is running or waiting to run. */
  whenIdle(): Promise<void> {
    if (this.incoming.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  request(method: string, params: unknown, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<unknown> {
    if (this._state !== 'open') return Promise.reject(new Error(`cannot send ${method}: connection is ${this._state}`));
    const { signal, timeoutMs } = opts;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = this.nextId++;
    let line: string;
    try {
      line = JSON.stringify({ jsonrpc: '2.0', id, method, params });
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
   * Idempotent. Aborts every incoming request's signal (their late answers are dropped), rejects
   * every outgoing request, flushes what was already queued, then ends the stream.
   */
  dispose(reason = 'disposed'): void {
    if (this._state !== 'open') return;
    this._state = 'closing';
    for (const ac of this.incoming.values()) ac.abort(new Error(`connection closing: ${reason}`));
    const failure = this.remoteFailure ?? new Error(`connection closed before a response arrived (${reason})`);
    for (const pending of [...this.outgoing.values()]) pending.reject(failure);
    for (const wake of this.slotWaiters.splice(0)) wake();
    this.stream.resume(); // keep reading (and dropping) so the other side's end is seen
    this.flush();
    this.closeTimer = setTimeout(() => this.stream.destroy(), CLOSE_GRACE_MS);
    this.closeTimer.unref();
  }

  // ---- writing ----

  /** Queues one encoded message (no newline); dropped once the peer is no longer open. */
  private send(line: string): void {
    if (this._state !== 'open') return;
    this.writeQueue.push(line + '\n');
    this.flush();
  }

  private flush(): void {
    if (this.stream.destroyed) return;
    while (!this.waitingDrain && this.writeQueue.length > 0) {
      const line = this.writeQueue.shift() as string;
      if (!this.stream.write(line)) {
        this.waitingDrain = true;
        this.stream.once('drain', () => {
          this.waitingDrain = false;
          this.flush();
        });
      }
    }
    if (this._state === 'closing' && !this.waitingDrain && this.writeQueue.length === 0) this.stream.end();
  }

  // ---- reading ----

  private onLine(line: string): void {
    if (this._state !== 'open' || line === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      this.send(errorLine(null, { code: RpcCode.ParseError, message: 'parse error', data: { code: 'parse_error' } }));
      return;
    }
    if (!Array.isArray(value)) {
      void this.onMessage(value).then((reply) => reply !== undefined && this.send(reply));
    } else if (value.length === 0) {
      this.send(invalidRequest(null, 'empty batch'));
    } else {
      void Promise.all(value.map((m) => this.onMessage(m))).then((replies) => {
        const present = replies.filter((r): r is string => r !== undefined);
        if (present.length > 0) this.send(`[${present.join(',')}]`);
      });
    }
  }

  /** Handles one message; resolves to the encoded reply, or undefined when none is due. Never rejects. */
  private async onMessage(m: unknown): Promise<string | undefined> {
    const id = isObject(m) && isId(m.id) ? m.id : null;
    if (!isObject(m) || m.jsonrpc !== '2.0') return invalidRequest(id, 'not a JSON-RPC 2.0 message');
    if (!('method' in m)) {
      const isResponse = ('result' in m || 'error' in m) && (id !== null || m.id === null);
      if (!isResponse) return invalidRequest(id, 'neither a request nor a response');
      this.onResponse(id, m);
      return undefined;
    }
    const { method, params } = m;
    if (typeof method !== 'string') return invalidRequest(id, 'method must be a string');
    if ('id' in m && id === null) return invalidRequest(null, 'request id must be a string or a number');
    if (params !== undefined && (typeof params !== 'object' || params === null)) {
      return invalidRequest(id, 'params must be an object or an array');
    }
    if (id === null) {
      this.onNotification(method, params);
      return undefined;
    }
    if (this.incoming.has(id)) return invalidRequest(id, `request id ${JSON.stringify(id)} is already in flight`);
    if (this.queueIsFull()) {
      return errorLine(id, {
        code: DomainCode.busy,
        message: 'too many requests are waiting on this connection while it awaits an answer from you; retry later',
        data: { code: 'busy', in_flight: this.running, queued: this.slotWaiters.length },
      });
    }
    return this.runRequest(id, method, params);
  }

  private onNotification(method: string, params: unknown): void {
    if (method === CANCEL_METHOD) {
      const id = isObject(params) ? params.id : undefined;
      if (isId(id)) this.incoming.get(id)?.abort(new Error('request cancelled'));
      return;
    }
    try {
      this.opts.onNotification?.(method, params);
    } catch (err) {
      this.opts.onInternalError?.(err, method);
    }
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

  private async runRequest(id: Id, method: string, params: unknown): Promise<string> {
    const ac = new AbortController();
    this.incoming.set(id, ac);
    try {
      await this.acquireSlot();
      try {
        if (ac.signal.aborted) throw ac.signal.reason;
        const result = await this.opts.onRequest(method, params, { id, signal: ac.signal, peer: this });
        return this.encodeResult(id, method, result);
      } catch (err) {
        return this.encodeError(id, method, err, ac.signal.aborted);
      } finally {
        this.releaseSlot();
      }
    } finally {
      this.incoming.delete(id);
      if (this.incoming.size === 0) for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  private encodeResult(id: Id, method: string, result: unknown): string {
    try {
      return JSON.stringify({ jsonrpc: '2.0', id, result: result === undefined ? null : result });
    } catch (err) {
      return this.encodeError(id, method, err, false);
    }
  }

  private encodeError(id: Id, method: string, err: unknown, cancelled: boolean): string {
    if (cancelled) {
      const data = { code: 'request_cancelled' };
      return errorLine(id, { code: RpcCode.RequestCancelled, message: 'request cancelled', data });
    }
    const { wire, internal } = toWireError(err);
    if (internal) this.opts.onInternalError?.(err, method);
    return errorLine(id, wire);
  }

  // ---- in-flight bound ----

  private acquireSlot(): Promise<void> {
    if (this.running < this.maxInFlight || this._state !== 'open') {
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
    this.slotWaiters.shift()?.();
    this.updateReading();
  }

  /**
   * The bound on requests waiting for a slot. While every slot is taken reading pauses, so the
   * wait queue holds at most what the last chunk (or batch line) carried. But reading cannot
   * pause while one of our requests awaits its answer: the answer arrives on this stream behind
   * whatever the other side sent first, so pausing could leave a handler waiting on it forever
   * (a client summarize during /compact, while the agent keeps sending requests). Then the
   * queue would grow without bound; instead, past maxQueued waiting requests, new ones are
   * refused at once with `busy` and never start, which the other side may retry.
   */
  private queueIsFull(): boolean {
    return this.running >= this.maxInFlight && this.outgoing.size > 0 && this.slotWaiters.length >= this.maxQueued;
  }

  /**
   * Reading pauses while every slot is taken, except while our own requests await answers:
   * those arrive on this stream, and a handler may be the one waiting for them.
   */
  private updateReading(): void {
    if (this._state !== 'open') return;
    const hold = this.running >= this.maxInFlight && this.outgoing.size === 0;
    if (hold && !this.stream.isPaused()) this.stream.pause();
    else if (!hold && this.stream.isPaused()) this.stream.resume();
  }
}
