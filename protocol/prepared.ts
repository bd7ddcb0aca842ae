// The prepared request as clients receive it: provider-neutral plain inputs, plus the
// observation `/context` shows. Source references never leave the daemon; a client maps
// these inputs onto its provider's wire format itself.
import { z } from 'zod';
import { JsonObject, StoredJsonObject } from './rows.ts';

export const OutTextPart = z.object({ type: z.literal('text'), text: z.string() });
export const OutImagePart = z.object({
  type: z.literal('image'),
  hash: z.string(),
  media_type: z.string(),
  width: z.number().int(),
  height: z.number().int(),
  /** Base64 bytes, present when the request asked for inline images. */
  data: z.string().optional(),
});
export const OutToolCallPart = z.object({
  type: z.literal('tool_call'),
  id: z.string(),
  name: z.string(),
  arguments: JsonObject,
});
export const OutToolResultPart = z.object({
  type: z.literal('tool_result'),
  call_id: z.string(),
  is_error: z.boolean(),
  content: z.array(z.union([OutTextPart, OutImagePart])),
});
/** Reasoning the target model can read: readable text, and opaque data from its own provider. */
export const OutReasoningPart = z.object({
  type: z.literal('reasoning'),
  text: z.string().optional(),
  encrypted: z.string().optional(),
  provider: z.string().optional(),
});
/** A part the daemon keeps opaque (rows.ts OpaquePart), sent only to the wire that wrote it. */
export const OutOpaquePart = z.object({
  type: z.literal('opaque'),
  wire: z.string(),
  data: JsonObject,
});
export const OutPart = z.union([OutTextPart, OutImagePart, OutToolCallPart, OutToolResultPart, OutReasoningPart, OutOpaquePart]);
export type OutPart = z.infer<typeof OutPart>;

export const PlainInput = z.object({
  role: z.enum(['user', 'assistant', 'tool']),
  content: z.array(OutPart),
});
export type PlainInput = z.infer<typeof PlainInput>;

export const ToolSpec = z.strictObject({
  name: z.string().min(1).max(200),
  description: z.string().max(100_000).default(''),
  input_schema: JsonObject.default({}),
});
export type ToolSpec = z.infer<typeof ToolSpec>;
/** A tool spec as stored with a session's last prompt: its schema reads depth-clamped. */
export const StoredToolSpec = ToolSpec.extend({ input_schema: StoredJsonObject.default({}) });

export const Section = z.object({
  /** system | summary | recap | tail | notes | folds ... in request order. */
  name: z.string(),
  /** Where the section comes from, e.g. "instructions + 2 extensions" or "rows #120-#388". */
  source: z.string(),
  estimated_tokens: z.number().int().nonnegative(),
});
export type Section = z.infer<typeof Section>;

export const CompactionRecord = z.object({
  at: z.number().int(),
  strategy: z.string(),
  forced: z.boolean(),
  ok: z.boolean(),
  duration_ms: z.number().int().nonnegative(),
  /** Summarizer backend that wrote the summary (extractive, client, anthropic, openai). */
  backend: z.string().nullable(),
  /** Estimated tokens sent to and received from the summarizer. */
  summarizer_tokens_in: z.number().int().nonnegative(),
  summarizer_tokens_out: z.number().int().nonnegative(),
  /** Estimated request size before and after. */
  tokens_before: z.number().int().nonnegative(),
  tokens_after: z.number().int().nonnegative(),
  evicted_rows: z.number().int().nonnegative(),
  error: z.string().nullable(),
});
export type CompactionRecord = z.infer<typeof CompactionRecord>;

/** What a compaction would do now (the dry run of `/compact`), computed without a model call or a write. */
export const CompactPlan = z.object({
  /** Rows that would leave the verbatim tail, and their seq range. */
  evict_rows: z.number().int().nonnegative(),
  evict_from_seq: z.number().int().nullable(),
  evict_to_seq: z.number().int().nullable(),
  tail_rows: z.number().int().nonnegative(),
  /** Estimated request size now, and after (the new summary taken at its output cap). */
  estimated_tokens_before: z.number().int().nonnegative(),
  estimated_tokens_after: z.number().int().nonnegative(),
});
export type CompactPlan = z.infer<typeof CompactPlan>;

/**
 * A change that broke the request prefix the provider had cached, and which part of the
 * request it was in: the system prompt, the tools, a compaction, the notes, rows rewritten in
 * place, a model or provider switch, or the provider itself (cached tokens far below the
 * prefix the daemon kept byte-identical).
 */
export const CacheBreak = z.object({
  at: z.number().int(),
  part: z.enum(['system', 'tools', 'compaction', 'notes', 'history', 'model', 'provider']),
  detail: z.string(),
});
export type CacheBreak = z.infer<typeof CacheBreak>;

export const ImageCounts = z.object({
  /** Image parts the request carries (tool results included), and their estimated tokens. */
  count: z.number().int().nonnegative(),
  estimated_tokens: z.number().int().nonnegative(),
  /** Tool-output images of the session elided after compactions, and the payloads that went with them. */
  elided: z.number().int().nonnegative(),
  payloads_deleted: z.number().int().nonnegative(),
  bytes_freed: z.number().int().nonnegative(),
});
export type ImageCounts = z.infer<typeof ImageCounts>;

export const Observation = z.object({
  session: z.string(),
  /** The strategy that prepared the request; null on a host with none installed. */
  strategy: z.string().nullable(),
  model: z.string().nullable(),
  /** Context window in tokens; null when unknown (no automatic compaction). */
  window: z.number().int().positive().nullable(),
  window_source: z.enum(['config', 'catalog', 'unknown']),
  trigger_percent: z.number().int(),
  tail_percent: z.number().int(),
  due: z.boolean(),
  compacted: z.boolean(),
  estimated_input_tokens: z.number().int().nonnegative(),
  provider_input_tokens: z.number().int().nonnegative().nullable(),
  provider_cached_tokens: z.number().int().nonnegative().nullable(),
  /**
   * Measured input tokens per estimated token, learned from `usage.report` for this session and
   * model (1 until the first report). Triggers and tail budgets use estimate × ratio.
   */
  token_ratio: z.number().positive().default(1),
  /** `estimated_input_tokens` × `token_ratio`, rounded up: what the trigger compares. */
  calibrated_input_tokens: z.number().int().nonnegative().optional(),
  prepared_id: z.string().nullable(),
  head: z.number().int().nonnegative(),
  sections: z.array(Section),
  last_compaction: CompactionRecord.nullable(),
  /** Why the last attempt failed or did nothing, when it did. */
  failure: z.string().nullable(),
  /** Consecutive failed automatic compactions; at the latch limit automatic tries stop. */
  auto_failures: z.number().int().nonnegative(),
  latched: z.boolean(),
  notes: z.array(z.string()),
  config_errors: z.array(z.object({ file: z.string(), message: z.string() })),
  /** The session's last few cache breaks, newest last (kept by the daemon per session). */
  cache_breaks: z.array(CacheBreak).default([]),
  /** Images in this request, and what compaction elided of the session's tool-output images so far. */
  images: ImageCounts.default({ count: 0, estimated_tokens: 0, elided: 0, payloads_deleted: 0, bytes_freed: 0 }),
});
export type Observation = z.infer<typeof Observation>;
