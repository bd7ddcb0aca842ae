// The albedod process core: owns the database, the socket server, the connections, the
// session kernels and the background search indexer, and shuts all of them down in order.
// Start-up policy (home checks, the lock, signals) lives in main.ts.
import fs from 'node:fs';
import net from 'node:net';
import { DEFAULT_MAX_LINE_BYTES } from '../protocol/framing.ts';
import { AlbedoError } from '../protocol/errors.ts';
import { PartialLineBudget } from '../protocol/line-budget.ts';
import { RpcPeer } from '../protocol/rpc-peer.ts';
import { giveWayTo } from '../protocol/time-slice.ts';
import { packageVersion } from '../protocol/version.ts';
import { migrateExtension, openDb, owedFlushRunning, type Db } from '../storage/db.ts';
import { LogCheckpointer } from '../storage/log-checkpoint.ts';
import { pruneFrames } from '../storage/state/snapcompact.ts';
import { collectPayloadGarbage, DEFAULT_MAX_IMAGE_BYTES } from '../storage/images/payloads.ts';
import { SearchWorker } from '../storage/search/worker.ts';
import { BUILTIN_SET, type ExtensionSet } from '../strategies/index.ts';
import type { ConfigProblem, ConnectionState, DaemonServices, DaemonSettings } from './context.ts';
import { createDispatcher } from './dispatch.ts';
import { handlers } from './handlers/index.ts';
import { IdleWork } from './idle-work.ts';
import { ConfigStore, type ConfigSnapshot } from './config.ts';
import { StartupError, type HomePaths } from './home.ts';
import { resetAllAutoFailures } from '../storage/log/compaction-log.ts';
import { tellCapabilities } from './capabilities.ts';
import { resumeElisions } from './image-elision.ts';
import { SessionKernels } from './kernels.ts';
import type { Logger } from './logger.ts';
import { SummarizeRoutes } from './summarize-routes.ts';
import { ProxyServer, proxyToken, type ProxyStatus } from './proxy/server.ts';

export const DEFAULT_SETTINGS: DaemonSettings = {
  maxLineBytes: DEFAULT_MAX_LINE_BYTES,
  maxImageBytes: DEFAULT_MAX_IMAGE_BYTES,
  maxInFlight: 64,
  shutdownGraceMs: 10_000,
  watchConfig: true,
  searchIndexer: true,
  leanHeap: true,
  fault: undefined,
};

type State = 'starting' | 'running' | 'stopping' | 'stopped';

/** The error listener of a connection held during start-up; the peer brings its own. */
const ignoreWhileHeld = (): void => undefined;

/** Cached snapcompact frames unused this long are pruned at start-up. */
export const FRAME_TTL_MS = 30 * 24 * 60 * 60 * 1000;

export class Daemon implements DaemonServices {
  readonly version = packageVersion();
  readonly db: Db;
  readonly kernels = new SessionKernels();
  readonly summarizeRoutes = new SummarizeRoutes();
  readonly startedAt = Date.now();
  private state: State = 'starting';
  private readonly server: net.Server;
  private readonly connections = new Set<ConnectionState>();
  /** Sockets accepted before the state is `running`, served once it is (see start). */
  private readonly early: net.Socket[] = [];
  private nextConnectionId = 1;
  /** Indexing, index merging and checkpoints between requests. */
  private readonly idle: IdleWork;
  /** The write-ahead log's checkpoints, their fsyncs off the event loop. */
  private readonly checkpoints: LogCheckpointer;
  /** Requests being handled, and when the last one arrived or finished (performance.now()). */
  private inFlight = 0;
  private lastRequestAt = 0;
  private stopped: Promise<void> | undefined;
  private stopGivingWay: (() => void) | undefined;
  private readonly dispatch = createDispatcher(handlers);
  /** All connections' unfinished lines together: room for two of the longest line. */
  private readonly partialLines: PartialLineBudget;
  private readonly configStore: ConfigStore;
  /** The capability notices the last configuration change is appending (see reloadConfig). */
  private telling: Promise<void> = Promise.resolve();
  readonly search: SearchWorker;
  /** The provider-compatible HTTP front (daemon/proxy/). */
  private readonly proxy: ProxyServer;
  /** Called once the daemon has stopped on its own (daemon.shutdown). */
  onStopped: (() => void) | undefined;

  private constructor(
    readonly paths: HomePaths,
    readonly log: Logger,
    readonly settings: DaemonSettings,
    modules: ExtensionSet,
  ) {
    this.db = openDb(paths.db, {
      // A migration that rewrites the transcript takes a while on a large file: say so first.
      onMigration: (m) => {
        if (m.newestSeq > 0) log.info({ migration: m.version, name: m.name, newest_seq: m.newestSeq }, `migrating the database to version ${m.version} (${m.name})`);
      },
    });
    try {
      for (const m of modules.modules) if (m.migrations !== undefined) migrateExtension(this.db, m.name, m.migrations);
      this.checkpoints = new LogCheckpointer(this.db, { log });
    } catch (err) {
      this.db.close();
      throw err;
    }
    this.search = new SearchWorker(paths.db, { onStart: (kind) => log.info({ method: 'search', ask: kind }, 'search worker started') });
    // A request waiting for its commit to reach the disk (storage/db.ts durable) counts as bytes
    // moving: a backlog's unit in that millisecond would hold its reply for the unit's length.
    const moving = (): boolean => this.transit() !== undefined || owedFlushRunning(this.db);
    this.idle = new IdleWork(this.db, { busy: () => this.busy(), moving, lastRequestAt: () => this.lastRequestAt }, {
      indexer: settings.searchIndexer,
      log,
      checkpoints: { now: () => void this.checkpoints.checkpointNow(), wake: () => this.checkpoints.wake() },
    });
    this.partialLines = new PartialLineBudget(2 * settings.maxLineBytes);
    // Half-open: a client that ends its writes still gets the replies to what it sent.
    this.server = net.createServer({ allowHalfOpen: true }, (socket) => this.accept(socket));
    this.configStore = new ConfigStore({
      extensionsPath: paths.extensions,
      modelsPath: paths.models,
      modules,
      log,
      // A configuration change gives latched sessions another chance.
      onChange: (cfg) => {
        resetAllAutoFailures(this.db);
        log.info({ version: cfg.version }, 'configuration changed');
        // Whatever changed the files (/reload, SIGHUP, the watch, a global selection), live
        // sessions whose extensions changed are told in their history.
        this.telling = this.tellSessions();
      },
    });
    this.configStore.load();
    this.collectPayloads();
    const proxy = this.configStore.current.extensions.proxy;
    this.proxy = new ProxyServer(this, {
      port: settings.proxyPort ?? proxy.port,
      token: proxyToken(paths.proxyToken),
      anthropicUpstream: settings.anthropicUpstream ?? proxy.anthropicUpstream,
      openaiUpstream: settings.openaiUpstream ?? proxy.openaiUpstream,
      maxBodyBytes: settings.maxLineBytes,
    });
  }

  proxyStatus(): ProxyStatus {
    return this.proxy.status;
  }

  /**
   * Start-up upkeep of the payloads table: frames no request used for FRAME_TTL_MS go, with the
   * payloads nothing else names, and the sweep removes any payload stored without a reference.
   */
  private collectPayloads(): void {
    const { frames, payloads } = pruneFrames(this.db, Date.now() - FRAME_TTL_MS);
    if (frames > 0) this.log.info({ frames, payloads }, 'pruned snapcompact frames unused for 30 days');
    const swept = collectPayloadGarbage(this.db);
    if (swept > 0) this.log.info({ payloads: swept }, 'deleted payloads nothing named (stored just before a crash)');
  }

  /**
   * Opens the database and listens. The caller must hold the home lock. Listening comes last, so
   * a client that connects as soon as the socket appears finds a daemon ready to serve; a
   * connection accepted before the state turns `running` is held, not reset, and served then.
   */
  /** `modules` is the extension set the daemon runs: the shipped one unless its starter added to it. */
  static async start(paths: HomePaths, log: Logger, settings: Partial<DaemonSettings> = {}, modules: ExtensionSet = BUILTIN_SET): Promise<Daemon> {
    const daemon = new Daemon(paths, log, { ...DEFAULT_SETTINGS, ...settings }, modules);
    try {
      if (daemon.settings.watchConfig) await daemon.configStore.watch();
      await daemon.listen();
    } catch (err) {
      for (const socket of daemon.early.splice(0)) socket.destroy();
      await daemon.configStore.close();
      await daemon.search.close();
      await daemon.checkpoints.close();
      daemon.db.close();
      throw err;
    }
    daemon.state = 'running';
    // Long work (a compaction, a scan) lets replies and requests under way on the socket move first.
    daemon.stopGivingWay = giveWayTo(() => daemon.transit());
    // The proxy beside the socket: a port that cannot be had is reported, never fatal.
    await daemon.proxy.start();
    for (const socket of daemon.early.splice(0)) {
      socket.off('error', ignoreWhileHeld);
      if (!socket.destroyed) daemon.accept(socket);
    }
    daemon.idle.rowsAdded();
    // Elision a crash cut short finishes now, each session through its own queue.
    void resumeElisions(daemon.db, daemon.kernels, log, () => daemon.state !== 'running');
    log.info({ home: paths.home, socket: paths.socket, version: daemon.version }, 'albedod listening');
    return daemon;
  }

  connectionCount(): number {
    return this.connections.size;
  }

  /** Bytes moving on the socket's connections and into the proxy: undefined when none, otherwise how many have moved (see giveWayTo). */
  private transit(): number | undefined {
    let moved = this.proxy.transit();
    for (const c of this.connections) {
      const m = c.peer?.transit;
      if (m !== undefined) moved = (moved ?? 0) + m;
    }
    return moved;
  }

  /** What the connections hold: output not yet read by the clients, unfinished lines (bytes). */
  connectionMemory(): { queuedOutputBytes: number; partialLineBytes: number; partialLineBudgetBytes: number } {
    let queued = 0;
    for (const c of this.connections) queued += c.peer?.queuedOutputBytes ?? 0;
    return { queuedOutputBytes: queued, partialLineBytes: this.partialLines.heldBytes, partialLineBudgetBytes: this.partialLines.maxBytes };
  }

  config(): ConfigSnapshot {
    return this.configStore.current;
  }

  configProblems(): ConfigProblem[] {
    return this.configStore.problems().map((p) => ({ file: p.file, message: p.message }));
  }

  /**
   * What /reload and SIGHUP both do: re-read the configuration files, give every latched
   * session another chance even when the files did not change, and resolve once every live
   * session whose extension context changed has its capability notice.
   */
  async reloadConfig(): Promise<void> {
    this.configStore.load();
    resetAllAutoFailures(this.db);
    await this.telling;
  }

  private async tellSessions(): Promise<void> {
    const told = await tellCapabilities(this);
    if (told === 0) return;
    this.idle.rowsAdded();
    this.log.info({ sessions: told, method: 'reload' }, 'told live sessions that their capabilities changed');
  }

  /**
   * A request is being handled, or one is arriving: a large one (an append of many rows) comes
   * in many chunks, and the loop turns between them, which must not be taken for idle time.
   */
  private busy(): boolean {
    return this.inFlight > 0 || this.partialLines.heldBytes > 0;
  }

  rowsAdded(): void {
    this.idle.rowsAdded();
  }

  holdIdleWork(): () => void {
    this.inFlight += 1;
    this.lastRequestAt = performance.now();
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.inFlight -= 1;
      this.lastRequestAt = performance.now();
      this.idle.requestDone();
    };
  }

  requestShutdown(reason: string): void {
    // Let the current response go out first.
    setImmediate(() => {
      void this.shutdown(reason).then(() => this.onStopped?.());
    });
  }

  /**
   * Orderly stop: refuse new connections, let in-flight requests finish (cancelling what is
   * still running after the grace period), then checkpoint and close the database.
   * Idempotent: every caller gets the same promise.
   */
  shutdown(reason: string): Promise<void> {
    this.stopped ??= this.doShutdown(reason);
    return this.stopped;
  }

  private async doShutdown(reason: string): Promise<void> {
    this.state = 'stopping';
    this.log.info({ reason }, 'albedod stopping');
    this.idle.stop();
    this.stopGivingWay?.();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    const proxyClosed = this.proxy.close();
    const drained = Promise.all([...this.connections].map((c) => c.peer?.whenIdle() ?? Promise.resolve())).then(() => this.kernels.idle());
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.settings.shutdownGraceMs);
    });
    if ((await Promise.race([drained, grace])) === 'timeout') {
      this.log.warn({ connections: this.connections.size }, 'shutdown grace ran out; cancelling in-flight requests');
    }
    clearTimeout(timer);
    const cutOff = new AlbedoError('shutting_down', 'albedod is shutting down; the request was cut off before it finished');
    for (const c of this.connections) c.peer?.dispose('daemon shutting down', { answerWith: cutOff });
    await this.kernels.idle();
    await closed;
    await proxyClosed;
    await this.kernels.idle();
    await this.configStore.close();
    await this.search.close();
    try {
      await this.checkpoints.close();
      this.db.pragma('wal_checkpoint(TRUNCATE)');
    } finally {
      this.db.close();
    }
    fs.rmSync(this.paths.socket, { force: true });
    this.state = 'stopped';
    this.log.info('albedod stopped');
  }

  private async listen(): Promise<void> {
    const socketPath = this.paths.socket;
    if (Buffer.byteLength(socketPath) > 100) {
      throw new StartupError(`socket path is too long for a Unix socket (${socketPath}); set ALBEDO_SOCKET to a shorter path`);
    }
    // We hold the home lock, so a socket file here is a dead daemon's: replace it. Anything
    // that is not a socket is someone else's file and stays.
    try {
      const st = fs.lstatSync(socketPath);
      if (!st.isSocket()) throw new StartupError(`${socketPath} exists and is not a socket; refusing to replace it`);
      fs.rmSync(socketPath);
      this.log.info({ socket: socketPath }, 'removed stale socket');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    // Node creates the socket with the process umask; 0177 leaves it 0600.
    const previous = process.umask(0o177);
    try {
      await new Promise<void>((resolve, reject) => {
        this.server.once('error', reject);
        this.server.listen(socketPath, () => {
          this.server.off('error', reject);
          resolve();
        });
      });
    } finally {
      process.umask(previous);
    }
    fs.chmodSync(socketPath, 0o600);
    this.server.on('error', (err) => this.log.error({ err }, 'socket server error'));
  }

  private accept(socket: net.Socket): void {
    if (this.state === 'starting') {
      // Unread until served (a socket does not flow before it is read); a reset meanwhile must
      // not become an uncaught error.
      socket.on('error', ignoreWhileHeld);
      this.early.push(socket);
      return;
    }
    if (this.state !== 'running') {
      socket.destroy();
      return;
    }
    const conn: ConnectionState = {
      id: this.nextConnectionId++,
      peer: undefined,
      initialized: false,
      client: undefined,
      canSummarize: false,
    };
    this.connections.add(conn);
    conn.peer = new RpcPeer(socket, {
      maxLineBytes: this.settings.maxLineBytes,
      maxInFlight: this.settings.maxInFlight,
      partialLineBudget: this.partialLines,
      onRequest: async (method, params, rctx) => {
        // Once stopping, nothing new starts: what the grace period lets finish is what was running.
        if (this.state !== 'running') throw new AlbedoError('shutting_down', 'albedod is shutting down');
        const release = this.holdIdleWork();
        try {
          return await this.dispatch(method, params, { daemon: this, conn, signal: rctx.signal });
        } finally {
          release();
        }
      },
      // No reply tells anyone a notification failed, so the log does, once. Unexpected failures
      // were logged with their stack by the dispatcher, which answers them as internal_error.
      onNotificationError: (error, method) => {
        if (error.data?.code === 'internal_error') return;
        this.log.warn({ conn: conn.id, method, code: error.data?.code ?? error.code }, `notification failed: ${error.message}`);
      },
      onInternalError: (err, method) => this.log.error({ err, conn: conn.id, method }, 'connection error'),
      onSlowReader: (queuedBytes) => this.log.warn({ conn: conn.id, queued_bytes: queuedBytes }, 'closed a connection that stopped reading its replies'),
      onClose: () => {
        this.connections.delete(conn);
        this.summarizeRoutes.forgetConnection(conn);
        this.log.debug({ conn: conn.id }, 'connection closed');
      },
    });
    this.log.debug({ conn: conn.id }, 'connection opened');
  }
}
