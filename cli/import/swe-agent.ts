// SWE-agent trajectories (.traj, one JSON document) -> rows, from `history` (the chat the model
// was sent). The system message is the instructions. Function-calling runs: assistant turns carry
// OpenAI-style `tool_calls` and observations are `role:"tool"` with `tool_call_ids`. Classic runs:
// the action is a command inside the assistant text, and the observation is a user message.
// SWE-agent reuses tool-call ids across turns; they are kept as they are.
import type { RowIn, TextPart, ToolCallPart } from '../../protocol/rows.ts';
import { ImportError, isObject, Keys, Skips, textPart, toolArguments, type ImportedTranscript, type Json } from './common.ts';

function contentText(c: unknown): string {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return (c as unknown[]).flatMap((b) => (isObject(b) && typeof b.text === 'string' ? [b.text] : typeof b === 'string' ? [b] : [])).join('\n');
  return '';
}

export function importSweAgent(text: string): ImportedTranscript {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new ImportError(`not a JSON document: ${(err as Error).message}`);
  }
  if (!isObject(doc) || !Array.isArray(doc.history)) throw new ImportError('no "history" array: not a SWE-agent trajectory');
  const skips = new Skips();
  const keys = new Keys();
  const rows: RowIn[] = [];
  let instructions: string | undefined;
  let model: string | undefined;
  const cfg = isObject(doc.replay_config) ? doc.replay_config : undefined;
  const agentModel = isObject(cfg?.agent) && isObject(cfg.agent.model) ? cfg.agent.model.name : undefined;
  if (typeof agentModel === 'string' && agentModel !== '') model = agentModel;

  (doc.history as unknown[]).forEach((h, i) => {
    if (!isObject(h)) {
      skips.add('not_an_object');
      return;
    }
    const role = typeof h.role === 'string' ? h.role : '?';
    const body = contentText(h.content);
    if (role === 'system') {
      if (instructions === undefined) instructions = body;
      else if (body.trim() !== '') rows.push({ kind: 'user', origin: 'user', key: keys.make(`swe:${i}:system`), content: [textPart(body)] });
      skips.add('system');
      return;
    }
    if (role === 'user') {
      if (body.trim() === '') skips.add('empty_user');
      else rows.push({ kind: 'user', origin: 'user', key: keys.make(`swe:${i}:u`), content: [textPart(body)] });
      return;
    }
    if (role === 'assistant') {
      const parts: Array<TextPart | ToolCallPart> = [];
      let said = body;
      if (said.trim() === '') said = [typeof h.thought === 'string' ? h.thought : '', typeof h.action === 'string' ? h.action : ''].filter((s) => s.trim() !== '').join('\n\n');
      if (said.trim() !== '') parts.push(textPart(said));
      const calls = Array.isArray(h.tool_calls) ? (h.tool_calls as unknown[]) : [];
      for (const c of calls) {
        if (!isObject(c) || typeof c.id !== 'string' || c.id === '') {
          skips.add('tool_call_without_id');
          continue;
        }
        const fn = isObject(c.function) ? c.function : {};
        const name = typeof fn.name === 'string' && fn.name !== '' ? fn.name : 'tool';
        parts.push({ type: 'tool_call', id: c.id, name, arguments: toolArguments(fn.arguments) });
      }
      if (parts.length === 0) skips.add('empty_assistant');
      else rows.push({ kind: 'assistant', key: keys.make(`swe:${i}:a`), ...(model === undefined ? {} : { model }), content: parts });
      return;
    }
    if (role === 'tool') {
      const ids = Array.isArray(h.tool_call_ids) ? (h.tool_call_ids as unknown[]).filter((x): x is string => typeof x === 'string' && x !== '') : [];
      if (ids.length === 0) {
        rows.push({ kind: 'user', origin: 'user', key: keys.make(`swe:${i}:obs`), content: [textPart(body)] });
        skips.add('tool_without_call_id');
        return;
      }
      for (const id of ids) rows.push({ kind: 'tool_result', key: keys.make(`swe:${i}:r:${id}`), call_id: id, is_error: false, content: [textPart(body)] });
      return;
    }
    skips.add(`role:${role}`);
  });
  return { format: 'swe-agent', rows, ...(model === undefined ? {} : { model }), ...(instructions === undefined ? {} : { instructions }), skipped: skips.counts };
}

export function looksLikeSweAgent(doc: unknown): boolean {
  return isObject(doc) && Array.isArray(doc.history) && (Array.isArray(doc.trajectory) || isObject(doc.info));
}

export type { Json };
