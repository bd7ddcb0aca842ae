// pi / oh-my-pi session JSONL (v1 linear, v3 tree in file order) -> rows: user messages,
// assistant messages (text, thinking, toolCall blocks), tool results, and the user's own shell
// commands (bashExecution) rendered as the user text pi sends for them. The header, model and
// thinking-level changes and pi's own compaction entries produce no rows.
import type { ImagePartIn, ReasoningPart, RowIn, TextPart, ToolCallPart } from '../../protocol/rows.ts';
import { imagePart, isObject, Keys, parseJsonl, Skips, textPart, toolArguments, type ImportedTranscript, type Json } from './common.ts';

function userParts(content: unknown, skips: Skips): Array<TextPart | ImagePartIn> {
  if (typeof content === 'string') return [textPart(content)];
  if (!Array.isArray(content)) return [];
  const out: Array<TextPart | ImagePartIn> = [];
  for (const b of content as unknown[]) {
    if (!isObject(b)) continue;
    if (b.type === 'text' && typeof b.text === 'string') out.push(textPart(b.text));
    else if (b.type === 'image') out.push(imagePart(b.mimeType ?? b.mediaType, b.data, skips));
    else skips.add(`content_block:${String(b.type)}`);
  }
  return out;
}

/** What pi puts in the model's context for a `!command` the user ran. */
function bashText(m: Json): string {
  const parts = [`Ran \`${typeof m.command === 'string' ? m.command : ''}\``];
  const output = typeof m.output === 'string' ? m.output : '';
  parts.push(output === '' ? '(no output)' : `\`\`\`\n${output}\n\`\`\``);
  if (m.cancelled === true) parts.push('(command cancelled)');
  else if (typeof m.exitCode === 'number' && m.exitCode !== 0) parts.push(`Command exited with code ${m.exitCode}`);
  if (m.truncated === true) parts.push('[output truncated]');
  return parts.join('\n');
}

export function importPi(text: string): ImportedTranscript {
  const skips = new Skips();
  const keys = new Keys();
  const rows: RowIn[] = [];
  let provider: string | undefined;
  let model: string | undefined;

  for (const { line, rec } of parseJsonl(text)) {
    const type = typeof rec.type === 'string' ? rec.type : '?';
    const key = (k: string): string => keys.make(`pi:${typeof rec.id === 'string' ? rec.id : line}:${k}`);
    if (type === 'session') {
      if (typeof rec.provider === 'string') provider = rec.provider;
      if (typeof rec.modelId === 'string') model = rec.modelId;
      skips.add('header');
      continue;
    }
    if (type === 'model_change') {
      if (typeof rec.provider === 'string') provider = rec.provider;
      if (typeof rec.modelId === 'string') model = rec.modelId;
      skips.add(type);
      continue;
    }
    if (type !== 'message' || !isObject(rec.message)) {
      skips.add(type);
      continue;
    }
    const m = rec.message;
    const role = typeof m.role === 'string' ? m.role : '?';
    if (role === 'user') {
      const parts = userParts(m.content, skips).filter((p) => p.type !== 'text' || p.text.trim() !== '');
      if (parts.length === 0) skips.add('empty_user');
      else rows.push({ kind: 'user', origin: 'user', key: key('u'), content: parts });
    } else if (role === 'assistant') {
      const p = typeof m.provider === 'string' && m.provider !== '' ? m.provider : provider;
      const mdl = typeof m.model === 'string' && m.model !== '' ? m.model : model;
      if (p !== undefined) provider = p;
      if (mdl !== undefined) model = mdl;
      const parts: Array<TextPart | ReasoningPart | ToolCallPart> = [];
      const blocks = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : Array.isArray(m.content) ? m.content : [];
      for (const b of blocks as unknown[]) {
        if (!isObject(b)) continue;
        if (b.type === 'text' && typeof b.text === 'string') {
          if (b.text.trim() === '') skips.add('empty_text');
          else parts.push(textPart(b.text));
        } else if (b.type === 'thinking') {
          const r: ReasoningPart = { type: 'reasoning', ...(p === undefined ? {} : { provider: p }) };
          if (typeof b.thinking === 'string' && b.thinking !== '') r.text = b.thinking;
          if (typeof b.thinkingSignature === 'string' && b.thinkingSignature !== '') r.encrypted = b.thinkingSignature;
          if (r.text === undefined && r.encrypted === undefined) skips.add('empty_thinking');
          else parts.push(r);
        } else if (b.type === 'toolCall' && typeof b.id === 'string' && b.id !== '' && typeof b.name === 'string' && b.name !== '') {
          parts.push({ type: 'tool_call', id: b.id, name: b.name, arguments: toolArguments(b.arguments) });
        } else skips.add(`assistant_block:${String(b.type)}`);
      }
      if (parts.length === 0) skips.add(m.stopReason === 'aborted' || m.stopReason === 'error' ? `empty_assistant:${m.stopReason}` : 'empty_assistant');
      else rows.push({ kind: 'assistant', key: key('a'), ...(p === undefined ? {} : { provider: p }), ...(mdl === undefined ? {} : { model: mdl }), content: parts });
    } else if (role === 'toolResult') {
      if (typeof m.toolCallId !== 'string' || m.toolCallId === '') {
        skips.add('tool_result_without_call_id');
        continue;
      }
      rows.push({ kind: 'tool_result', key: key('r'), call_id: m.toolCallId, is_error: m.isError === true, content: userParts(m.content, skips) });
    } else if (role === 'bashExecution') {
      rows.push({ kind: 'user', origin: 'user', key: key('bash'), content: [textPart(bashText(m))] });
    } else skips.add(`message:${role}`);
  }
  return { format: 'pi', rows, ...(model === undefined ? {} : { model }), ...(provider === undefined ? {} : { provider }), skipped: skips.counts };
}

export function looksLikePi(recs: readonly Json[]): boolean {
  const header = recs[0];
  if (header?.type === 'session' && ('cwd' in header || 'version' in header)) return true;
  return recs.some((r) => r.type === 'message' && isObject(r.message) && (r.message.role === 'toolResult' || r.message.role === 'bashExecution'));
}
