// What a method handler is handed: the daemon's services and the calling connection.
// Handlers never reach past this (no globals), so tests can drive them over a real socket
// against a real database without any other process state.
import type { Params, Result, MethodName } from '../protocol/methods.ts';
import type { EncodedJson } from '../protocol/rpc-message.ts';
import type { RpcPeer } from '../protocol/rpc-peer.ts';
import type { Db } from '../storage/db.ts';
import type { SearchWorker } from '../storage/search/worker.ts';
import type { ConfigSnapshot } from './config.ts';
import type { HomePaths } from './home.ts';
import type { SessionKernels } from './kernels.ts';
import type { Logger } from './logger.ts';
import type { SummarizeRoutes } from './summarize-routes.ts';
import type { Summarizer } from '../strategies/summarizer/types.ts';

/** Limits and switches read at start-up. */
export interface DaemonSettings {
  /** Largest JSON-RPC line accepted, in bytes. */
  maxLineBytes: number;
  /** Largest decoded image accepted in an append, in bytes. */
  maxImageBytes: number;
  /** Incoming requests handled at once per connection before reading pauses. */
  maxInFlight: number;
  /** How long shutdown waits for in-flight requests, in milliseconds. */
  shutdownGraceMs: number;
  /**
   * Whether extensions.json and models.json are watched. Off, they are read at start and on
   * /reload or SIGHUP only (for homes on file systems without change events, and for editing
   * several files before applying them together).
   */
  watchConfig: boolean;
  /** Whether the background search indexer runs (off: searches scan every row past the cursor). */
  searchIndexer: boolean;
  /**
   * Whether V8's old generation may grow only a bounded share past what is live (daemon/start.ts sets
   * it for the whole process as the daemon starts; an in-process daemon leaves it alone).
   */
  leanHeap: boolean;
  /**
   * A failure to stage, for tests only: `proxy-prepare-fails` makes every proxied prepare throw
   * as an internal error would (the request must then go upstream unchanged);
   * `proxy-store-held` holds the store of a proxied turn's answer, and with it the session's
   * queue, until a file `release-store` appears in the home (the agent must have its whole
   * answer meanwhile). Or a crash to stage: `kill-before-elision` makes the daemon kill
   * itself (SIGKILL) right after a compaction committed and before its image elision ran.
   */
  fault: 'kill-before-elision' | 'proxy-prepare-fails' | 'proxy-store-held' | undefined;
  /** The proxy's port from the environment (wins over extensions.json); undefined: the config's. */
  proxyPort?: number | 'off' | undefined;
  /** The Anthropic upstream from the environment (wins over extensions.json). */
  anthropicUpstream?: string | undefined;
  /** The OpenAI upstream (Responses and Chat Completions) from the environment. */
  openaiUpstream?: string | undefined;
}

export interface ConfigProblem {
  file: string;
  message: string;
}

/** The daemon's services, as handlers see them. */
export interface DaemonServices {
  readonly version: string;
  readonly paths: HomePaths;
  readonly db: Db;
  readonly log: Logger;
  readonly kernels: SessionKernels;
  /** Per session, the agent connection that writes its `client` summaries. */
  readonly summarizeRoutes: SummarizeRoutes;
  /** Runs grep's trigram candidate queries off the event loop. */
  readonly search: SearchWorker;
  readonly settings: DaemonSettings;
  readonly startedAt: number;
  connectionCount(): number;
  /** What the connections hold: output not yet read by the clients, unfinished lines (bytes). */
  connectionMemory(): { queuedOutputBytes: number; partialLineBytes: number; partialLineBudgetBytes: number };
  /** The current extensions.json and models.json (last good versions). */
  config(): ConfigSnapshot;
  configProblems(): ConfigProblem[];
  /**
   * Re-reads the configuration files now, clears every failure latch and tells live sessions
   * of changed capabilities (what /reload and SIGHUP do); resolves when all of that is done.
   */
  reloadConfig(): Promise<void>;
  /** Rows were added to some session: the background indexer picks them up (daemon/idle-work.ts). */
  rowsAdded(): void;
  /**
   * A request is being handled: idle-time work (indexing, merging, checkpoints) waits until the
   * function returned is called (any later call does nothing). The socket's requests hold it
   * while they run; a proxied request from its arrival until the upstream starts answering.
   */
  holdIdleWork(): () => void;
  /** Whether the provider-compatible proxy listens, where, and why not. */
  proxyStatus(): {
    listening: boolean;
    port: number | null;
    error: string | null;
    anthropic_base_url: string | null;
    openai_base_url: string | null;
  };
  /** Starts an orderly shutdown after the current response is written. */
  requestShutdown(reason: string): void;
}

/** Per-connection state. */
export interface ConnectionState {
  readonly id: number;
  peer: RpcPeer | undefined;
  initialized: boolean;
  client: { name: string; version: string } | undefined;
  /** The client answers the daemon's reverse `summarize` request. */
  canSummarize: boolean;
}

export interface CallContext {
  daemon: DaemonServices;
  conn: ConnectionState;
  /** Aborted when the client cancels the request or the connection closes. */
  signal: AbortSignal;
  /**
   * The summarizer a proxied request brings (the upstream it is forwarded to, with its
   * credentials); used unless extensions.json names a backend. Absent on the socket.
   */
  summarizer?: Summarizer;
  /** The agent's own system prompt on a proxied request (PrepareArgs.clientPrompt). */
  clientPrompt?: string;
  /** What the log calls the call when it is not an RPC method (`proxy anthropic`). */
  method?: string;
}

export type Handler<M extends MethodName> = (params: Params<M>, ctx: CallContext) => Promise<Result<M>> | Result<M>;
/** A handler that may answer with its result already serialized (protocol/rpc-peer.ts EncodedJson). */
export type EncodingHandler<M extends MethodName> = (params: Params<M>, ctx: CallContext) => Promise<Result<M> | EncodedJson<Result<M>>>;
export type HandlerTable = { [M in MethodName]: Handler<M> | EncodingHandler<M> };
