// The other side's requests and notifications while they run (rpc-peer.ts): each gets an abort
// signal (fired by `$/cancelRequest` for its id, or when the peer closes), waits for an in-flight
// slot (rpc-slots.ts), runs the handler, and has its outcome turned into a reply while the slot
// is still held, so the reply is counted against the output bound before the freed slot lets
// another request start.
import type { Id } from './rpc-message.ts';
import type { RequestSlots } from './rpc-slots.ts';

/** What a handler did: its result, or what it threw. */
export type Outcome = { ok: true; value: unknown } | { ok: false; err: unknown };

export interface IncomingOptions {
  slots: RequestSlots;
  /** Runs one call: `id` undefined for a notification. */
  handle(method: string, params: unknown, id: Id | undefined, signal: AbortSignal): Promise<unknown>;
  /** The peer is closing: a call still waiting starts at once (to be answered as cancelled). */
  closing(): boolean;
}

export class IncomingCalls {
  /** Requests not yet answered (running or waiting for a slot), by id. */
  private readonly requests = new Map<Id, AbortController>();
  /** Notifications running or waiting for a slot (they have no id to key them by). */
  private readonly notifications = new Set<AbortController>();

  constructor(private readonly opts: IncomingOptions) {}

  /** A request with this id is not answered yet (a second one with the same id is refused). */
  has(id: Id): boolean {
    return this.requests.has(id);
  }

  /** `$/cancelRequest`: aborts the request's signal, if it is still running or waiting. */
  cancel(id: Id): void {
    this.requests.get(id)?.abort(new Error('request cancelled'));
  }

  /** Aborts every call's signal (the peer is closing). */
  abortAll(reason: Error): void {
    for (const ac of this.requests.values()) ac.abort(reason);
    for (const ac of this.notifications) ac.abort(reason);
  }

  /** Runs a request; `finish` makes its reply from the outcome and whether it was aborted. */
  async request<T>(id: Id, method: string, params: unknown, finish: (outcome: Outcome, aborted: boolean) => T): Promise<T> {
    const ac = new AbortController();
    this.requests.set(id, ac);
    try {
      return await this.invoke(method, params, id, ac.signal, finish);
    } finally {
      this.requests.delete(id);
    }
  }

  /** Runs a notification like a request; `finish` reports what no reply can carry. */
  async notification<T>(method: string, params: unknown, finish: (outcome: Outcome, aborted: boolean) => T): Promise<T> {
    const ac = new AbortController();
    this.notifications.add(ac);
    try {
      return await this.invoke(method, params, undefined, ac.signal, finish);
    } finally {
      this.notifications.delete(ac);
    }
  }

  /** The handler inside a slot; a call aborted while it waited never starts. */
  private async invoke<T>(method: string, params: unknown, id: Id | undefined, signal: AbortSignal, finish: (outcome: Outcome, aborted: boolean) => T): Promise<T> {
    await this.opts.slots.acquire(this.opts.closing());
    let outcome: Outcome;
    try {
      if (signal.aborted) throw signal.reason;
      outcome = { ok: true, value: await this.opts.handle(method, params, id, signal) };
    } catch (err) {
      outcome = { ok: false, err };
    }
    try {
      return finish(outcome, signal.aborted);
    } finally {
      this.opts.slots.release();
    }
  }
}
