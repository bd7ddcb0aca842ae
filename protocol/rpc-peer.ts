// A symmetric JSON-RPC 2.0 endpoint over one duplex stream: validates and dispatches incoming
// requests and notifications (bounded in flight, cancellable through `$/cancelRequest`), sends
// our own requests and matches their responses. What a method means is left to the onRequest
// handler. Split as vscode-jsonrpc splits its connection: the messages, the id rule and the
// check of each incoming message are rpc-message.ts, the input (lines, parsing, the shared bound
// on unfinished lines) rpc-input.ts, the output and its slow-reader bound rpc-output.ts, the
// in-flight slots rpc-slots.ts, the other side's calls while they run rpc-incoming.ts, our own
// requests rpc-outgoing.ts; this file is the peer's states, dispatch and replies.
import type { Duplex } from 'node:stream';
import { DomainCode, RpcCode, toWireError, type AlbedoError, type WireError } from './errors.ts';
import type { PartialLineBudget } from './line-budget.ts';
import { checkMessage, EncodedJson, encodedResult, encodeLine, errorLine, invalidRequest, joined, parseError, tooLargeLine, type Id, type InvalidUtf8Answer, type OutLine } from './rpc-message.ts';
import { IncomingCalls } from './rpc-incoming.ts';
import { InputReader } from './rpc-input.ts';
import { OutgoingRequests } from './rpc-outgoing.ts';
import { OutputQueue } from './rpc-output.ts';
import { RequestSlots } from './rpc-slots.ts';

export interface RequestContext {
  /** The request's id; undefined for a notification, whose outcome nobody is told. */
  id: string | number | undefined;
  /** Aborted when the other side sends `$/cancelRequest` for this id, or the peer is disposed. */
  signal: AbortSignal;
  peer: RpcPeer;
}
/**
 * How long after a message went out its connection still counts as busy (`transit`) while
 * nothing of it is in flight: a client just answered often asks again at once, an append's
 * answer followed by its prepare.
 */
export const NEXT_REQUEST_GRACE_MS = 3;

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
   * DEFAULT_MAX_QUEUED_OUTPUT_BYTES (rpc-output.ts).
   */
  maxQueuedOutputBytes?: number;
  /** How long output may stay over maxQueuedOutputBytes before the connection is closed (ms). Default 30000. */
  slowReaderGraceMs?: number;
  /** How long after a message went out the connection counts as busy (`transit`), in ms. Default NEXT_REQUEST_GRACE_MS. */
  nextRequestGraceMs?: number;
  /** Called once when a connection is closed for staying over maxQueuedOutputBytes. */
  onSlowReader?: (queuedBytes: number) => void;
  /**
   * Shared with other peers: a bound on all their partial lines together. A chunk that would take
   * it over gets message_too_large (data.scope "all_connections") and this connection is closed.
   */
  partialLineBudget?: PartialLineBudget;
}

/**
 * open: reading and writing. draining: the other side ended its writes (a half-close); what was
 * read still runs and its replies go out, then the peer disposes itself. closing: disposed; the
 * queued output is flushed, then our side ends. closed: the stream has closed.
 */
export type PeerState = 'open' | 'draining' | 'closing' | 'closed';

/** After dispose, how long the other side gets to close before the stream is destroyed (ms). */
const CLOSE_GRACE_MS = 2000;

/** Bytes of a line's reply made and not yet queued (held in the output's bound meanwhile). */
interface HeldReply {
  bytes: number;
}

export class RpcPeer {
  private _state: PeerState = 'open';
  private readonly input: InputReader;
  private readonly output: OutputQueue;
  private readonly slots: RequestSlots;
  /** The other side's requests and notifications, running or waiting for a slot. */
  private readonly calls: IncomingCalls;
  /** Lines read whose handling (and reply, if one is due) is not done yet. */
  private unfinishedLines = 0;
  private readonly idleWaiters: Array<() => void> = [];
  /** Our own requests awaiting answers. */
  private readonly outgoing: OutgoingRequests;
  /**
   * Set by dispose({ answerWith }): requests it cuts off are answered with this error instead of
   * getting no reply, and our side ends only once they have been.
   */
  private cutOff: WireError | undefined;
  private closeTimer: NodeJS.Timeout | undefined;
  /** When output last went out or was still going (performance.now()); see `transit`. */
  private sentAt = -Infinity;

  constructor(
    private readonly stream: Duplex,
    private readonly opts: RpcPeerOptions,
  ) {
    const maxInFlight = Math.max(1, opts.maxInFlight ?? 64);
    this.outgoing = new OutgoingRequests({ send: (line) => this.send(line), notify: (method, params) => this.notify(method, params), changed: () => this.updateReading() });
    this.output = new OutputQueue(stream, {
      maxBytes: opts.maxQueuedOutputBytes,
      slowReaderGraceMs: opts.slowReaderGraceMs,
      onSlowReader: opts.onSlowReader,
      afterFlush: () => this.afterFlush(),
    });
    this.slots = new RequestSlots({ maxInFlight, maxQueued: Math.max(1, opts.maxQueued ?? maxInFlight), outputOver: () => this.output.over, onChange: () => this.updateReading() });
    this.calls = new IncomingCalls({
      slots: this.slots,
      handle: (method, params, id, signal) => opts.onRequest(method, params, { id, signal, peer: this }),
      closing: () => this._state === 'closing' || this._state === 'closed',
    });
    this.input = new InputReader({
      maxLineBytes: opts.maxLineBytes,
      partialLineBudget: opts.partialLineBudget,
      reading: () => this._state === 'open',
      onValue: (value, idTokens, marker) => this.onValue(value, idTokens, marker),
      onParseError: () => this.send(parseError()),
      onTooLong: (limit) => {
        this.send(tooLargeLine(limit, 'line'));
        this.dispose('message too large');
      },
      onOverBudget: (maxBytes) => {
        this.send(tooLargeLine(maxBytes, 'all_connections'));
        this.dispose('partial-line budget exceeded');
      },
    });
    stream.on('data', (chunk: Buffer | string) => {
      if (this._state !== 'open') return;
      this.input.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    });
    stream.on('end', () => this.onEnd());
    stream.on('error', (err) => this.dispose(`stream error: ${err.message}`));
    stream.on('close', () => {
      this.dispose('stream closed');
      this._state = 'closed';
      this.input.account();
      clearTimeout(this.closeTimer);
      this.output.stop();
      this.opts.onClose?.();
    });
  }

  get state(): PeerState {
    return this._state;
  }

  /** Output not yet taken by the other side: replies made, our queue and the stream's buffer, in bytes. */
  get queuedOutputBytes(): number {
    return this.output.queuedBytes;
  }

  /**
   * Bytes still moving on this connection (a request line part-way in, a reply part-way out, or
   * a reply just out to a client with nothing else in flight, which may ask again at once):
   * undefined when none, otherwise how many bytes have moved in both directions so far.
   */
  get transit(): number | undefined {
    const unwritten = this.output.unwritten;
    const now = performance.now();
    if (unwritten > 0 || this.input.partialBytes > 0) this.sentAt = now;
    else if (this.unfinishedLines > 0 || now - this.sentAt >= (this.opts.nextRequestGraceMs ?? NEXT_REQUEST_GRACE_MS)) return undefined;
    return this.input.received + this.output.handedOver - unwritten;
  }

  /** Resolves once no incoming request or notification is running or waiting to run. */
  whenIdle(): Promise<void> {
    if (this.unfinishedLines === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Sends a request and resolves with its result (rpc-outgoing.ts). */
  request(method: string, params: unknown, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<unknown> {
    if (this._state !== 'open') return Promise.reject(new Error(`cannot send ${method}: connection is ${this._state}`));
    return this.outgoing.send(method, params, opts);
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
    this.outgoing.cancelAll();
    if (opts.answerWith !== undefined) this.cutOff = toWireError(opts.answerWith).wire;
    this._state = 'closing';
    this.calls.abortAll(new Error(`connection closing: ${reason}`));
    this.outgoing.rejectAll(new Error(`connection closed before a response arrived (${reason})`), { preferRemote: true });
    this.slots.startAll();
    this.stream.resume(); // keep reading (and dropping) so the other side's end is seen
    this.output.flush();
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
    this.outgoing.rejectAll(new Error('connection closed before a response arrived (the other side ended its writes)'), { preferRemote: false });
    if (this.unfinishedLines === 0) this.dispose('stream ended');
  }

  // ---- writing ----

  /**
   * Queues one message: its JSON (no newline), or its whole line already encoded. Dropped once
   * the peer is closing, except the replies to requests cut off by dispose({ answerWith }).
   */
  private send(line: string | OutLine): void {
    if (this._state !== 'open' && this._state !== 'draining' && this.cutOff === undefined) return;
    this.output.push(typeof line === 'string' ? encodeLine(line) : line);
    this.sentAt = performance.now();
  }

  /** After each flush: waiting requests start if output is under its bound; a closing peer ends once all is out. */
  private afterFlush(): void {
    if (!this.output.over) this.slots.startWaiting();
    this.updateReading();
    const repliesDue = this.cutOff !== undefined && this.unfinishedLines > 0;
    if (this._state === 'closing' && this.output.empty && !repliesDue && !this.stream.writableEnded) this.stream.end();
  }

  // ---- reading ----

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
      this.output.release(held.bytes);
      if (reply !== undefined) this.send(reply);
      this.lineFinished();
    });
  }

  /** One line is handled and its reply queued: wake idle waiters, finish a drain or a cut-off. */
  private lineFinished(): void {
    this.unfinishedLines--;
    if (this.unfinishedLines > 0) return;
    for (const wake of this.idleWaiters.splice(0)) wake();
    if (this._state === 'draining') this.dispose('stream ended');
    else if (this._state === 'closing') this.output.flush();
  }

  /**
   * Handles one message; resolves to the encoded reply, or undefined when none is due. Never
   * rejects. `rawId` and `marker` are checkMessage's; `held`, when given, is where the reply's
   * bytes are counted until it is sent.
   */
  private async onMessage(m: unknown, rawId: string | undefined, held: HeldReply | undefined, marker?: string): Promise<string | OutLine | undefined> {
    const c = checkMessage(m, rawId, marker);
    switch (c.kind) {
      case 'refused':
        return c.reply;
      case 'invalid_utf8':
        return this.refuseInvalidUtf8(c.id, c.answer);
      case 'response':
        this.outgoing.answer(c.id, c.msg);
        return undefined;
      case 'cancel':
        if (c.target !== undefined) this.calls.cancel(c.target);
        return undefined;
    }
    if (c.kind === 'request' && this.calls.has(c.id)) return invalidRequest(c.id, `request id ${JSON.stringify(c.id)} is already in flight`);
    if (this.slots.refusesMore(this.outgoing.awaiting)) {
      const busy: WireError = {
        code: DomainCode.busy,
        message: 'too many requests are waiting on this connection while it awaits an answer from you; retry later',
        data: { code: 'busy', in_flight: this.slots.inFlight, queued: this.slots.waiting },
      };
      if (c.kind === 'request') return errorLine(c.id, busy);
      this.opts.onNotificationError?.(busy, c.method);
      return undefined;
    }
    return c.kind === 'request' ? this.runRequest(c.id, c.method, c.params, held) : this.runNotification(c.method, c.params);
  }

  /** Carries out invalidUtf8Answer's verdict: a reply, a failed call of ours, or a report. */
  private refuseInvalidUtf8(id: Id | null, a: InvalidUtf8Answer): string | undefined {
    if ('reply' in a) return a.reply;
    if ('failCall' in a) {
      if (id !== null) this.outgoing.fail(id, a.failCall);
    } else this.opts.onNotificationError?.(a.report, a.method);
    return undefined;
  }

  /**
   * A single message's reply comes back as its encoded line (counted in `held` by its length);
   * a batch member's (no `held`) as its JSON, for the batch to join.
   */
  private runRequest(id: Id, method: string, params: unknown, held: HeldReply | undefined): Promise<string | OutLine> {
    return this.calls.request(id, method, params, (outcome, aborted) => {
      const reply = outcome.ok ? this.encodeResult(id, method, outcome.value, held !== undefined) : this.encodeError(id, method, outcome.err, aborted);
      if (held === undefined) return reply;
      const line = typeof reply === 'string' ? encodeLine(reply) : reply;
      held.bytes += line.length;
      this.output.hold(line.length);
      return line;
    });
  }

  /** A notification's failure is reported, since no reply can carry it. */
  private runNotification(method: string, params: unknown): Promise<undefined> {
    return this.calls.notification(method, params, (outcome, aborted) => {
      if (outcome.ok || aborted) return undefined;
      const { wire, internal } = toWireError(outcome.err);
      if (internal) this.opts.onInternalError?.(outcome.err, method);
      else this.opts.onNotificationError?.(wire, method);
      return undefined;
    });
  }

  /** The reply's JSON; an EncodedJson result is spliced in as bytes, as a whole line when `asLine`. */
  private encodeResult(id: Id, method: string, result: unknown, asLine: boolean): string | OutLine {
    if (result instanceof EncodedJson) return encodedResult(id, result, asLine);
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

  // ---- reading paused ----

  /**
   * Reading pauses while every slot is taken or output is over its bound, except while our own
   * requests await answers: those arrive on this stream, and a handler may be the one waiting
   * for them (then requests read meanwhile wait to start, up to maxQueued, past which they get
   * `busy`).
   */
  private updateReading(): void {
    if (this._state !== 'open') return;
    const hold = (this.slots.full || this.output.over) && !this.outgoing.awaiting;
    if (hold && !this.stream.isPaused()) this.stream.pause();
    else if (!hold && this.stream.isPaused()) this.stream.resume();
  }
}
