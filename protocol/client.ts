// The typed client TypeScript frontends use: connects to the daemon's socket, runs `initialize`,
// types each call from the method table, and answers the daemon's reverse `summarize` request
// when given a summarizer. Transport and cancellation live in rpc-peer.ts.
import net from 'node:net';
import type { z } from 'zod';
import { AlbedoError, RpcCode, rpcError } from './errors.ts';
import { MAX_ROWS_LIMIT, methods, PROTOCOL_VERSION, reverseMethods, type MethodName, type ParamsIn, type Result } from './methods.ts';
import { RpcPeer } from './rpc-peer.ts';
import type { StoredRow } from './rows.ts';

export type SummarizeParams = z.output<typeof reverseMethods.summarize.params>;

export interface ClientOptions {
  /** Who we are, sent with `initialize`. Default {name:'albedo-client', version:'0'}. */
  client?: { name: string; version: string };
  /** When set, declares capabilities.summarize and answers the daemon's `summarize` requests. */
  summarize?: (params: SummarizeParams, signal: AbortSignal) => Promise<{ text: string }>;
  /** Cap on one incoming line, in bytes. */
  maxLineBytes?: number;
  /** Limit for connecting plus `initialize`, in ms. Default 5000. */
  connectTimeoutMs?: number;
}

export class AlbedoClient {
  private readonly peer: RpcPeer;
  private readonly closedPromise: Promise<void>;

  private constructor(socket: net.Socket, opts: ClientOptions) {
    const summarize = opts.summarize;
    let onClose!: () => void;
    this.closedPromise = new Promise((resolve) => (onClose = resolve));
    this.peer = new RpcPeer(socket, {
      maxLineBytes: opts.maxLineBytes,
      onClose,
      onRequest: async (method, params, ctx) => {
        if (method !== 'summarize' || !summarize) {
          throw rpcError(RpcCode.MethodNotFound, 'method_not_found', `method not found: ${method}`);
        }
        const parsed = reverseMethods.summarize.params.safeParse(params);
        if (!parsed.success) {
          throw rpcError(RpcCode.InvalidParams, 'invalid_params', 'invalid params for summarize', {
            issues: parsed.error.issues.map((i) => ({ path: i.path.map(String), message: i.message })),
          });
        }
        let out: unknown;
        try {
          out = await summarize(parsed.data, ctx.signal);
        } catch (err) {
          if (err instanceof AlbedoError || ctx.signal.aborted) throw err;
          throw new AlbedoError('summarizer_failed', err instanceof Error ? err.message : String(err));
        }
        const result = reverseMethods.summarize.result.safeParse(out);
        if (!result.success) throw new AlbedoError('summarizer_failed', 'summarizer returned no text');
        return result.data;
      },
    });
  }

  static async connect(socketPath: string, opts: ClientOptions = {}): Promise<AlbedoClient> {
    const timeoutMs = opts.connectTimeoutMs ?? 5000;
    const started = Date.now();
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.createConnection(socketPath);
      const fail = (err: Error) => {
        clearTimeout(timer);
        s.destroy();
        reject(err);
      };
      const timer = setTimeout(() => fail(new Error(`connecting to ${socketPath} timed out after ${timeoutMs} ms`)), timeoutMs);
      s.once('error', fail);
      s.once('connect', () => {
        clearTimeout(timer);
        s.off('error', fail);
        resolve(s);
      });
    });
    const client = new AlbedoClient(socket, opts);
    try {
      await client.call(
        'initialize',
        {
          protocol: PROTOCOL_VERSION,
          client: opts.client ?? { name: 'albedo-client', version: '0' },
          capabilities: { summarize: opts.summarize !== undefined },
        },
        { timeoutMs: Math.max(1, timeoutMs - (Date.now() - started)) },
      );
    } catch (err) {
      await client.close();
      throw err;
    }
    return client;
  }

  /** Calls a method; the result is checked against the method table. Failures are RpcRemoteError. */
  async call<M extends MethodName>(
    method: M,
    params: ParamsIn<M>,
    opts?: { signal?: AbortSignal; timeoutMs?: number },
  ): Promise<Result<M>> {
    const raw = await this.peer.request(method, params, opts);
    const schema: z.ZodType = methods[method].result;
    return schema.parse(raw) as Result<M>;
  }

  /**
   * Untyped call, for sending what the method table would not allow, or params serialized
   * beforehand (an EncodedJson, sent as its bytes; a benchmark encodes its batches before timing).
   */
  raw(method: string, params: unknown): Promise<unknown> {
    return this.peer.request(method, params);
  }

  /** Idempotent; resolves once the socket has closed. Pending calls reject. */
  close(): Promise<void> {
    this.peer.dispose('client closed');
    return this.closedPromise;
  }

  get closed(): boolean {
    return this.peer.state !== 'open';
  }
}

/** Every row of a session, in seq order, following `next_after` page by page. */
export async function allRows(client: AlbedoClient, session: string): Promise<StoredRow[]> {
  const out: StoredRow[] = [];
  let after = 0;
  for (;;) {
    const page = await client.call('transcript.rows', { session, after, limit: MAX_ROWS_LIMIT });
    out.push(...page.rows);
    if (page.next_after === null) return out;
    after = page.next_after;
  }
}
