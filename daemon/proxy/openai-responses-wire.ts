// The OpenAI Responses wire as the proxy reads and writes it: the request schema (only what the
// proxy looks at is checked; every other field passes through), one input item to transcript
// rows, and the prepared request back to `input` items. Every item is one message of the
// reconcile chain. Reasoning, compaction and item types the daemon does not model belong to the
// upstream that wrote them: their provider key names the upstream (`provider`), so a switch of
// upstream drops them from the request while the readable reasoning summary stays stored.
import { z } from 'zod';
import type { OutPart, PlainInput } from '../../protocol/prepared.ts';
import type { ImagePartIn, OpaquePart, RowIn, TextPart } from '../../protocol/rows.ts';
import { canonicalJson } from './client-prompt.ts';
import { FromParts } from './from-parts.ts';
import { HistoryChecker } from './validated.ts';
import type { ImageBytes } from './wire.ts';
import { isRecord } from '../../protocol/is-record.ts';

export const RESPONSES_WIRE = 'openai-responses';

/** The provider key of a Responses upstream: encrypted reasoning and opaque items go back only to it. */
export function responsesProvider(upstream: string): string {
  return `${RESPONSES_WIRE}@${upstream.replace(/\/+$/, '')}`;
}

export const Item = z.looseObject({ type: z.string().optional() });
export type Item = z.infer<typeof Item>;

/** A Responses request body: what the proxy reads. Unknown fields are kept. */
export const ResponsesRequest = z.looseObject({
  model: z.string().min(1).max(200),
  input: z.union([z.string(), z.array(Item)]),
  instructions: z.string().nullish(),
  tools: z.array(z.looseObject({ type: z.string().optional(), name: z.string().optional() })).optional(),
  stream: z.boolean().nullish(),
  max_output_tokens: z.number().int().positive().nullish(),
  previous_response_id: z.string().nullish(),
  prompt_cache_key: z.string().optional(),
});
export type ResponsesRequest = z.infer<typeof ResponsesRequest>;

/** ResponsesRequest with its input items checked one at a time (validated.ts). */
export const responsesRequest = new HistoryChecker<ResponsesRequest, Item>(ResponsesRequest.extend({ input: z.union([z.string(), z.array(z.unknown())]) }), 'input', Item);

const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
type ImageType = (typeof IMAGE_TYPES)[number];

function onlyKeys(o: Record<string, unknown>, keys: readonly string[]): boolean {
  return Object.keys(o).every((k) => keys.includes(k));
}

/** The items of a request's `input` (a string is one user message). */
export function inputItems(input: ResponsesRequest['input']): Item[] {
  return typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : input;
}

function typeOf(item: Item): string {
  return item.type ?? (typeof item.role === 'string' ? 'message' : 'unknown');
}

/** Message items of role developer or system: the agent's own prompt. */
export function isPromptItem(item: Item): boolean {
  return typeOf(item) === 'message' && (item.role === 'developer' || item.role === 'system');
}

/** Reasoning keeps its item id with its blob: both go back only to the upstream that wrote them. */
interface Sealed {
  id?: string;
  encrypted_content: string;
}

function seal(item: Item): string | undefined {
  if (typeof item.encrypted_content !== 'string') return undefined;
  const s: Sealed = { encrypted_content: item.encrypted_content, ...(typeof item.id === 'string' ? { id: item.id } : {}) };
  return JSON.stringify(s);
}

function unseal(encrypted: string): Sealed | null {
  try {
    const v = JSON.parse(encrypted) as unknown;
    return isRecord(v) && typeof v.encrypted_content === 'string' ? { encrypted_content: v.encrypted_content, ...(typeof v.id === 'string' ? { id: v.id } : {}) } : null;
  } catch {
    return null;
  }
}

function opaque(provider: string, data: Record<string, unknown>, label: string): OpaquePart {
  return { type: 'opaque', wire: provider, label: label.slice(0, 200), data };
}

function partLabel(p: Record<string, unknown>): string {
  return typeof p.type === 'string' ? p.type : 'part';
}

function dataUrlImage(url: unknown): ImagePartIn | null {
  if (typeof url !== 'string') return null;
  const m = /^data:(image\/[a-z]+);base64,([A-Za-z0-9+/=\s]+)$/.exec(url);
  if (m === null || !(IMAGE_TYPES as readonly string[]).includes(m[1]!)) return null;
  return { type: 'image', media_type: m[1] as ImageType, data: m[2]!.replace(/\s+/g, '') };
}

function contentParts(content: unknown): Array<Record<string, unknown>> {
  if (typeof content === 'string') return [{ type: 'input_text', text: content }];
  return Array.isArray(content) ? content.filter(isRecord) : [];
}

/** A user part: input_text, or an input_image with a data URL; anything else opaque. */
function userPart(provider: string, p: Record<string, unknown>): TextPart | ImagePartIn | OpaquePart {
  if (p.type === 'input_text' && typeof p.text === 'string' && onlyKeys(p, ['type', 'text'])) return { type: 'text', text: p.text };
  if (p.type === 'input_image' && onlyKeys(p, ['type', 'image_url', 'detail']) && (p.detail === undefined || p.detail === 'auto')) {
    const image = dataUrlImage(p.image_url);
    if (image !== null) return image;
  }
  return opaque(provider, { part: p }, partLabel(p));
}

/** Output text without annotations or logprobs is plain text; anything else stays as sent. */
function assistantText(p: Record<string, unknown>): string | null {
  const plain = p.type === 'output_text' && typeof p.text === 'string' && onlyKeys(p, ['type', 'text', 'annotations', 'logprobs']);
  const empty = (v: unknown): boolean => v === undefined || (Array.isArray(v) && v.length === 0);
  return plain && empty(p.annotations) && empty(p.logprobs) ? (p.text as string) : null;
}

function argumentsOf(text: unknown): Record<string, unknown> | null {
  if (typeof text !== 'string') return null;
  try {
    const v = JSON.parse(text) as unknown;
    return isRecord(v) ? v : null;
  } catch {
    return null;
  }
}

/** Output items of an output type that the daemon does not pair (tool outputs it keeps opaque) belong with the user's side. */
function isOutputType(type: string): boolean {
  return type.endsWith('_output');
}

/**
 * The rows one input item becomes, without keys. Messages, function calls and their outputs, and
 * reasoning are modelled; every other item (custom and local-shell calls with their outputs,
 * compaction, web search, types not seen yet) is one opaque part that goes back as it came.
 */
export function itemRows(provider: string, item: Item): RowIn[] {
  const type = typeOf(item);
  const whole = (): RowIn[] => {
    const part = opaque(provider, { item }, type);
    return isOutputType(type) ? [{ kind: 'user', origin: 'user', content: [part] }] : [{ kind: 'assistant', provider, content: [part] }];
  };
  switch (type) {
    case 'message': {
      if (item.role === 'assistant') {
        const content: Extract<RowIn, { kind: 'assistant' }>['content'] = contentParts(item.content).map((p) => {
          const text = assistantText(p);
          return text === null ? opaque(provider, { part: p }, partLabel(p)) : { type: 'text' as const, text };
        });
        const kept = content.filter((p) => p.type !== 'text' || p.text !== '');
        return kept.length === 0 ? [] : [{ kind: 'assistant', provider, content: kept }];
      }
      if (item.role !== 'user') return whole();
      const content = contentParts(item.content)
        .map((p) => userPart(provider, p))
        .filter((p) => p.type !== 'text' || p.text !== '');
      return content.length === 0 ? [] : [{ kind: 'user', origin: 'user', content }];
    }
    case 'function_call': {
      const args = argumentsOf(item.arguments);
      if (typeof item.call_id !== 'string' || item.call_id === '' || typeof item.name !== 'string' || item.name === '' || args === null) return whole();
      return [{ kind: 'assistant', provider, content: [{ type: 'tool_call', id: item.call_id, name: item.name, arguments: args }] }];
    }
    case 'function_call_output': {
      if (typeof item.call_id !== 'string' || item.call_id === '') return whole();
      const out = item.output;
      const content: Array<TextPart | ImagePartIn> = typeof out === 'string'
        ? [{ type: 'text', text: out }]
        : contentParts(out).map((p) => {
          const u = userPart(provider, p);
          return u.type === 'opaque' ? { type: 'text', text: JSON.stringify(p) } : u;
        });
      return [{ kind: 'tool_result', call_id: item.call_id, is_error: false, content }];
    }
    case 'reasoning': {
      if (!onlyKeys(item, ['type', 'id', 'summary', 'encrypted_content', 'status']) || !Array.isArray(item.summary)) return whole();
      const text = (item.summary as unknown[]).map((s) => (isRecord(s) && typeof s.text === 'string' ? s.text : '')).filter((t) => t !== '').join('\n\n');
      const encrypted = seal(item);
      if (text === '' && encrypted === undefined) return [];
      return [{ kind: 'assistant', provider, content: [{ type: 'reasoning', provider, ...(text === '' ? {} : { text }), ...(encrypted === undefined ? {} : { encrypted }) }] }];
    }
    default:
      return whole();
  }
}

/** The form an item is hashed in: no item id or status (clients echo them or not), a string content as one part. */
export function canonicalItem(item: Item): string {
  const { id: _id, status: _status, ...rest } = item;
  const norm = typeOf(item) === 'message' ? { ...rest, type: 'message', content: contentParts(item.content).map((p) => (p.type === 'text' ? { ...p, type: 'input_text' } : p)) } : rest;
  return canonicalJson(norm);
}

/** The text of a message item, for the prompt's estimate and fingerprint. */
export function itemText(item: Item): string {
  return contentParts(item.content)
    .map((p) => (typeof p.text === 'string' ? p.text : ''))
    .join('\n');
}

// ---------------------------------------------------------------------------------------------
// The prepared request back to Responses

function imagePart(p: Extract<OutPart, { type: 'image' }>, image: ImageBytes): Record<string, unknown> {
  const data = p.data ?? image(p.hash);
  if (data === undefined) return { type: 'input_text', text: `[image ${p.hash.slice(0, 8)} ${p.width}x${p.height} is no longer available]` };
  return { type: 'input_image', image_url: `data:${p.media_type};base64,${data}` };
}

/**
 * Prepared inputs as Responses `input` items: an assistant input's text becomes a message item,
 * each call a function_call, each tool result a function_call_output; reasoning goes back as its
 * item only with the blob its own upstream wrote (readable summaries alone are not accepted).
 */
export function preparedItems(inputs: readonly PlainInput[], image: ImageBytes): Item[] {
  const out: Item[] = [];
  const add = (item: Item | null): void => {
    if (item !== null) out.push(item);
  };
  for (const input of inputs) {
    let group: OutPart[] = [];
    const role = input.role === 'assistant' ? 'assistant' : 'user';
    const flush = (): void => {
      if (group.length === 0) return;
      const parts = group;
      group = [];
      add(messageItems[role].get(parts, (volatile) => ({ type: 'message', role, content: parts.map((p) => messagePart(p, role, image, volatile)) })));
    };
    for (const p of input.content) {
      if (p.type === 'text' || p.type === 'image' || (p.type === 'opaque' && !isRecord(p.data.item) && isRecord(p.data.part))) {
        group.push(p);
        continue;
      }
      const item = itemsOfParts.get([p], (volatile) => ownItem(p, image, volatile));
      if (item === null) continue;
      flush();
      out.push(item);
    }
    flush();
  }
  return out;
}

/** Each message item made from its parts once, by role, and each item of its own part (from-parts.ts). */
const messageItems = { assistant: new FromParts<Item>(), user: new FromParts<Item>() };
const itemsOfParts = new FromParts<Item>();

/** A part of a message item: text in the role's type, an image (volatile when its payload is gone), a kept part as sent. */
function messagePart(p: OutPart, role: 'assistant' | 'user', image: ImageBytes, volatile: () => void): Record<string, unknown> {
  if (p.type === 'text') return role === 'assistant' ? { type: 'output_text', text: p.text, annotations: [] } : { type: 'input_text', text: p.text };
  if (p.type === 'image') return volatileImage(p, image, volatile);
  return (p as Extract<OutPart, { type: 'opaque' }>).data.part as Record<string, unknown>;
}

function volatileImage(p: Extract<OutPart, { type: 'image' }>, image: ImageBytes, volatile: () => void): Record<string, unknown> {
  const part = imagePart(p, image);
  if (part.type !== 'input_image') volatile();
  return part;
}

/** The item a part is on its own (a call, a tool result, sealed reasoning, a kept item), or null for none. */
function ownItem(p: OutPart, image: ImageBytes, volatile: () => void): Item | null {
  switch (p.type) {
    case 'tool_call':
      return { type: 'function_call', call_id: p.id, name: p.name, arguments: JSON.stringify(p.arguments) };
    case 'tool_result': {
      const texts = p.content.filter((c) => c.type === 'text');
      const output = texts.length === p.content.length ? texts.map((c) => c.text).join('\n') : p.content.map((c) => (c.type === 'text' ? { type: 'input_text', text: c.text } : volatileImage(c, image, volatile)));
      return { type: 'function_call_output', call_id: p.call_id, output };
    }
    case 'reasoning': {
      const sealed = p.encrypted === undefined ? null : unseal(p.encrypted);
      if (sealed === null) return null;
      return { type: 'reasoning', ...(sealed.id === undefined ? {} : { id: sealed.id }), summary: p.text === undefined ? [] : [{ type: 'summary_text', text: p.text }], encrypted_content: sealed.encrypted_content };
    }
    case 'opaque':
      return isRecord(p.data.item) ? (p.data.item) : null;
    default:
      return null;
  }
}
