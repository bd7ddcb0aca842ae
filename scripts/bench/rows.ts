// Turns corpus templates into an endless, valid stream of client rows for one session: fresh
// tool-call ids on every pass over the corpus, idempotency keys, and optional needle text
// injected into chosen rows so search patterns have known, size-independent match counts.
import type { RowIn } from '../../protocol/rows.ts';
import type { Corpus, TemplateRow } from './corpus.ts';

export interface StreamOptions {
  /** Template index to start at; moved forward to the next user row. */
  start?: number;
  /** Prefix of the rows' idempotency keys. */
  keyPrefix: string;
  /** Extra text for the i-th row of the stream (0-based), or null. */
  inject?: (i: number) => string | null;
  /** Distinguishes this stream's tool-call ids from another stream's in the same session. */
  idTag?: string;
}

export class RowStream {
  private pos: number;
  private pass = 0;
  private emitted = 0;
  private readonly templates: readonly TemplateRow[];

  constructor(
    corpus: Corpus,
    private readonly opts: StreamOptions,
  ) {
    this.templates = corpus.rows;
    let p = (opts.start ?? 0) % this.templates.length;
    // A stream must not begin with a tool result whose call it never sent.
    while (this.templates[p]!.kind !== 'user') p = (p + 1) % this.templates.length;
    this.pos = p;
  }

  /** Rows sent so far. */
  get count(): number {
    return this.emitted;
  }

  next(): RowIn {
    const t = this.templates[this.pos]!;
    this.pos++;
    if (this.pos === this.templates.length) {
      this.pos = 0;
      this.pass++;
    }
    const i = this.emitted++;
    const extra = this.opts.inject?.(i) ?? null;
    const key = `${this.opts.keyPrefix}${i}`;
    const callId = (ref: number): string => `call_${ref}_${this.opts.idTag ?? ''}${this.pass}`;
    const plus = (text: string): string => (extra === null ? text : `${text}\n${extra}`);
    switch (t.kind) {
      case 'user':
        return { kind: 'user', origin: 'user', key, content: [{ type: 'text', text: plus(t.text) }] };
      case 'tool_result':
        return { kind: 'tool_result', key, call_id: callId(t.ref), is_error: t.isError, content: [{ type: 'text', text: plus(t.text) }] };
      case 'assistant': {
        const content: Extract<RowIn, { kind: 'assistant' }>['content'] = [];
        if (extra !== null) content.push({ type: 'text', text: extra });
        for (const p of t.parts) {
          if (p.type === 'text') content.push({ type: 'text', text: p.text });
          else if (p.type === 'reasoning') content.push({ type: 'reasoning', provider: 'anthropic', text: p.text });
          else content.push({ type: 'tool_call', id: callId(p.ref), name: p.name, arguments: p.args });
        }
        return { kind: 'assistant', key, provider: 'anthropic', model: 'claude-opus-4-5', content };
      }
    }
  }

  take(n: number): RowIn[] {
    const out: RowIn[] = [];
    for (let i = 0; i < n; i++) out.push(this.next());
    return out;
  }
}

/** The corpus split into units (a user row and what follows it up to the next one). */
export function corpusUnits(corpus: Corpus): Array<{ start: number; rows: number; chars: number }> {
  const out: Array<{ start: number; rows: number; chars: number }> = [];
  corpus.rows.forEach((r, i) => {
    if (r.kind === 'user') out.push({ start: i, rows: 0, chars: 0 });
    const u = out[out.length - 1];
    if (u === undefined) return;
    u.rows++;
    u.chars += r.kind === 'assistant' ? r.parts.reduce((n, p) => n + (p.type === 'call' ? JSON.stringify(p.args).length : p.text.length), 0) : r.text.length;
  });
  return out;
}

/** Template indexes of user rows, for spreading streams' starting points over the corpus. */
export function userStarts(corpus: Corpus): number[] {
  const out: number[] = [];
  corpus.rows.forEach((r, i) => {
    if (r.kind === 'user') out.push(i);
  });
  return out;
}
