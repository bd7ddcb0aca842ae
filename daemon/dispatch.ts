// Turns one incoming JSON-RPC request into a handler call: method lookup, the initialize gate,
// zod parsing of params (-32602 with the issues), and the error log line with session and
// method. Mapping errors to wire errors stays in protocol/errors.ts.
import { z } from 'zod';
import { AlbedoError, RpcCode, RpcError, rpcError } from '../protocol/errors.ts';
import { isMethodName, methods, type MethodName } from '../protocol/methods.ts';
import type { CallContext, HandlerTable } from './context.ts';

/** Methods a connection may call before `initialize`. */
const BEFORE_INITIALIZE = new Set<MethodName>(['initialize']);

function sessionOf(params: unknown): string | undefined {
  if (params !== null && typeof params === 'object' && !Array.isArray(params)) {
    const p = params as Record<string, unknown>;
    const s = p.session ?? p.branch;
    if (typeof s === 'string') return s;
  }
  return undefined;
}

export function createDispatcher(handlers: HandlerTable) {
  return async function dispatch(method: string, rawParams: unknown, ctx: CallContext): Promise<unknown> {
    if (!isMethodName(method)) {
      throw rpcError(RpcCode.MethodNotFound, 'method_not_found', `unknown method "${method}"`, { method });
    }
    if (!ctx.conn.initialized && !BEFORE_INITIALIZE.has(method)) {
      throw new AlbedoError('not_initialized', 'call "initialize" before any other method', { method });
    }
    if (Array.isArray(rawParams)) {
      throw rpcError(RpcCode.InvalidParams, 'invalid_params', 'params must be an object with named members', {
        method,
      });
    }
    const parsed = methods[method].params.safeParse(rawParams ?? {});
    if (!parsed.success) {
      throw rpcError(RpcCode.InvalidParams, 'invalid_params', `invalid params for ${method}: ${z.prettifyError(parsed.error).replaceAll('\n', '; ')}`, {
        method,
        issues: parsed.error.issues.map((i) => ({ path: i.path.map(String), message: i.message, code: i.code })),
      });
    }
    const handler = handlers[method] as (params: unknown, ctx: CallContext) => unknown;
    try {
      return await handler(parsed.data, ctx);
    } catch (err) {
      const session = sessionOf(rawParams);
      if (err instanceof AlbedoError || err instanceof RpcError) {
        ctx.daemon.log.debug({ method, session, code: err instanceof AlbedoError ? err.code : err.wire.code }, err.message);
        throw err;
      }
      // A cancelled request is answered as cancelled by the peer; it is not a failure.
      if (ctx.signal.aborted) throw err;
      // The one log line for an unexpected failure; the client gets a generic message.
      ctx.daemon.log.error({ err, method, session }, 'request failed');
      throw rpcError(RpcCode.InternalError, 'internal_error', 'internal error');
    }
  };
}
