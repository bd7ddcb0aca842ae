// Which transcript rows a prepared request still carries verbatim, and the text it carries
// besides: what the eval's retention metric compares evicted identifiers against. The daemon
// does not say which rows a request holds, so they are recognised the way a reader would: a
// tool call by its call id, a result by its call id and the start of its text (a result whose
// text was replaced, as masking does, has left), a text row by its text appearing unchanged.
import type { PlainInput } from '../../protocol/prepared.ts';
import type { RowIn } from '../../protocol/rows.ts';

/** A row's text as the retention metric reads it: text parts, tool calls with their arguments, reasoning text. */
export function rowInText(row: RowIn): string {
  const out: string[] = [];
  for (const p of row.content) {
    if (p.type === 'text') out.push(p.text);
    else if (p.type === 'tool_call') out.push(`${p.name}(${JSON.stringify(p.arguments)})`);
    else if (p.type === 'reasoning' && p.text !== undefined) out.push(p.text);
  }
  return out.join('\n');
}

/** Every text a request's inputs carry (tool arguments included), one string. */
export function inputsText(inputs: readonly PlainInput[]): string {
  const out: string[] = [];
  for (const inp of inputs) {
    for (const p of inp.content) {
      if (p.type === 'text') out.push(p.text);
      else if (p.type === 'tool_call') out.push(`${p.name}(${JSON.stringify(p.arguments)})`);
      else if (p.type === 'tool_result') {
        for (const q of p.content) if (q.type === 'text') out.push(q.text);
      } else if (p.type === 'reasoning' && p.text !== undefined) out.push(p.text);
    }
  }
  return out.join('\n');
}

/** The keys a request carries rows by: call ids of calls, results by call id with their text, and its exact text parts. */
export interface RequestKeys {
  calls: Set<string>;
  results: Map<string, string>;
  texts: Set<string>;
}

/** Characters of a result's text that must open the request's copy for the result to count as carried. */
const RESULT_HEAD_CHARS = 40;

function resultText(content: ReadonlyArray<{ type: string; text?: string }>): string {
  return content.map((q) => (q.type === 'text' ? (q.text ?? '') : '')).join('\n');
}

export function requestKeys(inputs: readonly PlainInput[]): RequestKeys {
  const keys: RequestKeys = { calls: new Set(), results: new Map(), texts: new Set() };
  for (const inp of inputs) {
    for (const p of inp.content) {
      if (p.type === 'text') keys.texts.add(p.text);
      else if (p.type === 'tool_call') keys.calls.add(p.id);
      else if (p.type === 'tool_result') keys.results.set(p.call_id, resultText(p.content));
    }
  }
  return keys;
}

/**
 * Whether the request carries `row` verbatim; null when the row has nothing to recognise it by
 * (a reasoning-only turn), which the caller decides from its neighbours.
 */
export function carries(keys: RequestKeys, row: RowIn): boolean | null {
  if (row.kind === 'tool_result') {
    // Sent as head and tail when long (the head may be short under a small window), so the
    // first characters are what must be there.
    const sent = keys.results.get(row.call_id);
    return sent !== undefined && sent.startsWith(resultText(row.content).slice(0, RESULT_HEAD_CHARS).trimEnd());
  }
  const calls = row.content.flatMap((p) => (p.type === 'tool_call' ? [p.id] : []));
  if (calls.length > 0) return calls.some((id) => keys.calls.has(id));
  const texts = row.content.flatMap((p) => (p.type === 'text' && p.text.trim() !== '' ? [p.text] : []));
  if (texts.length === 0) return null;
  return texts.every((t) => keys.texts.has(t));
}

/**
 * Tracks, over a replay, which rows have left the request. `evict` takes the rows appended so
 * far and a request, and returns the indexes that left with this request (each once).
 */
export class EvictionTracker {
  private readonly gone = new Set<number>();
  constructor(private readonly rows: readonly RowIn[]) {}

  evict(appended: number, inputs: readonly PlainInput[]): number[] {
    const keys = requestKeys(inputs);
    const out: number[] = [];
    let last = true;
    for (let i = 0; i < appended; i++) {
      const here: boolean = carries(keys, this.rows[i]!) ?? last;
      last = here;
      if (!here && !this.gone.has(i)) {
        this.gone.add(i);
        out.push(i);
      }
    }
    return out;
  }
}
