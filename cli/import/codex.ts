// Codex CLI rollout JSONL -> rows. The model-visible history is the `response_item` payloads:
// consecutive assistant-side items (reasoning, assistant messages, tool calls) are one model
// response and become one assistant row; a tool output or a user/developer message ends it.
// UI events (event_msg), turn_context, session_meta and Codex's own `compacted` records
// produce no rows; session_meta and turn_context supply the provider, model and instructions.
import type { ImagePartIn, ReasoningPart, RowIn, TextPart, ToolCallPart } from '../../protocol/rows.ts';
import { imageFromDataUrl, isObject, Keys, parseJsonl, Skips, textPart, toolArguments, type ImportedTranscript, type Json } from './common.ts';

type AssistantPart = TextPart | ReasoningPart | ToolCallPart;

/** Tool output in any of the shapes Codex writes: a string, one content item, or a list of them. */
function outputParts(output: unknown, skips: Skips): Array<TextPart | ImagePartIn> {
  if (typeof output === 'string') return [textPart(output)];
  if (output === undefined || output === null) return [];
  const items = Array.isArray(output) ? output : [output];
  const out: Array<TextPart | ImagePartIn> = [];
  for (const it of items as unknown[]) {
    if (typeof it === 'string') out.push(textPart(it));
    else if (isObject(it) && (it.type === 'input_text' || it.type === 'output_text' || it.type === 'text') && typeof it.text === 'string') out.push(textPart(it.text));
    else if (isObject(it) && it.type === 'input_image') out.push(imageFromDataUrl(it.image_url, skips));
    else if (isObject(it) && typeof it.content === 'string') out.push(textPart(it.content));
    else out.push(textPart(JSON.stringify(it)));
  }
  return out;
}

function messageParts(content: unknown, skips: Skips, role: string): Array<TextPart | ImagePartIn> {
  if (typeof content === 'string') return [textPart(content)];
  if (!Array.isArray(content)) return [];
  const out: Array<TextPart | ImagePartIn> = [];
  for (const b of content as unknown[]) {
    if (!isObject(b)) continue;
    if ((b.type === 'input_text' || b.type === 'output_text' || b.type === 'text') && typeof b.text === 'string') out.push(textPart(b.text));
    else if (b.type === 'input_image') out.push(imageFromDataUrl(b.image_url, skips));
    else skips.add(`${role}_block:${String(b.type)}`);
  }
  return out;
}

export function importCodex(text: string): ImportedTranscript {
  const skips = new Skips();
  const keys = new Keys();
  const rows: RowIn[] = [];
  let provider: string | undefined;
  let model: string | undefined;
  let instructions: string | undefined;
  let group: { line: number; parts: AssistantPart[] } | null = null;

  const flush = (): void => {
    const g = group;
    group = null;
    if (g === null) return;
    if (g.parts.length === 0) return;
    rows.push({ kind: 'assistant', key: keys.make(`cx:a:${g.line}`), ...(provider === undefined ? {} : { provider }), ...(model === undefined ? {} : { model }), content: g.parts });
  };
  const assistant = (line: number, part: AssistantPart): void => {
    group ??= { line, parts: [] };
    group.parts.push(part);
  };
  const result = (line: number, callId: unknown, parts: Array<TextPart | ImagePartIn>, isError = false): void => {
    flush();
    if (typeof callId !== 'string' || callId === '') {
      skips.add('tool_output_without_call_id');
      return;
    }
    rows.push({ kind: 'tool_result', key: keys.make(`cx:r:${line}`), call_id: callId, is_error: isError, content: parts });
  };

  for (const { line, rec } of parseJsonl(text)) {
    const type = typeof rec.type === 'string' ? rec.type : '?';
    const p = isObject(rec.payload) ? rec.payload : {};
    if (type === 'session_meta') {
      if (typeof p.model_provider === 'string' && p.model_provider !== '') provider = p.model_provider;
      if (typeof p.instructions === 'string' && p.instructions !== '') instructions = p.instructions;
      else if (isObject(p.base_instructions) && typeof p.base_instructions.text === 'string' && instructions === undefined) instructions = p.base_instructions.text;
      skips.add(type);
      continue;
    }
    if (type === 'turn_context') {
      if (typeof p.model === 'string' && p.model !== '') model = p.model;
      skips.add(type);
      continue;
    }
    if (type !== 'response_item') {
      skips.add(type);
      continue;
    }
    const item = typeof p.type === 'string' ? p.type : '?';
    switch (item) {
      case 'message': {
        const role = typeof p.role === 'string' ? p.role : '?';
        if (role === 'assistant') {
          for (const part of messageParts(p.content, skips, 'assistant')) {
            if (part.type === 'text') {
              if (part.text.trim() === '') skips.add('empty_text');
              else assistant(line, part);
            } else skips.add('assistant_image');
          }
        } else if (role === 'user' || role === 'developer') {
          flush();
          const parts = messageParts(p.content, skips, role).filter((x) => x.type !== 'text' || x.text.trim() !== '');
          if (parts.length === 0) skips.add('empty_user');
          else rows.push({ kind: 'user', origin: 'user', key: keys.make(`cx:u:${line}`), content: parts });
        } else skips.add(`message:${role}`);
        break;
      }
      case 'reasoning': {
        const summary = Array.isArray(p.summary) ? (p.summary as unknown[]).flatMap((s) => (isObject(s) && typeof s.text === 'string' ? [s.text] : [])) : [];
        const content = Array.isArray(p.content) ? (p.content as unknown[]).flatMap((s) => (isObject(s) && typeof s.text === 'string' ? [s.text] : [])) : [];
        const text = (summary.length > 0 ? summary : content).join('\n\n');
        const part: ReasoningPart = { type: 'reasoning', provider: 'openai' };
        if (text !== '') part.text = text;
        if (typeof p.encrypted_content === 'string' && p.encrypted_content !== '') part.encrypted = p.encrypted_content;
        if (part.text === undefined && part.encrypted === undefined) skips.add('empty_reasoning');
        else assistant(line, part);
        break;
      }
      case 'function_call':
      case 'custom_tool_call':
      case 'tool_search_call':
      case 'local_shell_call': {
        const id = typeof p.call_id === 'string' && p.call_id !== '' ? p.call_id : typeof p.id === 'string' && p.id !== '' ? p.id : undefined;
        if (id === undefined) {
          skips.add(`${item}_without_call_id`);
          break;
        }
        const name = typeof p.name === 'string' && p.name !== '' ? p.name : item === 'tool_search_call' ? 'tool_search' : item === 'local_shell_call' ? 'local_shell' : 'tool';
        const args = item === 'custom_tool_call' ? toolArguments(p.input) : item === 'local_shell_call' ? toolArguments(p.action) : toolArguments(p.arguments);
        assistant(line, { type: 'tool_call', id, name, arguments: args });
        break;
      }
      case 'function_call_output':
      case 'custom_tool_call_output':
      case 'local_shell_call_output':
        result(line, p.call_id, outputParts(p.output, skips));
        break;
      case 'tool_search_output':
        result(line, p.call_id, [textPart(JSON.stringify(p.tools ?? p.output ?? null))]);
        break;
      default:
        skips.add(`response_item:${item}`);
    }
  }
  flush();
  return {
    format: 'codex',
    rows,
    ...(model === undefined ? {} : { model }),
    ...(provider === undefined ? {} : { provider }),
    ...(instructions === undefined ? {} : { instructions }),
    skipped: skips.counts,
  };
}

export function looksLikeCodex(recs: readonly Json[]): boolean {
  return recs.some((r) => isObject(r.payload) && (r.type === 'session_meta' || r.type === 'response_item' || r.type === 'turn_context' || r.type === 'event_msg'));
}
