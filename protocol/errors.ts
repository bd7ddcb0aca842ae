// The error vocabulary of the wire: JSON-RPC's standard codes and our domain codes, each with a
// stable string `data.code`. Everything that fails on purpose throws an AlbedoError; the RPC
// layer maps it (and anything else) to a wire error in exactly one place, `toWireError`.

/** JSON-RPC 2.0 reserved codes, plus the LSP-style cancellation code. */
export const RpcCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  RequestCancelled: -32800,
} as const;

/**
 * Domain errors: string code -> numeric wire code (our range, -32000..-32099).
 * Codes are part of the contract: never renumber, only append.
 */
export const DomainCode = {
  unknown_session: -32001,
  session_exists: -32002,
  unknown_row: -32003,
  row_session_mismatch: -32004,
  key_conflict: -32005,
  /** No longer raised: a result with no open call is stored as an orphan (docs/transcript.md). */
  unknown_tool_call: -32006,
  /** No longer raised, likewise: a second result for a call is an orphan. */
  duplicate_tool_result: -32007,
  invalid_image: -32008,
  image_too_large: -32009,
  unknown_payload: -32010,
  not_an_excursion: -32011,
  excursion_returned: -32012,
  message_too_large: -32013,
  not_initialized: -32014,
  busy: -32015,
  summarizer_failed: -32016,
  unknown_strategy: -32017,
  invalid_config: -32018,
  shutting_down: -32019,
  invalid_range: -32020,
  unknown_tool: -32021,
  unknown_prepared: -32022,
  /** Reserved, never thrown: a compaction with nothing to evict answers `compacted: false` with a reason. */
  nothing_to_compact: -32023,
  unknown_extension: -32024,
  /** An assistant row reuses a tool call id whose earlier call in the session has no result yet. */
  duplicate_tool_call: -32025,
  invalid_tool_arguments: -32026,
  /** No lcm node of that id in the session (a node of another session counts as none). */
  unknown_node: -32027,
  /** A provider-wire request to the proxy that cannot be stored as it is (answered with the provider's 400). */
  invalid_proxy_request: -32028,
} as const;

export type DomainCodeName = keyof typeof DomainCode;

/** A deliberate, user-facing failure. `details` must be JSON and must not leak paths or stacks. */
export class AlbedoError extends Error {
  readonly code: DomainCodeName;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: DomainCodeName, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'AlbedoError';
    this.code = code;
    this.details = details;
  }
}

/** A JSON-RPC error object as it goes on the wire. */
export interface WireError {
  code: number;
  message: string;
  data?: { code: string } & Record<string, unknown>;
}

/** Standard-code errors that carry a string code too (e.g. invalid params with zod issues). */
export class RpcError extends Error {
  readonly wire: WireError;
  constructor(wire: WireError) {
    super(wire.message);
    this.name = 'RpcError';
    this.wire = wire;
  }
}

export function rpcError(
  code: (typeof RpcCode)[keyof typeof RpcCode],
  stringCode: string,
  message: string,
  extra?: Record<string, unknown>,
): RpcError {
  return new RpcError({ code, message, data: { code: stringCode, ...extra } });
}

/**
 * The single mapping from a thrown value to a wire error. Unknown throwables become an internal
 * error with a generic message; the caller logs the original.
 */
export function toWireError(err: unknown): { wire: WireError; internal: boolean } {
  if (err instanceof AlbedoError) {
    return {
      wire: { code: DomainCode[err.code], message: err.message, data: { code: err.code, ...err.details } },
      internal: false,
    };
  }
  if (err instanceof RpcError) return { wire: err.wire, internal: false };
  return {
    wire: { code: RpcCode.InternalError, message: 'internal error', data: { code: 'internal_error' } },
    internal: true,
  };
}
