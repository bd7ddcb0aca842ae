// Every RPC method's params and result as a zod schema pair: the one place the wire contract
// is written down. The daemon parses params with these; the typed client derives its types
// from them. Methods added by later features join this table.
import { z } from 'zod';
import { CompactPlan, Observation, PlainInput, ToolSpec } from './prepared.ts';
import { JsonObject, RowIn, StoredRow } from './rows.ts';

/** Protocol version spoken by this build; `initialize` refuses others. */
export const PROTOCOL_VERSION = 1;

const SessionId = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9._:@-]+$/, 'session ids use letters, digits and . _ : @ -');
const Seq = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
/** Offsets and limits in graphemes or rows; bounded so arithmetic stays exact. */
const Offset = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

export const MAX_READ_LIMIT = 1_000_000;
export const DEFAULT_READ_LIMIT = 20_000;
export const MAX_GREP_LIMIT = 500;
export const DEFAULT_GREP_LIMIT = 50;
export const MAX_ROWS_LIMIT = 1000;

const Empty = z.strictObject({});

/**
 * A table whose entries are built by their functions on first read, then kept (the getter
 * replaces itself with the value). Keys are own and enumerable, so `Object.keys` and
 * `Object.hasOwn` see every entry without building it.
 */
function lazyTable<T extends Record<string, () => object>>(builders: T): { readonly [K in keyof T]: ReturnType<T[K]> } {
  const table = {};
  for (const [name, build] of Object.entries(builders)) {
    Object.defineProperty(table, name, {
      enumerable: true,
      configurable: true,
      get() {
        const value = build();
        Object.defineProperty(table, name, { value, enumerable: true });
        return value;
      },
    });
  }
  return table as { readonly [K in keyof T]: ReturnType<T[K]> };
}

/** Limits the client's upstream declares for `prepare`; each one wins over the catalog. */
export const Upstream = z.strictObject({
  provider: z.string().min(1).max(100).optional(),
  /** Images one request may carry. */
  max_images: z.number().int().positive().max(100_000).optional(),
  /** Longest image edge kept without downsizing, in pixels (larger ones are downsized, not refused). */
  max_image_edge_px: z.number().int().positive().max(1_000_000).optional(),
  /** Longest image edge accepted at all, in pixels; a larger image is fitted before it goes out. */
  max_image_accepted_edge_px: z.number().int().positive().max(1_000_000).optional(),
  /** Most pixels (width x height) one image may have; a larger image is fitted. */
  max_image_pixels: z.number().int().positive().max(1e12).optional(),
  /** Largest image accepted, in bytes of the image file (not its base64); a larger one is fitted. */
  max_image_bytes: z.number().int().positive().max(1e10).optional(),
  /** Images go up through a files API instead of inline request bytes. */
  uploads_images: z.boolean().optional(),
});
export type Upstream = z.infer<typeof Upstream>;
const Ok = z.strictObject({ ok: z.literal(true) });

/**
 * Parts of the database `daemon.status` sizes: transcript rows (with sessions, tool-call and
 * fork records), their indexes, the search index, payloads, the strategies' state, the engine's
 * bookkeeping (prepared requests, compaction log, prompts), and the rest.
 */
export const STORAGE_PARTS = ['rows', 'row_indexes', 'search_index', 'payloads', 'strategy_state', 'engine', 'other'] as const;
export type StoragePart = (typeof STORAGE_PARTS)[number];

export const StorageSize = z.object({
  /** The main database file, the WAL beside it, and the file's free pages, in bytes. */
  file_bytes: z.number().int(),
  wal_bytes: z.number().int(),
  free_bytes: z.number().int(),
  /**
   * Bytes of the pages of each part, as of `measured_at` (a page walk, reused for minutes); null
   * when no walk was asked for yet (`daemon.status {storage_parts: true}`).
   */
  parts: z.record(z.enum(STORAGE_PARTS), z.number().int()).nullable(),
  /** Milliseconds since the epoch of the page walk the parts come from. */
  measured_at: z.number().int().nullable(),
});
export type StorageSize = z.infer<typeof StorageSize>;

const SessionSummary = z.object({
  session: z.string(),
  /** Newest seq of the session; 0 when it has no rows. */
  head: z.number().int().nonnegative(),
  rows: z.number().int().nonnegative(),
  parent: z.string().nullable(),
  workspace: z.string().nullable(),
  created_at: z.number().int(),
  /** For a session the proxy keeps: the agent as its user-agent names it (`claude-cli/2.1.332`). */
  agent: z.string().nullable().default(null),
  /** For a session the proxy keeps: the `albedo run` it came through (ALBEDO_RUN), if any. */
  run: z.string().nullable().default(null),
});

const GrepMatch = z.object({
  session: z.string(),
  seq: z.number().int().positive(),
  /** A short excerpt of the row's text around the first match. */
  preview: z.string(),
});

export const TranscriptReadParams = z.strictObject({
  session: SessionId,
  /** First grapheme to return, counted over the rendered rows and their separators. */
  offset: Offset.default(0),
  /** Graphemes to return at most. */
  limit: z.number().int().positive().max(MAX_READ_LIMIT).default(DEFAULT_READ_LIMIT),
  /** Inclusive seq range to render; defaults to the whole session. */
  from_seq: Seq.optional(),
  to_seq: Seq.optional(),
});
export const TranscriptReadResult = z.object({
  text: z.string(),
  offset: z.number().int().nonnegative(),
  /** Where the next page starts; null once the end was reached. */
  next_offset: z.number().int().nonnegative().nullable(),
});

export const TranscriptGrepParams = z.strictObject({
  /** Literal text, matched Unicode case-insensitively. */
  pattern: z.string().min(1).max(1000),
  /** Limit the search to one session; without it every session is searched. */
  session: SessionId.optional(),
  /** Only sessions opened with this workspace (cross-session searches). */
  workspace: z.string().min(1).max(4096).optional(),
  /** Matching rows to skip. */
  offset: Offset.default(0),
  limit: z.number().int().positive().max(MAX_GREP_LIMIT).default(DEFAULT_GREP_LIMIT),
});
export const TranscriptGrepResult = z.object({
  /** Every matching row, not only the page. */
  total: z.number().int().nonnegative(),
  offset: z.number().int().nonnegative(),
  next_offset: z.number().int().nonnegative().nullable(),
  matches: z.array(GrepMatch),
});

/** An lcm summary node's id (unique across sessions; each tool only answers its own session's). */
const NodeId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
export const MAX_NODES_LIMIT = 500;
export const DEFAULT_NODES_LIMIT = 50;

export const LcmListParams = z.strictObject({
  session: SessionId,
  /** Nodes to skip, in list order (first_seq, then node id). */
  offset: Offset.default(0),
  limit: z.number().int().positive().max(MAX_NODES_LIMIT).default(DEFAULT_NODES_LIMIT),
});
export const LcmListResult = z.object({
  /** Every stored node of the session, not only the page. */
  total: z.number().int().nonnegative(),
  offset: z.number().int().nonnegative(),
  next_offset: z.number().int().nonnegative().nullable(),
  nodes: z.array(
    z.object({
      node: z.number().int().positive(),
      /** 0 for a leaf over source rows; a parent is one more than its deepest child. */
      depth: z.number().int().nonnegative(),
      /** Inclusive seq range of the source rows the node stands for. */
      first_seq: z.number().int().positive(),
      last_seq: z.number().int().positive(),
      /** Child node ids, in order; empty for a leaf. */
      children: z.array(z.number().int().positive()),
      /** No parent: the node is one of the summaries a compacted request shows. */
      frontier: z.boolean(),
      /** Estimated tokens of the summary as a request input. */
      estimated_tokens: z.number().int().nonnegative(),
      /** The start of the summary, on one line. */
      preview: z.string(),
    }),
  ),
});

export const LcmGrepParams = z.strictObject({
  session: SessionId,
  /** Literal text, matched Unicode case-insensitively. */
  pattern: z.string().min(1).max(1000),
  /** Search only this node's source rows and the summaries of its subtree. */
  node: NodeId.optional(),
  /** Matches to skip, in each of the two lists. */
  offset: Offset.default(0),
  limit: z.number().int().positive().max(MAX_GREP_LIMIT).default(DEFAULT_GREP_LIMIT),
});
const LcmMatchPage = <T extends z.ZodType>(match: T) =>
  z.object({
    total: z.number().int().nonnegative(),
    next_offset: z.number().int().nonnegative().nullable(),
    matches: z.array(match),
  });
export const LcmGrepResult = z.object({
  /** Raw transcript rows, in seq order. */
  source: LcmMatchPage(
    z.object({
      seq: z.number().int().positive(),
      /** The leaf covering the row (the smallest node to expand), or null for rows no node covers yet. */
      node: z.number().int().positive().nullable(),
      preview: z.string(),
    }),
  ),
  /** Node summaries, in list order (first_seq, then node id). */
  summaries: LcmMatchPage(z.object({ node: z.number().int().positive(), preview: z.string() })),
});

export const LcmDescribeParams = z.strictObject({ session: SessionId, node: NodeId });
export const LcmDescribeResult = z.object({
  node: z.number().int().positive(),
  depth: z.number().int().nonnegative(),
  first_seq: z.number().int().positive(),
  last_seq: z.number().int().positive(),
  parent: z.number().int().positive().nullable(),
  children: z.array(z.number().int().positive()),
  frontier: z.boolean(),
  summary: z.string(),
  /** Which summarizer wrote the summary; null when not recorded. */
  backend: z.string().nullable(),
});

export const LcmExpandParams = z.strictObject({
  session: SessionId,
  node: NodeId,
  /** First grapheme to return, counted over the rendered rows and their separators. */
  offset: Offset.default(0),
  limit: z.number().int().positive().max(MAX_READ_LIMIT).default(DEFAULT_READ_LIMIT),
});

/**
 * The method table: name -> { params, result }. Each entry is built on first use and kept: zod
 * takes tens of microseconds per schema, and a process that speaks a few methods (the CLI's
 * `albedo status` speaks two) should not build all of them at load (bench section `startup`).
 */
export const methods = lazyTable({
  initialize: () => ({
    params: z.strictObject({
      protocol: z.number().int(),
      client: z.strictObject({ name: z.string().min(1).max(200), version: z.string().max(100) }),
      capabilities: z.strictObject({ summarize: z.boolean().optional() }).default({}),
    }),
    result: z.object({
      protocol: z.number().int(),
      server: z.object({ name: z.string(), version: z.string() }),
    }),
  }),
  'session.open': () => ({
    params: z.strictObject({
      /** Open (or create) this id; without it a fresh id is made. */
      session: SessionId.optional(),
      /** Folder the agent works in; cross-session grep can filter on it. */
      workspace: z.string().min(1).max(4096).optional(),
      /**
       * The session this one belongs to (a subagent's transcript under its main session); it
       * must exist. Recorded when the session is created, or when it had no parent yet.
       */
      parent: SessionId.optional(),
    }),
    result: z.object({ session: z.string(), created: z.boolean() }),
  }),
  'session.list': () => ({
    params: Empty.default({}),
    result: z.object({ sessions: z.array(SessionSummary) }),
  }),
  'session.delete': () => ({
    params: z.strictObject({ session: SessionId }),
    result: z.object({ deleted: z.boolean() }),
  }),
  'session.fork': () => ({
    params: z.strictObject({
      session: SessionId,
      /** Copy rows up to and including this seq of the parent; default its head. */
      at: Seq.optional(),
      /** Write an excursion marker in the parent; the branch reports back with session.return. */
      excursion: z.boolean().default(false),
      /** Id for the branch; default a fresh one. */
      branch: SessionId.optional(),
    }),
    result: z.object({
      session: z.string(),
      /** Rows copied into the branch. */
      rows: z.number().int().nonnegative(),
      /** Seq of the parent's excursion marker, when `excursion` was set. */
      marker_seq: z.number().int().positive().nullable(),
    }),
  }),
  'session.return': () => ({
    params: z.strictObject({ branch: SessionId, outcome: z.string().max(1_000_000) }),
    result: z.object({ session: z.string(), seq: z.number().int().positive() }),
  }),
  'transcript.append': () => ({
    params: z.strictObject({ session: SessionId, rows: z.array(RowIn).min(1).max(10_000) }),
    result: z.object({
      /** Seq of each row, in the order sent; a retried key answers with its stored seq. */
      seqs: z.array(z.number().int().positive()),
      head: z.number().int().nonnegative(),
    }),
  }),
  'transcript.rows': () => ({
    params: z.strictObject({
      session: SessionId,
      /** Rows with a seq after this one. */
      after: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).default(0),
      limit: z.number().int().positive().max(MAX_ROWS_LIMIT).default(100),
    }),
    result: z.object({ rows: z.array(StoredRow), next_after: z.number().int().nullable() }),
  }),
  transcript_read: () => ({ params: TranscriptReadParams, result: TranscriptReadResult }),
  transcript_grep: () => ({ params: TranscriptGrepParams, result: TranscriptGrepResult }),
  lcm_list: () => ({ params: LcmListParams, result: LcmListResult }),
  lcm_grep: () => ({ params: LcmGrepParams, result: LcmGrepResult }),
  lcm_describe: () => ({ params: LcmDescribeParams, result: LcmDescribeResult }),
  /** The node's source rows rendered as transcript_read renders them. */
  lcm_expand: () => ({ params: LcmExpandParams, result: TranscriptReadResult }),
  'tools.list': () => ({
    /** Without a session: the tools the global selection enables (`albedo mcp` before its session's first request). */
    params: z.strictObject({ session: SessionId.optional() }),
    result: z.object({
      tools: z.array(
        z.object({ name: z.string(), description: z.string(), input_schema: JsonObject }),
      ),
    }),
  }),
  'tools.call': () => ({
    params: z.strictObject({
      session: SessionId,
      name: z.string().min(1),
      arguments: JsonObject.default({}),
    }),
    result: z.object({ name: z.string(), result: z.unknown() }),
  }),
  'payload.get': () => ({
    params: z.strictObject({ hash: z.string().regex(/^[0-9a-f]{64}$/) }),
    result: z.object({
      hash: z.string(),
      media_type: z.string(),
      width: z.number().int(),
      height: z.number().int(),
      /** Base64 of the stored bytes. */
      data: z.string(),
    }),
  }),
  'daemon.status': () => ({
    params: z
      .strictObject({
        /** Walk the database's pages for `storage.parts` when the last walk is old (reads the whole file, off the event loop). */
        storage_parts: z.boolean().default(false),
      })
      .default({ storage_parts: false }),
    result: z.object({
      version: z.string(),
      pid: z.number().int(),
      home: z.string(),
      uptime_ms: z.number().int(),
      sessions: z.number().int(),
      loaded_kernels: z.number().int(),
      connections: z.number().int(),
      config_errors: z.array(z.object({ file: z.string(), message: z.string() })),
      /** Stored image payloads (uploads, fitted copies, snapcompact frames): how many, and their bytes. */
      payloads: z.object({ count: z.number().int().nonnegative(), bytes: z.number().int().nonnegative() }),
      /** The process's memory (bytes), and what the connections hold of it. */
      memory: z.object({
        rss_bytes: z.number().int(),
        /** Live and not yet collected JS objects (strings of queued replies among them). */
        heap_used_bytes: z.number().int(),
        /** Memory outside the JS heap: buffers (partial lines), SQLite is not counted here. */
        external_bytes: z.number().int(),
        /** Replies made for clients and not yet read by them, all connections together. */
        queued_output_bytes: z.number().int(),
        /** Unfinished incoming lines held, all connections together, and their bound. */
        partial_line_bytes: z.number().int(),
        partial_line_budget_bytes: z.number().int(),
      }),
      /** The database's size on disk and how it divides (storage/storage-size.ts). */
      storage: StorageSize,
      /** The trigram index behind transcript_grep and lcm_grep, filled in idle time. */
      search: z.object({
        /** Whether idle time fills it (ALBEDO_SEARCH_INDEXER). */
        indexer: z.boolean(),
        /** Rows appended that it has not reached yet: a search reads them one by one. 0 once it has caught up. */
        rows_behind: z.number().int().nonnegative(),
      }),
      /** The provider-compatible HTTP proxy: whether it listens, and the base URLs agents are given. */
      proxy: z.object({
        listening: z.boolean(),
        port: z.number().int().nullable(),
        /** Why it is not listening (turned off, or the port is taken). */
        error: z.string().nullable(),
        /** `ANTHROPIC_BASE_URL` for agents (carries the secret token). */
        anthropic_base_url: z.string().nullable(),
        openai_base_url: z.string().nullable(),
      }),
    }),
  }),
  'daemon.shutdown': () => ({ params: Empty.default({}), result: Ok }),
  prepare: () => ({
    params: z.strictObject({
      session: SessionId,
      /** Model id the request goes to; the catalog supplies its window and modalities. */
      model: z.string().min(1).max(200),
      /** Provider the request goes to; routes encrypted reasoning (the catalog's when absent). */
      provider: z.string().min(1).max(100).optional(),
      /** What the client's upstream accepts; the catalog fills in what is not declared. */
      upstream: Upstream.optional(),
      /** The agent's system prompt; never compacted. */
      instructions: z.string().max(10_000_000).default(''),
      /** The agent's own tools; their schemas count toward the pinned prompt. */
      tools: z.array(ToolSpec).max(1000).default([]),
      /** Inline image bytes as base64, or send hashes only (fetch with payload.get). */
      images: z.enum(['inline', 'ref']).default('ref'),
      /** Compact now even if not due. */
      force: z.boolean().default(false),
    }),
    result: z.object({
      /**
       * Names this request for usage.report. A prepare that would send exactly what the one
       * before it sent (nothing appended, nothing else changed) answers under that one's id.
       */
      prepared_id: z.string(),
      head: z.number().int().nonnegative(),
      system: z.string(),
      inputs: z.array(PlainInput),
      tools: z.array(ToolSpec),
      compacted: z.boolean(),
      observation: Observation,
    }),
  }),
  'usage.report': () => ({
    params: z.strictObject({
      session: SessionId,
      prepared_id: z.string().min(1).max(100),
      input_tokens: z.number().int().nonnegative().max(1e9),
      cached_tokens: z.number().int().nonnegative().max(1e9).optional(),
    }),
    result: Ok,
  }),
  compact: () => ({
    params: z.strictObject({
      session: SessionId,
      /** Make this strategy the session's own first, as /extensions would. */
      strategy: z.string().min(1).max(100).optional(),
      /** Extra instruction for the summarizer. */
      focus: z.string().max(10_000).optional(),
      /** Say what a compaction would evict, writing nothing. */
      dry_run: z.boolean().default(false),
    }),
    result: z.object({
      compacted: z.boolean(),
      strategy: z.string().nullable(),
      /** Why nothing was compacted, when nothing was. */
      reason: z.string().nullable(),
      /** For dry runs: what would be evicted and the estimated result. */
      plan: CompactPlan.nullable(),
      observation: Observation,
    }),
  }),
  context: () => ({
    params: z.strictObject({ session: SessionId, format: z.enum(['json', 'text']).default('json') }),
    result: z.object({ observation: Observation, text: z.string().nullable() }),
  }),
  /** The snapcompact frames the session's next request would show (bytes through payload.get). */
  frames: () => ({
    params: z.strictObject({ session: SessionId, model: z.string().min(1).max(200).optional() }),
    result: z.object({
      model: z.string().nullable(),
      frames: z.array(z.object({ hash: z.string(), width: z.number().int(), height: z.number().int(), caption: z.string() })),
    }),
  }),
  'extensions.list': () => ({
    params: z.strictObject({ session: SessionId.optional() }),
    result: z.object({
      strategy: z.string().nullable(),
      extensions: z.array(
        z.object({
          name: z.string(),
          kind: z.string(),
          enabled: z.boolean(),
          available: z.boolean(),
          default_enabled: z.boolean(),
          /** Who decided: the built-in default, extensions.json, or this session. */
          chosen_by: z.enum(['default', 'global', 'session']),
          description: z.string(),
        }),
      ),
    }),
  }),
  'extensions.select': () => ({
    params: z.strictObject({
      /** Without a session the choice is global and is written to extensions.json. */
      session: SessionId.optional(),
      enable: z.array(z.string().min(1).max(100)).max(50).default([]),
      disable: z.array(z.string().min(1).max(100)).max(50).default([]),
    }),
    result: z.object({ strategy: z.string().nullable(), enabled: z.array(z.string()) }),
  }),
  reload: () => ({
    params: Empty.default({}),
    result: z.object({ version: z.number().int(), config_errors: z.array(z.object({ file: z.string(), message: z.string() })) }),
  }),
  command: () => ({
    params: z.strictObject({ session: SessionId.optional(), line: z.string().min(1).max(100_000) }),
    result: z.object({
      /** The command that ran: compact, context, extensions, reload. */
      command: z.string(),
      /** The JSON result of the method the command maps to. */
      result: z.unknown(),
      /** The same, rendered for a terminal. */
      text: z.string(),
    }),
  }),
});

export type Methods = typeof methods;
export type MethodName = keyof Methods;
export type ParamsIn<M extends MethodName> = z.input<Methods[M]['params']>;
export type Params<M extends MethodName> = z.output<Methods[M]['params']>;
export type Result<M extends MethodName> = z.output<Methods[M]['result']>;

export function isMethodName(name: string): name is MethodName {
  return Object.hasOwn(methods, name);
}

/** The daemon's reverse request to a client that declared `capabilities.summarize`. */
export const reverseMethods = lazyTable({
  summarize: () => ({
    params: z.object({
      session: z.string(),
      purpose: z.string(),
      system: z.string(),
      prompt: z.string(),
      max_output_tokens: z.number().int().positive(),
    }),
    result: z.object({ text: z.string() }),
  }),
});
export type ReverseMethods = typeof reverseMethods;
export type ReverseMethodName = keyof ReverseMethods;
