// The Anthropic Messages wire as the proxy reads and writes it: the request schema (only what
// the proxy looks at is checked; every other field passes through untouched), one message to
// transcript rows, the prepared request back to `messages`, and the proxy's cache markers.
// Which rows are new, sessions and forwarding are reconcile.ts's, identity.ts's and upstream.ts's.
import { z } from 'zod';
import type { OutPart, PlainInput } from '../../protocol/prepared.ts';
import type { ImagePartIn, RowIn, TextPart } from '../../protocol/rows.ts';
import { OpaquePart } from '../../protocol/rows.ts';
import { canonicalJson } from './client-prompt.ts';
import { FromParts } from './from-parts.ts';
import { HistoryChecker } from './validated.ts';
import { isRecord } from '../../protocol/is-record.ts';

export const WIRE = 'anthropic';

const Block = z.looseObject({ type: z.string() });
export type WireBlock = z.infer<typeof Block>;

const WireMessage = z.looseObject({
  role: z.enum(['user', 'assistant', 'system']),
  content: z.union([z.string(), z.array(Block)]),
});
export type WireMessage = z.infer<typeof WireMessage>;

/** A Messages request body: what the proxy reads. Unknown fields are kept (looseObject). */
export const MessagesRequest = z.looseObject({
  model: z.string().min(1).max(200),
  max_tokens: z.number().int().positive().optional(),
  messages: z.array(WireMessage),
  system: z.union([z.string(), z.array(Block)]).optional(),
  tools: z.array(z.looseObject({ name: z.string() })).optional(),
  stream: z.boolean().optional(),
  metadata: z.looseObject({ user_id: z.string().optional() }).optional(),
});
export type MessagesRequest = z.infer<typeof MessagesRequest>;

/** MessagesRequest with its messages checked one at a time (validated.ts). */
export const messagesRequest = new HistoryChecker<MessagesRequest, WireMessage>(MessagesRequest.extend({ messages: z.array(z.unknown()) }), 'messages', WireMessage);

const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
type ImageType = (typeof IMAGE_TYPES)[number];
function isImageType(s: string): s is ImageType {
  return (IMAGE_TYPES as readonly string[]).includes(s);
}

function onlyKeys(b: Record<string, unknown>, keys: readonly string[]): boolean {
  for (const k of Object.keys(b)) if (k !== 'cache_control' && !keys.includes(k)) return false;
  return true;
}

/** The block without its cache marker: what is stored and hashed. */
function unmarked(b: WireBlock): Record<string, unknown> {
  if (!('cache_control' in b)) return b;
  const { cache_control: _drop, ...rest } = b;
  return rest;
}

function opaque(b: WireBlock): z.infer<typeof OpaquePart> {
  const data = unmarked(b);
  const name = typeof b.name === 'string' ? ` ${b.name}` : typeof b.title === 'string' ? ` (${b.title})` : '';
  return { type: 'opaque', wire: WIRE, label: `${b.type}${name}`.slice(0, 200), data };
}

/** A text or image block as a row part; anything with fields the daemon does not model stays opaque. */
function mediaPart(b: WireBlock): TextPart | ImagePartIn | z.infer<typeof OpaquePart> {
  if (b.type === 'text' && typeof b.text === 'string' && onlyKeys(b, ['type', 'text'])) return { type: 'text', text: b.text };
  if (b.type === 'image' && onlyKeys(b, ['type', 'source']) && isRecord(b.source) && b.source.type === 'base64' && typeof b.source.data === 'string' && typeof b.source.media_type === 'string' && isImageType(b.source.media_type)) {
    return { type: 'image', media_type: b.source.media_type, data: b.source.data };
  }
  return opaque(b);
}

function blocksOf(content: WireMessage['content']): WireBlock[] {
  return typeof content === 'string' ? [{ type: 'text', text: content }] : content;
}

/** A tool result's content as row parts: text and images; other blocks as their JSON text. */
function resultParts(content: unknown): Array<TextPart | ImagePartIn> {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) return [{ type: 'text', text: JSON.stringify(content) }];
  const out: Array<TextPart | ImagePartIn> = [];
  for (const raw of content) {
    const parsed = Block.safeParse(raw);
    if (!parsed.success) continue;
    const p = mediaPart(parsed.data);
    out.push(p.type === 'opaque' ? { type: 'text', text: JSON.stringify(p.data) } : p);
  }
  return out;
}

/**
 * The rows one conversation message becomes, without keys (reconcile.ts adds them). A user
 * message's tool results come first, each its own row, then one user row with the rest; an
 * assistant message is one row. A message with nothing storable becomes no row.
 */
export function messageRows(m: WireMessage): RowIn[] {
  const blocks = blocksOf(m.content);
  if (m.role === 'assistant') {
    const content: Extract<RowIn, { kind: 'assistant' }>['content'] = [];
    for (const b of blocks) {
      if (b.type === 'text' && typeof b.text === 'string' && onlyKeys(b, ['type', 'text'])) {
        if (b.text !== '') content.push({ type: 'text', text: b.text });
      } else if (b.type === 'thinking' && typeof b.thinking === 'string' && onlyKeys(b, ['type', 'thinking', 'signature'])) {
        content.push({ type: 'reasoning', provider: WIRE, text: b.thinking, ...(typeof b.signature === 'string' && b.signature !== '' ? { encrypted: b.signature } : {}) });
      } else if (b.type === 'tool_use' && typeof b.id === 'string' && typeof b.name === 'string' && b.id.length > 0 && b.name.length > 0) {
        content.push({ type: 'tool_call', id: b.id, name: b.name, arguments: isRecord(b.input) ? b.input : {} });
      } else {
        content.push(opaque(b));
      }
    }
    return content.length === 0 ? [] : [{ kind: 'assistant', provider: WIRE, content }];
  }
  const rows: RowIn[] = [];
  const rest: Extract<RowIn, { kind: 'user' }>['content'] = [];
  for (const b of blocks) {
    if (b.type === 'tool_result' && typeof b.tool_use_id === 'string' && b.tool_use_id.length > 0) {
      rows.push({ kind: 'tool_result', call_id: b.tool_use_id, is_error: b.is_error === true, content: resultParts(b.content) });
    } else {
      const p = mediaPart(b);
      if (p.type !== 'text' || p.text !== '') rest.push(p);
    }
  }
  if (rest.length > 0) rows.push({ kind: 'user', origin: 'user', content: rest });
  return rows;
}

/** The client's text of a message, for fingerprints and side-request checks. */
export function messageText(m: WireMessage): string {
  return blocksOf(m.content)
    .map((b) => (typeof b.text === 'string' ? b.text : ''))
    .join('\n');
}

/** The system prompt's text (a string, or its text blocks joined), for estimates and fingerprints. */
export function systemText(system: MessagesRequest['system']): string {
  if (system === undefined) return '';
  if (typeof system === 'string') return system;
  return system.map((b) => (typeof b.text === 'string' ? b.text : '')).join('\n');
}

// ---------------------------------------------------------------------------------------------
// The prepared request back to Messages

/** Image bytes for a prepared image part, by hash (base64); undefined when gone. */
export type ImageBytes = (hash: string) => string | undefined;

function outBlock(p: Exclude<OutPart, { type: 'tool_result' }>, image: ImageBytes): WireBlock | null {
  switch (p.type) {
    case 'text':
      return { type: 'text', text: p.text };
    case 'image': {
      const data = p.data ?? image(p.hash);
      return data === undefined ? { type: 'text', text: `[image ${p.hash.slice(0, 8)} ${p.width}x${p.height} is no longer available]` } : { type: 'image', source: { type: 'base64', media_type: p.media_type, data } };
    }
    case 'tool_call':
      return { type: 'tool_use', id: p.id, name: p.name, input: p.arguments };
    case 'reasoning':
      // Anthropic takes back only signed thinking; a summary written elsewhere is left out.
      return p.encrypted !== undefined && p.provider === WIRE ? { type: 'thinking', thinking: p.text ?? '', signature: p.encrypted } : null;
    case 'opaque':
      return { ...p.data, type: typeof p.data.type === 'string' ? p.data.type : 'unknown' };
  }
}

/** Each part's block, made once (from-parts.ts). */
const blocksOfParts = new FromParts<WireBlock>();

/**
 * Prepared inputs as Messages `messages`: tool outputs become tool_result blocks in user
 * messages, and consecutive inputs of one role are merged into one message, tool results first.
 */
export function preparedMessages(inputs: readonly PlainInput[], image: ImageBytes): WireMessage[] {
  const out: Array<{ role: 'user' | 'assistant'; content: WireBlock[] }> = [];
  for (const input of inputs) {
    const role = input.role === 'assistant' ? 'assistant' : 'user';
    const blocks: WireBlock[] = [];
    for (const p of input.content) {
      const b = blocksOfParts.get([p], (volatile) => {
        const seen: ImageBytes = (hash) => {
          const data = image(hash);
          if (data === undefined) volatile();
          return data;
        };
        if (p.type !== 'tool_result') return outBlock(p, seen);
        const content = p.content.map((c) => outBlock(c, seen)).filter((x): x is WireBlock => x !== null);
        return { type: 'tool_result', tool_use_id: p.call_id, content, ...(p.is_error ? { is_error: true } : {}) };
      });
      if (b !== null) blocks.push(b);
    }
    if (blocks.length === 0) continue;
    const last = out[out.length - 1];
    if (last !== undefined && last.role === role) {
      // A user message opens with its tool results.
      const results = blocks.filter((b) => b.type === 'tool_result');
      if (results.length > 0 && role === 'user') {
        const firstOther = last.content.findIndex((b) => b.type !== 'tool_result');
        const at = firstOther === -1 ? last.content.length : firstOther;
        last.content.splice(at, 0, ...results);
        last.content.push(...blocks.filter((b) => b.type !== 'tool_result'));
      } else last.content.push(...blocks);
    } else out.push({ role, content: blocks });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Cache markers

type Ttl = '5m' | '1h';
const MAX_MARKERS = 4;

function ttlOf(b: unknown): Ttl | null {
  if (!isRecord(b) || !isRecord(b.cache_control)) return null;
  return b.cache_control.ttl === '1h' ? '1h' : '5m';
}

function markersIn(blocks: unknown): Ttl[] {
  if (!Array.isArray(blocks)) return [];
  return blocks.map(ttlOf).filter((t): t is Ttl => t !== null);
}

/** Every cache marker in the client's messages (which the proxy replaces). */
function messageMarkers(messages: readonly WireMessage[]): Ttl[] {
  return messages.flatMap((m) => (typeof m.content === 'string' ? [] : markersIn(m.content)));
}

function stripMarkers(m: WireMessage): WireMessage {
  if (typeof m.content === 'string' || !m.content.some((b) => 'cache_control' in b)) return m;
  return { ...m, content: m.content.map((b) => unmarked(b) as WireBlock) };
}

/**
 * Blocks the proxy may put a marker on: the ones it models. Thinking blocks cannot carry one,
 * and an opaque block goes back exactly as the agent sent it.
 */
const MARKABLE = new Set(['text', 'image', 'tool_use', 'tool_result']);

/** The last block of a message that can carry the proxy's marker. */
function markable(m: WireMessage): WireBlock | undefined {
  if (typeof m.content === 'string') return undefined;
  for (let i = m.content.length - 1; i >= 0; i--) {
    const b = m.content[i]!;
    if (MARKABLE.has(b.type)) return b;
  }
  return undefined;
}

/**
 * The proxy's cache markers inside `messages`: the client's are removed (after compaction
 * they would sit at meaningless places), and new ones go on the newest message and on the end
 * of the first one (the summary and notes when compacted, the opening message otherwise).
 * The client's markers on `system` and `tools` stay; all together stay within 4. The ttl is
 * the longest the client used in its messages, but never longer than a marker that comes
 * before the messages (a 1h marker may not follow a 5m one).
 */
export function placeCacheMarkers(
  messages: readonly WireMessage[],
  client: { system: MessagesRequest['system']; tools: MessagesRequest['tools']; messages: readonly WireMessage[] },
): WireMessage[] {
  const before = [...markersIn(client.tools), ...(typeof client.system === 'string' ? [] : markersIn(client.system))];
  const used = messageMarkers(client.messages);
  let ttl: Ttl = used.includes('1h') ? '1h' : '5m';
  if (before.includes('5m')) ttl = '5m';
  const budget = Math.max(0, MAX_MARKERS - before.length);
  const out = messages.map((m) => stripMarkers(m)).map((m) => (typeof m.content === 'string' ? { ...m, content: [{ type: 'text', text: m.content }] } : { ...m, content: [...m.content] }));
  const targets: number[] = [];
  if (out.length > 0) targets.push(out.length - 1);
  if (out.length > 2) targets.push(0);
  for (const i of targets.slice(0, budget)) {
    const m = out[i]!;
    const b = markable(m);
    if (b === undefined || typeof m.content === 'string') continue;
    const at = m.content.lastIndexOf(b);
    m.content[at] = { ...b, cache_control: ttl === '1h' ? { type: 'ephemeral', ttl: '1h' } : { type: 'ephemeral' } };
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Normalization for hashing

/**
 * A message in the one form its hash is taken over: no cache markers anywhere, a string
 * content as one text block, object keys sorted. Clients move their markers and switch between
 * the string and block forms from one request to the next; neither is a different message.
 */
export function canonicalMessage(m: WireMessage): string {
  return canonicalJson({ role: m.role, content: blocksOf(m.content) });
}

/** The provider's error body, for answers the proxy itself gives. */
export function wireError(type: 'invalid_request_error' | 'api_error' | 'not_found_error' | 'overloaded_error', message: string): string {
  return JSON.stringify({ type: 'error', error: { type, message } });
}
