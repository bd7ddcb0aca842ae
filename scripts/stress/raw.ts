// A raw NDJSON connection for the parts that send what the typed client cannot: bytes that are
// not JSON, half-closes, unread replies. Replies are kept as their raw line and, when the line
// parses, as a value; `next` waits for one with a deadline.
import net from 'node:net';

export interface RawReply {
  line: string;
  value: unknown;
}

export type Next = RawReply | 'closed' | 'timeout';

export class RawConn {
  readonly sock: net.Socket;
  private buf = '';
  private readonly lines: RawReply[] = [];
  private waiter: ((v: Next) => void) | undefined;
  closed = false;
  /** 'error' events seen (ECONNRESET, EPIPE), by code. */
  readonly errors: string[] = [];

  private constructor(sock: net.Socket) {
    this.sock = sock;
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      this.buf += d;
      let i: number;
      while ((i = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        let value: unknown;
        try {
          value = JSON.parse(line);
        } catch {
          value = undefined;
        }
        this.push({ line, value });
      }
    });
    sock.on('error', (e: NodeJS.ErrnoException) => this.errors.push(e.code ?? e.message));
    sock.on('close', () => {
      this.closed = true;
      const w = this.waiter;
      this.waiter = undefined;
      w?.('closed');
    });
  }

  private push(r: RawReply): void {
    const w = this.waiter;
    if (w !== undefined) {
      this.waiter = undefined;
      w(r);
    } else this.lines.push(r);
  }

  static connect(socketPath: string, opts: { allowHalfOpen?: boolean } = {}): Promise<RawConn> {
    return new Promise((resolve, reject) => {
      const sock = net.createConnection({ path: socketPath, allowHalfOpen: opts.allowHalfOpen ?? false });
      sock.once('error', reject);
      sock.once('connect', () => {
        sock.off('error', reject);
        resolve(new RawConn(sock));
      });
    });
  }

  write(data: string | Buffer): void {
    if (!this.closed && !this.sock.destroyed) this.sock.write(data);
  }

  send(obj: unknown): void {
    this.write(`${JSON.stringify(obj)}\n`);
  }

  /** The next reply line, or 'closed', or 'timeout' after `ms`. */
  next(ms: number): Promise<Next> {
    const r = this.lines.shift();
    if (r !== undefined) return Promise.resolve(r);
    if (this.closed) return Promise.resolve('closed');
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        resolve('timeout');
      }, ms);
      this.waiter = (v) => {
        clearTimeout(timer);
        resolve(v);
      };
    });
  }

  /** Waits for the reply whose id is `id`, dropping others; null on close or timeout. */
  async reply(id: string, ms: number): Promise<RawReply | null> {
    const deadline = Date.now() + ms;
    for (;;) {
      const r = await this.next(Math.max(1, deadline - Date.now()));
      if (r === 'closed' || r === 'timeout') return null;
      if (idOf(r.value) === id) return r;
    }
  }

  async initialize(ms = 5000): Promise<boolean> {
    this.send({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocol: 1, client: { name: 'albedo-stress-raw', version: '1' } } });
    return (await this.reply('init', ms)) !== null;
  }

  destroy(): void {
    this.sock.destroy();
  }
}

export function idOf(v: unknown): unknown {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as { id?: unknown }).id : undefined;
}

export function errorCodeOf(v: unknown): number | undefined {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const e = (v as { error?: { code?: unknown } }).error;
  return typeof e?.code === 'number' ? e.code : undefined;
}
