// The bound on incoming requests handled at once (rpc-peer.ts): a request runs inside a slot,
// waiters start in the order they came, and a request may start only while the output is within
// its bound too. Pausing the reading is not enough for that second rule: one chunk can carry
// hundreds of requests, and each that starts adds a reply. Gated here, the output of a side that
// never reads stays under its bound plus the replies of the requests already running.

export interface SlotOptions {
  /** Requests handled at once. */
  maxInFlight: number;
  /** Requests that may wait while reading cannot pause (see `refusesMore`). */
  maxQueued: number;
  /** The output is over its bound (rpc-output.ts): nothing new starts. */
  outputOver: () => boolean;
  /** A slot was taken or freed: the peer decides again whether to read. */
  onChange: () => void;
}

export class RequestSlots {
  private running = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(private readonly opts: SlotOptions) {}

  /** Requests running. */
  get inFlight(): number {
    return this.running;
  }

  /** Requests waiting for a slot. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** Every slot is taken. */
  get full(): boolean {
    return this.running >= this.opts.maxInFlight;
  }

  /** A slot, at once when none waits and one may start (or `always`: the peer is closing), else in turn. */
  acquire(always: boolean): Promise<void> {
    if ((this.waiters.length === 0 && this.canStart()) || always) {
      this.take();
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiters.push(() => (this.take(), resolve())));
  }

  release(): void {
    this.running--;
    this.startWaiting();
    this.opts.onChange();
  }

  /** Starts waiting requests while they may start (a slot freed, or output went under its bound). */
  startWaiting(): void {
    while (this.waiters.length > 0 && this.canStart()) this.waiters.shift()?.();
  }

  /** Starts every waiting request, bound or not: the peer is closing and they must see their abort. */
  startAll(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }

  /**
   * The bound on requests waiting to start. While none may start reading pauses, so the wait
   * queue holds at most what the last chunk (or batch line) carried. But reading cannot pause
   * while one of our requests awaits its answer (`awaitingAnswers`): the answer arrives on this
   * stream behind whatever the other side sent first, so pausing could leave a handler waiting
   * on it forever (a client summarize during /compact, while the agent keeps sending requests).
   * Then the queue would grow without bound; instead, past maxQueued waiting requests, new ones
   * are refused at once with `busy` and never start, which the other side may retry.
   */
  refusesMore(awaitingAnswers: boolean): boolean {
    return !this.canStart() && awaitingAnswers && this.waiters.length >= this.opts.maxQueued;
  }

  private canStart(): boolean {
    return this.running < this.opts.maxInFlight && !this.opts.outputOver();
  }

  private take(): void {
    this.running++;
    this.opts.onChange();
  }
}
