// Transcript rows as clients send them and as the daemon stores and returns them. These zod
// schemas are the single source of the row types; storage re-parses its JSON columns with the
// stored variants so a corrupt row is reported instead of trusted.
import { z } from 'zod';
import { MAX_JSON_DEPTH, clampJsonDepth, tooDeepPath } from './json-depth.ts';

/** Longest client row key, in UTF-16 code units. */
export const MAX_KEY_LENGTH = 200;

/**
 * A JSON object passed through as parsed. z.record rebuilds objects by assignment, which turns
 * an own "__proto__" key into a prototype and silently drops it; this keeps every key.
 */
const AnyJsonObject = z.custom<Record<string, unknown>>(
  (v) => typeof v === 'object' && v !== null && !Array.isArray(v),
  'expected a JSON object',
);

/**
 * A JSON object from a client, nesting at most MAX_JSON_DEPTH levels (checked iteratively): a
 * deeper one is refused with the path of its first over-deep member, before anything walks it.
 */
export const JsonObject = AnyJsonObject.superRefine((v, ctx) => {
  const path = tooDeepPath(v, MAX_JSON_DEPTH);
  if (path !== null) {
    ctx.addIssue({ code: 'custom', path, message: `nested deeper than ${MAX_JSON_DEPTH} levels (the limit is ${MAX_JSON_DEPTH})` });
  }
});

/**
 * A stored JSON object. Rows written before the depth bound may nest deeper; such a value reads
 * with its over-deep parts as a marker (see clampJsonDepth), so no reader or renderer meets it.
 */
export const StoredJsonObject = AnyJsonObject.transform((v) => clampJsonDepth(v));

export const TextPart = z.strictObject({ type: z.literal('text'), text: z.string() });

/** An image as a client uploads it: base64 bytes, or a reference to a payload already stored. */
export const ImagePartIn = z.union([
  z.strictObject({
    type: z.literal('image'),
    media_type: z.enum(['image/png', 'image/jpeg', 'image/gif', 'image/webp']),
    data: z.string().min(1).regex(/^[A-Za-z0-9+/\r\n]*={0,2}\s*$/, 'data must be base64'),
  }),
  z.strictObject({ type: z.literal('image'), hash: z.string().regex(/^[0-9a-f]{64}$/) }),
]);

/** A stored image: content-addressed, dimensions in pixels. The bytes live in `payloads`. */
export const ImagePart = z.strictObject({
  type: z.literal('image'),
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  media_type: z.string(),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  /** Set once compaction elided the payload; the row keeps its text marker. */
  elided: z.boolean().optional(),
});

/**
 * A reasoning item. `text` is a readable summary; `encrypted` is opaque and only the provider
 * that wrote it can read it back, so projection omits it for any other provider.
 */
export const ReasoningPart = z.strictObject({
  type: z.literal('reasoning'),
  provider: z.string().min(1).optional(),
  text: z.string().optional(),
  encrypted: z.string().optional(),
});

export const ToolCallPart = z.strictObject({
  type: z.literal('tool_call'),
  id: z.string().min(1).max(MAX_KEY_LENGTH),
  name: z.string().min(1).max(200),
  arguments: JsonObject,
});
/** A tool call as stored: its arguments read depth-clamped (see StoredJsonObject). */
const StoredToolCallPart = ToolCallPart.extend({ arguments: StoredJsonObject });

/**
 * Content the daemon does not model, kept as the agent's wire sent it (the proxy's server-tool
 * blocks, documents, redacted thinking, block types it has never seen). It goes back byte for
 * byte to the wire that wrote it while its row is in the verbatim tail; everything else
 * (summarizers, search, other providers) sees only `label`.
 */
export const OpaquePart = z.strictObject({
  type: z.literal('opaque'),
  /** The wire format `data` is in: `anthropic` (a Messages content block). */
  wire: z.string().min(1).max(64),
  /** One line naming what it is, e.g. "redacted_thinking" or "document (report.pdf)". */
  label: z.string().min(1).max(200),
  data: JsonObject,
});
const StoredOpaquePart = OpaquePart.extend({ data: StoredJsonObject });
export type OpaquePart = z.infer<typeof OpaquePart>;

export const UserOrigin = z.enum(['user', 'notes', 'mail']);
export type UserOrigin = z.infer<typeof UserOrigin>;

const key = z.string().min(1).max(MAX_KEY_LENGTH).optional();

export const UserRowIn = z.strictObject({
  kind: z.literal('user'),
  origin: UserOrigin.default('user'),
  key,
  content: z.array(z.union([TextPart, ImagePartIn, OpaquePart])).min(1),
});

export const AssistantRowIn = z.strictObject({
  kind: z.literal('assistant'),
  key,
  /** Provider and model that produced the turn, when the client knows them. */
  provider: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  content: z.array(z.union([TextPart, ReasoningPart, ToolCallPart, OpaquePart])).min(1),
});

export const ToolResultRowIn = z.strictObject({
  kind: z.literal('tool_result'),
  key,
  call_id: z.string().min(1).max(MAX_KEY_LENGTH),
  is_error: z.boolean().default(false),
  content: z.array(z.union([TextPart, ImagePartIn])),
});

/** What `transcript.append` accepts. Notices are written by the daemon only. */
export const RowIn = z.discriminatedUnion('kind', [UserRowIn, AssistantRowIn, ToolResultRowIn]);
export type RowIn = z.infer<typeof RowIn>;
export type TextPart = z.infer<typeof TextPart>;
export type ImagePartIn = z.infer<typeof ImagePartIn>;
export type ImagePart = z.infer<typeof ImagePart>;
export type ReasoningPart = z.infer<typeof ReasoningPart>;
export type ToolCallPart = z.infer<typeof ToolCallPart>;

/** Daemon-written notices. Each is a row of kind `notice` with one of these bodies. */
export const ImageFitNotice = z.strictObject({
  notice: z.literal('image_fit'),
  /** The image as it was uploaded. */
  from_hash: z.string().regex(/^[0-9a-f]{64}$/),
  /** The fitted replacement; every earlier occurrence of `from_hash` reads as this one. */
  to: ImagePart,
  reason: z.string(),
});
export const CapabilitiesChangedNotice = z.strictObject({
  notice: z.literal('capabilities_changed'),
  /** The extension context the model should now know of. */
  context: z.string(),
  /**
   * The client's instructions the model should now know of, when they differ from the ones its
   * pinned system prompt carries (a restart found them changed); absent otherwise.
   */
  instructions: z.string().optional(),
});
export const ExcursionNotice = z.strictObject({
  notice: z.literal('excursion'),
  /** The branch session that went on the excursion. */
  branch: z.string(),
});
export const ExcursionReturnNotice = z.strictObject({
  notice: z.literal('excursion_return'),
  branch: z.string(),
  /** Seq of the parent's excursion marker this outcome answers. */
  marker_seq: z.number().int().positive(),
  outcome: z.string(),
});
export const Notice = z.discriminatedUnion('notice', [
  ImageFitNotice,
  CapabilitiesChangedNotice,
  ExcursionNotice,
  ExcursionReturnNotice,
]);
export type Notice = z.infer<typeof Notice>;
export type NoticeKind = Notice['notice'];

/** Row content as stored (images by hash, never inline bytes). */
export const StoredUserBody = z.strictObject({
  kind: z.literal('user'),
  origin: UserOrigin,
  content: z.array(z.union([TextPart, ImagePart, StoredOpaquePart])),
});
export const StoredAssistantBody = z.strictObject({
  kind: z.literal('assistant'),
  provider: z.string().optional(),
  model: z.string().optional(),
  content: z.array(z.union([TextPart, ReasoningPart, StoredToolCallPart, StoredOpaquePart])),
});
export const StoredToolResultBody = z.strictObject({
  kind: z.literal('tool_result'),
  call_id: z.string(),
  is_error: z.boolean(),
  content: z.array(z.union([TextPart, ImagePart])),
  /** Set when no open call had this id: kept as it came, never settled, sent as text. */
  orphan: z.literal(true).optional(),
});
export const StoredNoticeBody = z.strictObject({ kind: z.literal('notice'), body: Notice });
export const StoredBody = z.discriminatedUnion('kind', [
  StoredUserBody,
  StoredAssistantBody,
  StoredToolResultBody,
  StoredNoticeBody,
]);
export type StoredBody = z.infer<typeof StoredBody>;

/** Every user input and every image-fit notice starts a compaction unit. */
export const RowClass = z.enum(['user', 'image_fit', 'other']);
export type RowClass = z.infer<typeof RowClass>;

/** A transcript row as reads return it. `seq` is the global append-only identity. */
export const StoredRow = z.object({
  session: z.string(),
  seq: z.number().int().positive(),
  row_class: RowClass,
  key: z.string().nullable(),
  /** Milliseconds since the epoch when the row was first appended. */
  created_at: z.number().int(),
  body: StoredBody,
});
export type StoredRow = z.infer<typeof StoredRow>;
