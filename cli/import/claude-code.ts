// Claude Code session JSONL (main sessions and subagent files, v1.0.x and v2.x) -> rows.
// One API response is logged as several `assistant` lines sharing `message.id`, one content
// block each, with the results of its tool calls interleaved; they become ONE assistant row
// (blocks in order) followed by its tool results. Inline sidechains (old versions' subagents)
// are skipped in a main session. Claude Code's own compaction summary and
// the UI-only records (progress, snapshots, queue operations, system, summary) are skipped.
import type { RowIn, TextPart, ImagePartIn, ToolCallPart, ReasoningPart } from '../../protocol/rows.ts';
import { imagePart, isObject, Keys, parseJsonl, Skips, textPart, toolArguments, type ImportedTranscript, type Json } from './common.ts';

type AssistantPart = TextPart | ReasoningPart | ToolCallPart;
type ResultRow = Extract<RowIn, { kind: 'tool_result' }>;

interface Group {
  id: string;
  model: string | undefined;
  parts: AssistantPart[];
  calls: Set<string>;
  results: ResultRow[];
}

const SKIPPED_TYPES = new Set(['progress', 'file-history-snapshot', 'queue-operation', 'system', 'summary']);

function contentParts(blocks: unknown[], skips: Skips, where: string): Array<TextPart | ImagePartIn> {
  const out: Array<TextPart | ImagePartIn> = [];
  for (const b of blocks) {
    if (!isObject(b)) continue;
    if (b.type === 'text' && typeof b.text === 'string') out.push(textPart(b.text));
    else if (b.type === 'image') {
      const src = isObject(b.source) ? b.source : {};
      if (src.type === 'base64') out.push(imagePart(src.media_type, src.data, skips));
      else {
        skips.add('image_without_data');
        out.push(textPart(`[image: ${typeof src.url === 'string' ? src.url : 'no inline data'}]`));
      }
    } else skips.add(`${where}_block:${String(b.type)}`);
  }
  return out;
}

export function importClaudeCode(text: string): ImportedTranscript {
  const skips = new Skips();
  const keys = new Keys();
  const rows: RowIn[] = [];
  let group: Group | null = null;
  let model: string | undefined;

  const flush = (): void => {
    const g = group;
    group = null;
    if (g === null) return;
    if (g.parts.length > 0) {
      rows.push({ kind: 'assistant', key: keys.make(`cc:a:${g.id}`), provider: 'anthropic', ...(g.model === undefined ? {} : { model: g.model }), content: g.parts });
    } else skips.add('empty_assistant');
    rows.push(...g.results);
  };

  const records = parseJsonl(text);
  // Old versions (v1.0.x) log Task subagents inline, marked isSidechain; they are another
  // conversation. A subagent file (every message a sidechain) is kept whole.
  const mainLine = records.some(({ rec }) => (rec.type === 'user' || rec.type === 'assistant') && rec.isSidechain !== true);
  for (const { line, rec } of records) {
    const type = typeof rec.type === 'string' ? rec.type : '?';
    if (mainLine && rec.isSidechain === true) {
      skips.add('sidechain');
      continue;
    }
    const msg = isObject(rec.message) ? rec.message : undefined;
    const uuid = typeof rec.uuid === 'string' ? rec.uuid : `line${line}`;
    if (type === 'assistant' && msg !== undefined) {
      const id = typeof msg.id === 'string' ? msg.id : uuid;
      const m = typeof msg.model === 'string' && msg.model !== '<synthetic>' && msg.model !== '' ? msg.model : undefined;
      if (m !== undefined) model = m;
      if (group === null || group.id !== id) {
        flush();
        group = { id, model: m, parts: [], calls: new Set(), results: [] };
      }
      const g: Group = group;
      const blocks = typeof msg.content === 'string' ? [{ type: 'text', text: msg.content }] : Array.isArray(msg.content) ? msg.content : [];
      for (const b of blocks as unknown[]) {
        if (!isObject(b)) continue;
        if (b.type === 'text' && typeof b.text === 'string') {
          if (b.text.trim() === '') skips.add('empty_text');
          else g.parts.push(textPart(b.text));
        } else if (b.type === 'thinking') {
          const part: ReasoningPart = { type: 'reasoning', provider: 'anthropic' };
          if (typeof b.thinking === 'string' && b.thinking !== '') part.text = b.thinking;
          if (typeof b.signature === 'string' && b.signature !== '') part.encrypted = b.signature;
          if (part.text === undefined && part.encrypted === undefined) skips.add('empty_thinking');
          else g.parts.push(part);
        } else if (b.type === 'redacted_thinking' && typeof b.data === 'string') {
          g.parts.push({ type: 'reasoning', provider: 'anthropic', encrypted: b.data });
        } else if (b.type === 'tool_use' && typeof b.id === 'string' && typeof b.name === 'string') {
          g.parts.push({ type: 'tool_call', id: b.id, name: b.name, arguments: toolArguments(b.input) });
          g.calls.add(b.id);
        } else skips.add(`assistant_block:${String(b.type)}`);
      }
      continue;
    }
    if (type === 'user' && msg !== undefined) {
      if (rec.isCompactSummary === true) {
        skips.add('compact_summary');
        continue;
      }
      const content = msg.content;
      if (typeof content === 'string') {
        flush();
        if (content.trim() === '') skips.add('empty_user');
        else rows.push({ kind: 'user', origin: 'user', key: keys.make(`cc:u:${uuid}`), content: [textPart(content)] });
        continue;
      }
      if (!Array.isArray(content)) {
        skips.add('user_without_content');
        continue;
      }
      const userParts: Array<TextPart | ImagePartIn> = [];
      for (const b of content as unknown[]) {
        if (!isObject(b)) continue;
        if (b.type === 'tool_result' && typeof b.tool_use_id === 'string') {
          const c = b.content;
          const parts = typeof c === 'string' ? [textPart(c)] : Array.isArray(c) ? contentParts(c, skips, 'tool_result') : [];
          const row: ResultRow = { kind: 'tool_result', key: keys.make(`cc:r:${uuid}:${b.tool_use_id}`), call_id: b.tool_use_id, is_error: b.is_error === true, content: parts };
          const g = group;
          if (g !== null && g.calls.has(b.tool_use_id)) g.results.push(row);
          else {
            flush();
            rows.push(row);
          }
        } else userParts.push(...contentParts([b], skips, 'user'));
      }
      const nonEmpty = userParts.filter((p) => p.type !== 'text' || p.text.trim() !== '');
      if (nonEmpty.length > 0) {
        flush();
        rows.push({ kind: 'user', origin: 'user', key: keys.make(`cc:u:${uuid}`), content: nonEmpty });
      }
      continue;
    }
    skips.add(SKIPPED_TYPES.has(type) ? type : `unknown:${type}`);
  }
  flush();
  return { format: 'claude-code', rows, ...(model === undefined ? {} : { model }), provider: 'anthropic', skipped: skips.counts };
}

/** Whether parsed JSONL records look like a Claude Code session. */
export function looksLikeClaudeCode(recs: readonly Json[]): boolean {
  return recs.some(
    (r) => (r.type === 'user' || r.type === 'assistant') && isObject(r.message) && ('uuid' in r || 'sessionId' in r),
  ) || recs.some((r) => r.type === 'file-history-snapshot' || r.type === 'queue-operation' || (r.type === 'summary' && 'leafUuid' in r));
}
