// The normalized text a summarizer (or an archive) reads for a run of rows: one line per
// event with a marker, tool calls as `→ name(k = v)`, images as a marker, long content capped
// with the cut said in place. Capability notices and encrypted reasoning are never included.
import type { StoredRow } from '../../protocol/rows.ts';

/** Characters kept of a message, a tool result, and a tool call's arguments. */
export const CAPS = { message: 8000, result: 1600, args: 1500 } as const;

function cap(text: string, limit: number): string {
  if (text.length <= limit) return text;
  return `${text.slice(0, limit)} […${text.length - limit} more characters cut]`;
}

function argText(args: Record<string, unknown>): string {
  return Object.entries(args)
    .map(([k, v]) => `${k} = ${typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v)}`)
    .join(', ');
}

function image(hash: string, w: number, h: number, elided: boolean | undefined): string {
  return elided === true ? `[image ${hash.slice(0, 8)} ${w}x${h} elided]` : `[image ${hash.slice(0, 8)} ${w}x${h}]`;
}

/** Lines for one row; empty for rows a summarizer must not read. */
export function summaryLines(row: StoredRow): string[] {
  const b = row.body;
  switch (b.kind) {
    case 'user': {
      const text = b.content.map((p) => (p.type === 'text' ? p.text : image(p.hash, p.width, p.height, p.elided))).join(' ');
      const marker = b.origin === 'user' ? '¶user:' : `¶user (${b.origin}):`;
      return [`${marker} ${cap(text, CAPS.message)}`];
    }
    case 'assistant': {
      const lines: string[] = [];
      for (const p of b.content) {
        if (p.type === 'text') lines.push(`¶ai: ${cap(p.text, CAPS.message)}`);
        else if (p.type === 'tool_call') lines.push(`→ ${p.name}(${cap(argText(p.arguments), CAPS.args)})`);
        else if (p.text !== undefined && p.text.length > 0) lines.push(`¶ai (thinking): ${cap(p.text, CAPS.message)}`);
      }
      return lines;
    }
    case 'tool_result': {
      const text = b.content.map((p) => (p.type === 'text' ? p.text : image(p.hash, p.width, p.height, p.elided))).join(' ');
      return [`¶out ${b.call_id}${b.is_error ? ' (error)' : ''}: ${cap(text, CAPS.result)}`];
    }
    case 'notice': {
      const n = b.body;
      if (n.notice === 'excursion') return [`¶note: excursion started on branch ${n.branch}`];
      if (n.notice === 'excursion_return') return [`¶note: excursion ${n.branch} returned: ${cap(n.outcome, CAPS.message)}`];
      return [];
    }
  }
}

export function summaryText(rows: readonly StoredRow[]): string {
  const out: string[] = [];
  for (const r of rows) for (const l of summaryLines(r)) out.push(l.replaceAll('\n', '\n  '));
  return out.join('\n');
}
