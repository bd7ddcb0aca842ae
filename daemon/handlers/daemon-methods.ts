// Connection and process methods: initialize, daemon.status, daemon.shutdown, payload.get.
import fs from 'node:fs';
import { AlbedoError, RpcCode, rpcError } from '../../protocol/errors.ts';
import { PROTOCOL_VERSION } from '../../protocol/methods.ts';
import { getPayload, payloadStats } from '../../storage/images/payloads.ts';
import { runStepsSliced } from '../../protocol/time-slice.ts';
import { searchIndexLagSteps } from '../../storage/search/indexer.ts';
import { pageWalk, storageSize, unpackParts } from '../../storage/storage-size.ts';
import type { Handler } from '../context.ts';

export const initialize: Handler<'initialize'> = (params, { daemon, conn }) => {
  if (params.protocol !== PROTOCOL_VERSION) {
    throw rpcError(RpcCode.InvalidParams, 'unsupported_protocol', `protocol ${params.protocol} is not supported; this daemon speaks ${PROTOCOL_VERSION}`, {
      supported: [PROTOCOL_VERSION],
    });
  }
  conn.initialized = true;
  conn.client = params.client;
  conn.canSummarize = params.capabilities.summarize === true;
  daemon.log.info({ conn: conn.id, client: params.client, summarize: conn.canSummarize }, 'client initialized');
  return { protocol: PROTOCOL_VERSION, server: { name: 'albedod', version: daemon.version } };
};

/** Files up to this size are walked on the daemon's own connection (tens of milliseconds at most). */
const INLINE_WALK_BYTES = 16 * 2 ** 20;

export const daemonStatus: Handler<'daemon.status'> = async (params, { daemon }) => {
  // A large file's walk goes to the search worker, off the event loop; a small one is not worth
  // starting the worker thread for.
  const inline = fs.statSync(daemon.paths.db).size <= INLINE_WALK_BYTES && !daemon.search.running;
  const stateTables = daemon.config().modules.stateTables;
  const walk = !params.storage_parts ? undefined : inline ? () => Promise.resolve(pageWalk(daemon.db, stateTables)) : async () => unpackParts(await daemon.search.pageParts(stateTables));
  const storage = await storageSize(daemon.db, daemon.paths.db, { walk });
  const row = daemon.db.prepare('SELECT count(*) AS n FROM sessions').get() as { n: number };
  // Counting the rows past the index cursor reads each one (~0.5 µs warm, more cold): after a
  // large import, seconds, so it runs sliced. Not on the search worker: starting that thread
  // (a V8 instance, tens of MiB for a minute) for a status call cost more than the count.
  const rowsBehind = await runStepsSliced(searchIndexLagSteps(daemon.db));
  const mem = process.memoryUsage();
  const held = daemon.connectionMemory();
  return {
    version: daemon.version,
    pid: process.pid,
    home: daemon.paths.home,
    uptime_ms: Date.now() - daemon.startedAt,
    sessions: row.n,
    loaded_kernels: daemon.kernels.loaded,
    connections: daemon.connectionCount(),
    config_errors: daemon.configProblems(),
    payloads: payloadStats(daemon.db),
    memory: {
      rss_bytes: mem.rss,
      heap_used_bytes: mem.heapUsed,
      external_bytes: mem.external,
      queued_output_bytes: held.queuedOutputBytes,
      partial_line_bytes: held.partialLineBytes,
      partial_line_budget_bytes: held.partialLineBudgetBytes,
    },
    storage,
    search: { indexer: daemon.settings.searchIndexer, rows_behind: rowsBehind },
    proxy: daemon.proxyStatus(),
  };
};

export const daemonShutdown: Handler<'daemon.shutdown'> = (_params, { daemon, conn }) => {
  daemon.requestShutdown(`daemon.shutdown from connection ${conn.id}`);
  return { ok: true as const };
};

export const payloadGet: Handler<'payload.get'> = (params, { daemon }) => {
  const p = getPayload(daemon.db, params.hash);
  if (!p) throw new AlbedoError('unknown_payload', `no payload with hash ${params.hash}`, { hash: params.hash });
  return { hash: p.hash, media_type: p.media_type, width: p.width, height: p.height, data: p.data.toString('base64') };
};
