// Our own requests on a connection: their ids, the answers awaited, timeouts and cancellation
// (a `$/cancelRequest` to the other side when we give up), and what the connection's end means
// for the ones still waiting. The peer (rpc-peer.ts) owns the stream: it sends the lines this
// makes and hands back every response it reads.
import { DomainCode, RpcCode } from './errors.ts';
import { CANCEL_METHOD, isObject, requestLine, RpcRemoteError, type Id, type Msg } from './rpc-message.ts';

/** What the requests need of their peer. */
export interface OutgoingWire {
  send(line: string | Buffer): void;
  notify(method: string, params: unknown): void;
  /** Called whenever a request starts waiting or stops: whether any waits decides reading (rpc-peer.ts). */
  changed(): void;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export class OutgoingRequests {
  private readonly pending = new Map<Id, Pending>();
  private nextId = 1;
  /** The other side said our line was too long: the reason to give pending requests at close. */
  private remoteFailure: RpcRemoteError | undefined;

  constructor(private readonly wire: OutgoingWire) {}

  /** Some request of ours still awaits its answer. */
  get awaiting(): boolean {
    return this.pending.size > 0;
  }

  /**
   * Sends a request and resolves with its result. `params` may be an EncodedJson (params the
   * caller serialized already, e.g. ahead of a timed section): its bytes go into the line as they
   * are, so they must be one JSON value (an object or an array) with no newline outside strings.
   */
  send(method: string, params: unknown, opts: { signal?: AbortSignal; timeoutMs?: number }): Promise<unknown> {
    const { signal, timeoutMs } = opts;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = this.nextId++;
    let line: string | Buffer;
    try {
      line = requestLine(id, method, params);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = () => {
        this.pending.delete(id);
        this.wire.changed();
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const giveUp = (reason: unknown) => {
        settle();
        this.wire.notify(CANCEL_METHOD, { id });
        reject(reason);
      };
      const onAbort = () => giveUp(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) {
        const message = `${method} timed out after ${timeoutMs} ms`;
        timer = setTimeout(() => giveUp(new DOMException(message, 'TimeoutError')), timeoutMs);
      }
      this.pending.set(id, {
        resolve: (v) => (settle(), resolve(v)),
        reject: (e) => (settle(), reject(e)),
      });
      this.wire.changed();
      this.wire.send(line);
    });
  }

  /** A response the peer read: settles its request. Unknown ids (answers to requests we cancelled or timed out) are dropped on purpose. */
  answer(id: Id | null, m: Msg): void {
    const error = m.error;
    const remote = 'error' in m
      ? isObject(error) && typeof error.code === 'number' && typeof error.message === 'string'
        ? new RpcRemoteError(error.code, error.message, error.data)
        : new RpcRemoteError(RpcCode.InternalError, 'malformed error response', error)
      : undefined;
    if (id === null) {
      if (remote?.code === DomainCode.message_too_large) this.remoteFailure = remote;
      return;
    }
    const pending = this.pending.get(id);
    if (remote) pending?.reject(remote);
    else pending?.resolve(m.result);
  }

  /** Fails one request with `err` (its answer could not be read). */
  fail(id: Id, err: unknown): void {
    this.pending.get(id)?.reject(err);
  }

  /** Asks the other side to cancel every request still awaiting an answer. */
  cancelAll(): void {
    for (const id of this.pending.keys()) this.wire.notify(CANCEL_METHOD, { id });
  }

  /** Rejects every request still awaiting: with the other side's failure when it said one, else `err`. */
  rejectAll(err: Error, opts: { preferRemote: boolean }): void {
    const failure = opts.preferRemote ? (this.remoteFailure ?? err) : err;
    for (const pending of [...this.pending.values()]) pending.reject(failure);
  }
}
