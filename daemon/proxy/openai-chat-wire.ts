// The OpenAI Chat Completions wire as the proxy reads and writes it: the request schema (only
// what the proxy looks at is checked; every other field passes through), one message to
// transcript rows, and the prepared request back to `messages`. A message's fields the daemon
// does not model (an assistant's refusal, audio, a compatible server's reasoning_content) ride
// along as an opaque part and go back as they came while the message is in the tail.
import { z } from 'zod';
import type { OutPart, PlainInput } from '../../protocol/prepared.ts';
import type { ImagePartIn, OpaquePart, RowIn, TextPart } from '../../protocol/rows.ts';
import { canonicalJson } from './client-prompt.ts';
import { FromParts } from './from-parts.ts';
import { HistoryChecker } from './validated.ts';
import type { ImageBytes } from './wire.ts';
import { isRecord } from '../../protocol/is-record.ts';

export const CHAT_WIRE = 'openai-chat';

const Part = z.looseObject({ type: z.string() });
type Part = z.infer<typeof Part>;

const ToolCall = z.looseObject({
  id: z.string().min(1),
  type: z.string().optional(),
  function: z.looseObject({ name: z.string().min(1), arguments: z.string() }),
});

export const ChatMessage = z.looseObject({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(Part), z.null()]).optional(),
  tool_calls: z.array(ToolCall).nullish(),
  tool_call_id: z.string().optional(),
});
export type ChatMessage = z.infer<typeof ChatMessage>;

/** A Chat Completions request body: what the proxy reads. Unknown fields are kept. */
export const ChatRequest = z.looseObject({
  model: z.string().min(1).max(200),
  messages: z.array(ChatMessage),
  tools: z.array(z.looseObject({ type: z.string().optional(), function: z.looseObject({ name: z.string() }).optional() })).optional(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  prompt_cache_key: z.string().optional(),
});
export type ChatRequest = z.infer<typeof ChatRequest>;

/** ChatRequest with its messages checked one at a time (validated.ts). */
export const chatRequest = new HistoryChecker<ChatRequest, ChatMessage>(ChatRequest.extend({ messages: z.array(z.unknown()) }), 'messages', ChatMessage);

/** Roles that are the agent's own prompt. */
export function isPromptRole(role: string): boolean {
  return role === 'system' || role === 'developer';
}

const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
type ImageType = (typeof IMAGE_TYPES)[number];

/** `data:image/png;base64,...` as an image part; null for anything else (an http URL stays opaque). */
function dataUrlImage(url: string): ImagePartIn | null {
  const m = /^data:(image\/[a-z]+);base64,([A-Za-z0-9+/=\s]+)$/.exec(url);
  if (m === null || !(IMAGE_TYPES as readonly string[]).includes(m[1]!)) return null;
  return { type: 'image', media_type: m[1] as ImageType, data: m[2]!.replace(/\s+/g, '') };
}

function opaque(data: Record<string, unknown>, label: string): OpaquePart {
  return { type: 'opaque', wire: CHAT_WIRE, label: label.slice(0, 200), data };
}

/** A user content part as a row part: text and data-URL images; anything else opaque. */
function userPart(p: Part): TextPart | ImagePartIn | OpaquePart {
  const keys = Object.keys(p);
  if (p.type === 'text' && typeof p.text === 'string' && keys.every((k) => k === 'type' || k === 'text')) return { type: 'text', text: p.text };
  if (p.type === 'image_url' && keys.every((k) => k === 'type' || k === 'image_url') && isRecord(p.image_url) && Object.keys(p.image_url).every((k) => k === 'url') && typeof p.image_url.url === 'string') {
    const image = dataUrlImage(p.image_url.url);
    if (image !== null) return image;
  }
  return opaque({ part: p }, p.type);
}

function partsOf(content: ChatMessage['content']): Part[] {
  if (content === undefined || content === null) return [];
  return typeof content === 'string' ? [{ type: 'text', text: content }] : content;
}

/** Text of a tool message's content: a string, or its text parts joined. */
function toolText(content: ChatMessage['content']): string {
  return partsOf(content)
    .map((p) => (typeof p.text === 'string' ? p.text : JSON.stringify(p)))
    .join('\n');
}

const MODELLED_ASSISTANT = new Set(['role', 'content', 'tool_calls']);

/** Arguments as an object; text that is not a JSON object is kept under `_raw` and goes back as it was. */
function argumentsOf(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text) as unknown;
    if (isRecord(v)) return v;
  } catch {
    // not JSON: kept as sent below
  }
  return { _raw: text };
}

function argumentsText(args: Record<string, unknown>): string {
  const keys = Object.keys(args);
  return keys.length === 1 && keys[0] === '_raw' && typeof args._raw === 'string' ? args._raw : JSON.stringify(args);
}

/**
 * The rows one conversation message becomes, without keys. A user message is one row; an
 * assistant message one row (text, tool calls, and its other fields as one opaque part); a
 * tool message a tool_result row. Another role is kept whole as an opaque user row.
 */
export function chatRows(m: ChatMessage): RowIn[] {
  if (m.role === 'tool') {
    if (m.tool_call_id === undefined || m.tool_call_id === '') return [{ kind: 'user', origin: 'user', content: [opaque({ message: m }, 'tool message without tool_call_id')] }];
    return [{ kind: 'tool_result', call_id: m.tool_call_id, is_error: false, content: [{ type: 'text', text: toolText(m.content) }] }];
  }
  if (m.role === 'assistant') {
    const content: Extract<RowIn, { kind: 'assistant' }>['content'] = [];
    for (const p of partsOf(m.content)) {
      if (p.type === 'text' && typeof p.text === 'string') {
        if (p.text !== '') content.push({ type: 'text', text: p.text });
      } else content.push(opaque({ part: p }, p.type));
    }
    for (const c of m.tool_calls ?? []) content.push({ type: 'tool_call', id: c.id, name: c.function.name, arguments: argumentsOf(c.function.arguments) });
    const extra = Object.fromEntries(Object.entries(m).filter(([k, v]) => !MODELLED_ASSISTANT.has(k) && v !== undefined && v !== null));
    if (Object.keys(extra).length > 0) content.push(opaque({ fields: extra }, `assistant ${Object.keys(extra).join(', ')}`));
    return content.length === 0 ? [] : [{ kind: 'assistant', provider: CHAT_WIRE, content }];
  }
  if (m.role === 'user') {
    const content = partsOf(m.content)
      .map(userPart)
      .filter((p) => p.type !== 'text' || p.text !== '');
    return content.length === 0 ? [] : [{ kind: 'user', origin: 'user', content }];
  }
  return [{ kind: 'user', origin: 'user', content: [opaque({ message: m }, `${m.role} message`)] }];
}

/** The form a message is hashed in: string content as one text part, keys sorted, null fields dropped. */
export function canonicalChatMessage(m: ChatMessage): string {
  const { content, ...rest } = m;
  const clean = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== null && !(Array.isArray(v) && v.length === 0)));
  const parts = partsOf(content).filter((p) => !(p.type === 'text' && p.text === ''));
  return canonicalJson({ ...clean, content: parts });
}

/** The text of a message, for the prompt's estimate and fingerprint. */
export function chatText(m: ChatMessage): string {
  return partsOf(m.content)
    .map((p) => (typeof p.text === 'string' ? p.text : ''))
    .join('\n');
}

// ---------------------------------------------------------------------------------------------
// The prepared request back to Chat Completions

function imageUrl(p: Extract<OutPart, { type: 'image' }>, image: ImageBytes): Part {
  const data = p.data ?? image(p.hash);
  if (data === undefined) return { type: 'text', text: `[image ${p.hash.slice(0, 8)} ${p.width}x${p.height} is no longer available]` };
  return { type: 'image_url', image_url: { url: `data:${p.media_type};base64,${data}` } };
}

/** A part list as `content`: one text part as a string, as clients send it. */
function contentOf(parts: Part[]): string | Part[] {
  if (parts.length === 1 && parts[0]!.type === 'text' && typeof parts[0]!.text === 'string') return parts[0]!.text;
  return parts;
}

/**
 * Prepared inputs as Chat Completions `messages`: an assistant input's calls become its
 * `tool_calls`, each tool result its own `tool` message, a kept whole message goes back as it was.
 */
export function preparedChatMessages(inputs: readonly PlainInput[], image: ImageBytes): ChatMessage[] {
  const out: ChatMessage[] = [];
  const add = (m: ChatMessage | null): void => {
    if (m !== null) out.push(m);
  };
  for (const input of inputs) {
    if (input.role === 'assistant') {
      add(messagesOfParts.get(input.content, () => assistantMessage(input.content)));
      continue;
    }
    let group: OutPart[] = [];
    const flush = (): void => {
      if (group.length === 0) return;
      const parts = group;
      group = [];
      add(messagesOfParts.get(parts, (volatile) => ({ role: 'user', content: contentOf(parts.map((p) => userOutPart(p, image, volatile))) })));
    };
    for (const p of input.content) {
      if (p.type === 'tool_result') {
        flush();
        add(messagesOfParts.get([p], () => ({ role: 'tool', tool_call_id: p.call_id, content: p.content.map((c) => (c.type === 'text' ? c.text : `[image ${c.hash.slice(0, 8)} ${c.width}x${c.height}]`)).join('\n') })));
      } else if (p.type === 'opaque' && isRecord(p.data.message)) {
        flush();
        add(messagesOfParts.get([p], () => p.data.message as ChatMessage));
      } else if (p.type === 'text' || p.type === 'image' || (p.type === 'opaque' && isRecord(p.data.part))) group.push(p);
    }
    flush();
  }
  return out;
}

/** Each message made from its parts once (from-parts.ts). */
const messagesOfParts = new FromParts<ChatMessage>();

/** An assistant input as one message: its calls become `tool_calls`, a kept field goes back as it was. */
function assistantMessage(parts: readonly OutPart[]): ChatMessage | null {
  const texts: string[] = [];
  const other: Part[] = [];
  const calls: Array<z.infer<typeof ToolCall>> = [];
  let fields: Record<string, unknown> = {};
  for (const p of parts) {
    if (p.type === 'text') texts.push(p.text);
    else if (p.type === 'tool_call') calls.push({ id: p.id, type: 'function', function: { name: p.name, arguments: argumentsText(p.arguments) } });
    else if (p.type === 'opaque' && isRecord(p.data.fields)) fields = { ...fields, ...p.data.fields };
    else if (p.type === 'opaque' && isRecord(p.data.part)) other.push(p.data.part as Part);
  }
  const content = other.length > 0 ? [...texts.map((text) => ({ type: 'text', text })), ...other] : texts.length > 0 ? texts.join('') : null;
  if (content === null && calls.length === 0 && Object.keys(fields).length === 0) return null;
  return { role: 'assistant', content, ...(calls.length > 0 ? { tool_calls: calls } : {}), ...fields };
}

/** A user message's part: text, an image (volatile when its payload is gone), or a kept part as sent. */
function userOutPart(p: OutPart, image: ImageBytes, volatile: () => void): Part {
  if (p.type === 'text') return { type: 'text', text: p.text };
  if (p.type === 'image') {
    const part = imageUrl(p, image);
    if (part.type !== 'image_url') volatile();
    return part;
  }
  return (p as Extract<OutPart, { type: 'opaque' }>).data.part as Part;
}

/** OpenAI's tools shape for a tool spec. */
export function chatTool(t: { name: string; description: string; input_schema: Record<string, unknown> }): Record<string, unknown> {
  return { type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema } };
}
