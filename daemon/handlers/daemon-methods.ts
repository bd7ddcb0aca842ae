// Connection and process methods: initialize, daemon.status, daemon.shutdown, payload.get.
import { AlbedoError, RpcCode, rpcError } from '../../protocol/errors.ts';
import { PROTOCOL_VERSION } from '../../protocol/methods.ts';
import { getPayload } from '../../storage/payloads.ts';
import { storageSize, unpackParts } from '../../storage/storage-size.ts';
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

export const daemonStatus: Handler<'daemon.status'> = async (_params, { daemon }) => {
  // The page walk reads the whole file: the search worker does it, off the event loop.
  const storage = await storageSize(daemon.db, daemon.paths.db, { walk: async () => unpackParts(await daemon.search.pageParts()) });
  const row = daemon.db.prepare('SELECT count(*) AS n FROM sessions').get() as { n: number };
  return {
    version: daemon.version,
    pid: process.pid,
    home: daemon.paths.home,
    uptime_ms: Date.now() - daemon.startedAt,
    sessions: row.n,
    loaded_kernels: daemon.kernels.loaded,
    connections: daemon.connectionCount(),
    config_errors: daemon.configProblems(),
    storage,
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
