// The normalized text a summarizer (or an archive) reads for a run of rows: one line per
// event with a marker, tool calls as `→ name(k = v)`, images as a marker, long content capped
// with the cut said in place. Capability notices and encrypted reasoning are never included.
import type { StoredRow } from '../../protocol/rows.ts';
import { runStepsSliced, timeSlicer } from '../../protocol/time-slice.ts';
import { imageMarker, opaqueMarker } from '../../storage/transcript/row-text.ts';
import { aiLine, callLine, LINE_MARKERS, outLine, userLine } from '../summarizer/prompt-format.ts';
import { chunkUnits, groupUnitsSteps, opensExchange, opensUnit } from './units.ts';

/** Characters kept of a message, a tool result, and a tool call's arguments. */
export const CAPS = { message: 8000, result: 1600, args: 1500 } as const;

/** `text` cut to `max` characters (code points) with '…' after the cut: a quote in a request. */
export function clipChars(text: string, max: number): string {
  const chars = [...text];
  return chars.length <= max ? text : `${chars.slice(0, max).join('')}…`;
}

/** `limit` UTF-16 code units of `text`, one fewer rather than half of a surrogate pair. */
function cap(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const code = text.charCodeAt(limit - 1);
  const keep = code >= 0xd800 && code <= 0xdbff ? limit - 1 : limit;
  return `${text.slice(0, keep)} […${text.length - keep} more characters cut]`;
}

export interface SummaryTextOptions {
  /**
   * Whether readable reasoning summaries appear, as `¶ai (thinking):` lines (default true).
   * The summarizer reads them; snapcompact's archive leaves every reasoning item out.
   */
  reasoning?: boolean;
}

/** Lines for one row; empty for rows a summarizer must not read. */
export function summaryLines(row: StoredRow, options: SummaryTextOptions = {}): string[] {
  const b = row.body;
  switch (b.kind) {
    case 'user': {
      const text = b.content.map((p) => (p.type === 'text' ? p.text : p.type === 'opaque' ? opaqueMarker(p.label) : imageMarker(p.hash, p.width, p.height, p.elided === true))).join(' ');
      return [userLine(cap(text, CAPS.message), b.origin)];
    }
    case 'assistant': {
      const lines: string[] = [];
      for (const p of b.content) {
        if (p.type === 'text') lines.push(aiLine(cap(p.text, CAPS.message)));
        else if (p.type === 'tool_call') lines.push(cap(callLine(p.name, p.arguments), p.name.length + 3 + CAPS.args));
        else if (p.type === 'opaque') lines.push(aiLine(opaqueMarker(p.label)));
        else if (options.reasoning !== false && p.text !== undefined && p.text.length > 0) lines.push(`${LINE_MARKERS.ai} (thinking): ${cap(p.text, CAPS.message)}`);
      }
      return lines;
    }
    case 'tool_result': {
      const text = b.content.map((p) => (p.type === 'text' ? p.text : imageMarker(p.hash, p.width, p.height, p.elided === true))).join(' ');
      return [outLine(b.call_id, cap(text, CAPS.result), b.is_error)];
    }
    case 'notice': {
      const n = b.body;
      if (n.notice === 'excursion') return [`${LINE_MARKERS.note}: excursion started on branch ${n.branch}`];
      if (n.notice === 'excursion_return') return [`${LINE_MARKERS.note}: excursion ${n.branch} returned: ${cap(n.outcome, CAPS.message)}`];
      // A capabilities notice only bridges a reload until the next compaction rebuilds the
      // system prompt; summarized, it would outlive that and contradict the new prompt. Image
      // fits only change earlier rows' images.
      return [];
    }
  }
}

/**
 * The rows' lines joined with "\n". A line's own line breaks are followed by two spaces, so a
 * continuation can never pass for the start of an event (a tool output quoting `¶user:`).
 */
export function summaryText(rows: readonly StoredRow[], options: SummaryTextOptions = {}): string {
  const out: string[] = [];
  for (const r of rows) linesInto(out, r, options);
  return out.join('\n');
}

function linesInto(out: string[], row: StoredRow, options: SummaryTextOptions): void {
  for (const l of summaryLines(row, options)) out.push(l.replaceAll('\n', '\n  '));
}

/**
 * Rows in order as summarizer transcripts of at most `maxTokens` estimated tokens each (by
 * `tokens`, the request's sizes), broken between units or exchanges, never inside an exchange;
 * an exchange larger than that goes alone. Each transcript is written when the caller asks for
 * it, with a turn for the event loop every slice: the text of a long eviction, written in one
 * stretch, held the event loop far past its budget. `tokens` should be a memo already filled
 * (tokenCounterYielding), or the grouping sizes every row in one go.
 */
export async function* summaryChunks(rows: readonly StoredRow[], tokens: (row: StoredRow) => number, maxTokens: number): AsyncGenerator<string> {
  const slice = timeSlicer();
  const groups = await runStepsSliced(groupUnitsSteps(rows, (r) => opensUnit(r) || opensExchange(r), tokens));
  for (const chunk of chunkUnits(groups, maxTokens)) {
    const out: string[] = [];
    for (const unit of chunk) {
      for (const row of unit.items) {
        linesInto(out, row, {});
        await slice();
      }
    }
    yield out.join('\n');
  }
}
