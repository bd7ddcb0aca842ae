// The benchmark's row corpus: real turns read from the Claude Code and pi fixture transcripts
// (../shared/fixtures), normalized into row templates (user text, assistant turns with tool
// calls, the results right after their call); or, when the fixtures are absent, a generated corpus.
import fs from 'node:fs';
import path from 'node:path';

export type TemplatePart =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'call'; ref: number; name: string; args: Record<string, unknown> };

export type TemplateRow =
  | { kind: 'user'; text: string }
  | { kind: 'assistant'; parts: TemplatePart[] }
  | { kind: 'tool_result'; ref: number; text: string; isError: boolean };

export interface Corpus {
  /** 'fixtures' or 'generated'. */
  source: 'fixtures' | 'generated';
  files: string[];
  rows: TemplateRow[];
  /** Why the fixtures were not used, when they were not. */
  note: string | null;
}

/** The fixture files read, relative to the fixtures folder. */
const CLAUDE_FILES = [
  'claude-code/spotter-autocompact/4d5611e5-241a-462a-8d15-5122611a9569.jsonl',
  'claude-code/spotter-autocompact/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl',
  'claude-code/small/kimuson-v1.0.98-todo-app-438l.jsonl',
  'claude-code/small/spotter-tool-heavy.jsonl',
  'claude-code/small/spotter-short.jsonl',
  'claude-code/images/moredip-images-in-user-messages.jsonl',
];
const PI_FILES = ['pi/pi-mono-before-compaction-v1.jsonl'];

/**
 * Turns a stream of transcript events into valid row order: assistant blocks sharing a message
 * id merge into one row, and each tool result goes right after the assistant row holding its
 * call (results whose call is unknown are dropped).
 */
class Normalizer {
  readonly rows: TemplateRow[] = [];
  private nextRef = 1;
  private current: { msgId: string; parts: TemplatePart[]; refs: Map<string, number>; results: TemplateRow[] } | null = null;
  dropped = 0;

  user(text: string): void {
    if (text.trim() === '') return;
    this.flush();
    this.rows.push({ kind: 'user', text });
  }

  assistantPart(msgId: string, part: { type: 'text' | 'reasoning'; text: string } | { type: 'call'; id: string; name: string; args: Record<string, unknown> }): void {
    if (this.current === null || this.current.msgId !== msgId) {
      this.flush();
      this.current = { msgId, parts: [], refs: new Map(), results: [] };
    }
    if (part.type === 'call') {
      if (this.current.refs.has(part.id)) return;
      const ref = this.nextRef++;
      this.current.refs.set(part.id, ref);
      this.current.parts.push({ type: 'call', ref, name: part.name, args: part.args });
    } else if (part.text.trim() !== '') {
      this.current.parts.push(part);
    }
  }

  result(callId: string, text: string, isError: boolean): void {
    const ref = this.current?.refs.get(callId);
    if (this.current === null || ref === undefined || this.current.results.some((r) => r.kind === 'tool_result' && r.ref === ref)) {
      this.dropped++;
      return;
    }
    this.current.results.push({ kind: 'tool_result', ref, text, isError });
  }

  flush(): void {
    const c = this.current;
    this.current = null;
    if (c === null || c.parts.length === 0) return;
    this.rows.push({ kind: 'assistant', parts: c.parts }, ...c.results);
  }
}

type Json = Record<string, unknown>;

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const out: string[] = [];
  for (const b of content as Json[]) {
    if (b.type === 'text' && typeof b.text === 'string') out.push(b.text);
    else if (b.type === 'image') out.push('[image omitted by the benchmark]');
  }
  return out.join('\n');
}

function parseLines(file: string): Json[] {
  const out: Json[] = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    try {
      out.push(JSON.parse(line) as Json);
    } catch {
      // A broken line is skipped; the corpus only needs realistic text.
    }
  }
  return out;
}

function readClaude(file: string, n: Normalizer): void {
  for (const rec of parseLines(file)) {
    const msg = rec.message as Json | undefined;
    if (msg === undefined) continue;
    if (rec.type === 'user') {
      const content = msg.content;
      if (typeof content === 'string') {
        n.user(content);
        continue;
      }
      if (!Array.isArray(content)) continue;
      const texts: string[] = [];
      for (const b of content as Json[]) {
        if (b.type === 'tool_result' && typeof b.tool_use_id === 'string') n.result(b.tool_use_id, textOf(b.content), b.is_error === true);
        else if (b.type === 'text' && typeof b.text === 'string') texts.push(b.text);
      }
      if (texts.length > 0) n.user(texts.join('\n'));
    } else if (rec.type === 'assistant' && Array.isArray(msg.content)) {
      const id = typeof msg.id === 'string' ? msg.id : String(rec.uuid);
      for (const b of msg.content as Json[]) {
        if (b.type === 'text' && typeof b.text === 'string') n.assistantPart(id, { type: 'text', text: b.text });
        else if (b.type === 'thinking' && typeof b.thinking === 'string') n.assistantPart(id, { type: 'reasoning', text: b.thinking });
        else if (b.type === 'tool_use' && typeof b.id === 'string' && typeof b.name === 'string') {
          n.assistantPart(id, { type: 'call', id: b.id, name: b.name, args: (b.input ?? {}) as Record<string, unknown> });
        }
      }
    }
  }
  n.flush();
}

function readPi(file: string, n: Normalizer): void {
  let line = 0;
  for (const rec of parseLines(file)) {
    line++;
    if (rec.type !== 'message') continue;
    const msg = rec.message as Json;
    if (msg.role === 'user') n.user(textOf(msg.content));
    else if (msg.role === 'assistant' && Array.isArray(msg.content)) {
      const id = `pi:${line}`;
      for (const b of msg.content as Json[]) {
        if (b.type === 'text' && typeof b.text === 'string') n.assistantPart(id, { type: 'text', text: b.text });
        else if (b.type === 'thinking' && typeof b.thinking === 'string') n.assistantPart(id, { type: 'reasoning', text: b.thinking });
        else if (b.type === 'toolCall' && typeof b.id === 'string' && typeof b.name === 'string') {
          n.assistantPart(id, { type: 'call', id: b.id, name: b.name, args: (b.arguments ?? {}) as Record<string, unknown> });
        }
      }
    } else if (msg.role === 'toolResult' && typeof msg.toolCallId === 'string') {
      n.result(msg.toolCallId, textOf(msg.content), msg.isError === true);
    }
  }
  n.flush();
}

/** A small deterministic PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  'the a to of and in is it for that this with on we should not be can file function test error build ' +
  'type module import export return const let async await promise value config session row index query ' +
  'cache page read write append search pattern compact summary window token request response server ' +
  'client daemon socket handler schema migration table column transaction commit rollback timeout retry'
).split(' ');

/** A generated corpus with roughly the shape of the real one (used without fixtures). */
function generatedCorpus(): TemplateRow[] {
  const rnd = prng(42);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const sentence = (words: number): string => Array.from({ length: words }, () => pick(WORDS)).join(' ');
  const code = (lines: number): string =>
    Array.from({ length: lines }, (_, i) => `${String(i + 1).padStart(4)}\t${pick(['const', 'let', 'return', 'if (', 'await'])} ${pick(WORDS)}_${Math.floor(rnd() * 99)} = ${pick(WORDS)}(${pick(WORDS)});`).join('\n');
  const rows: TemplateRow[] = [];
  let ref = 1;
  for (let turn = 0; turn < 600; turn++) {
    rows.push({ kind: 'user', text: sentence(8 + Math.floor(rnd() * 60)) });
    const steps = Math.floor(rnd() * 5);
    for (let s = 0; s < steps; s++) {
      const calls = 1 + Math.floor(rnd() * 2);
      const parts: TemplatePart[] = [{ type: 'text', text: sentence(5 + Math.floor(rnd() * 40)) }];
      const refs: number[] = [];
      for (let c = 0; c < calls; c++) {
        refs.push(ref);
        const name = pick(['read', 'bash', 'edit', 'grep']);
        parts.push({ type: 'call', ref: ref++, name, args: name === 'bash' ? { command: `npm run ${pick(WORDS)}` } : { path: `src/${pick(WORDS)}/${pick(WORDS)}.ts` } });
      }
      rows.push({ kind: 'assistant', parts });
      for (const r of refs) {
        // Tool outputs: mostly short, sometimes a whole file.
        const lines = rnd() < 0.7 ? 1 + Math.floor(rnd() * 15) : 40 + Math.floor(rnd() * 400);
        rows.push({ kind: 'tool_result', ref: r, text: code(lines), isError: rnd() < 0.05 });
      }
    }
    rows.push({ kind: 'assistant', parts: [{ type: 'text', text: sentence(20 + Math.floor(rnd() * 150)) }] });
  }
  return rows;
}

/** Loads the fixture corpus from `dir`, or the generated one when nothing usable is there. */
export function loadCorpus(dir: string): Corpus {
  const files: string[] = [];
  const n = new Normalizer();
  if (fs.existsSync(dir)) {
    for (const f of CLAUDE_FILES) {
      const p = path.join(dir, f);
      if (!fs.existsSync(p)) continue;
      readClaude(p, n);
      files.push(f);
    }
    for (const f of PI_FILES) {
      const p = path.join(dir, f);
      if (!fs.existsSync(p)) continue;
      readPi(p, n);
      files.push(f);
    }
  }
  if (n.rows.filter((r) => r.kind === 'user').length >= 10) return { source: 'fixtures', files, rows: n.rows, note: null };
  const why = fs.existsSync(dir) ? `no usable Claude Code / pi fixture in ${dir}` : `${dir} not found`;
  return { source: 'generated', files: [], rows: generatedCorpus(), note: `${why}; using a generated corpus` };
}

export interface CorpusStats {
  templates: number;
  by_kind: Record<string, { rows: number; avg_chars: number; max_chars: number }>;
}

export function corpusStats(c: Corpus): CorpusStats {
  const acc: Record<string, { rows: number; chars: number; max: number }> = {};
  for (const r of c.rows) {
    const len = r.kind === 'assistant' ? r.parts.reduce((n, p) => n + (p.type === 'call' ? JSON.stringify(p.args).length + p.name.length : p.text.length), 0) : r.text.length;
    const a = (acc[r.kind] ??= { rows: 0, chars: 0, max: 0 });
    a.rows++;
    a.chars += len;
    a.max = Math.max(a.max, len);
  }
  const by_kind: CorpusStats['by_kind'] = {};
  for (const [k, a] of Object.entries(acc)) by_kind[k] = { rows: a.rows, avg_chars: Math.round(a.chars / a.rows), max_chars: a.max };
  return { templates: c.rows.length, by_kind };
}
