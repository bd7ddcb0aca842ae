// What the offline summarizer reads out of a summary prompt: the transcript as entries (a
// message, a tool call with its result), the identifiers each mentions, and from those the
// facts a summary is made of (the task, files touched and what changed, errors and their
// fixes, what was verified, open work, the next step, other findings). Choosing and writing
// the facts within a budget is extractive.ts's job.
import type { Steps } from '../../protocol/time-slice.ts';
import { BLOB_PLACEHOLDER, parseTranscriptLine, redactBlobs, type TranscriptLineKind } from './prompt-format.ts';
import { IMAGE_MARKER_PATTERN } from '../../storage/transcript/row-text.ts';

// ---------------------------------------------------------------------------------------------
// Identifiers and line features

// dprint-ignore
const FILE_EXTENSIONS = new Set([
  'ts', 'tsx', 'mts', 'cts', 'js', 'jsx', 'mjs', 'cjs', 'json', 'jsonl', 'py', 'pyi', 'rs', 'go', 'java', 'kt',
  'c', 'h', 'cc', 'cpp', 'hpp', 'cs', 'rb', 'php', 'swift', 'scala', 'ex', 'exs', 'heex', 'eex', 'erl', 'gleam', 'hs', 'ml',
  'lua', 'sh', 'bash', 'zsh', 'ps1', 'md', 'rst', 'txt', 'yml', 'yaml', 'toml', 'ini', 'cfg', 'conf', 'env',
  'lock', 'sql', 'db', 'css', 'scss', 'html', 'vue', 'svelte', 'xml', 'proto', 'gradle', 'tf', 'nix', 'log',
  'csv', 'png', 'jpg', 'svg', 'wasm', 'zig', 'dart', 'r', 'jl', 'sol',
]);
// dprint-ignore
const KEYWORDS = new Set([
  'decided', 'decide', 'decision', 'agreed', 'must', 'should', 'will', 'need', 'needs', 'required',
  'never', 'always', "don't", 'dont', 'instead', 'because', 'plan', 'planned', 'next', 'todo',
  'fix', 'fixed', 'fixes', 'bug', 'bugs', 'error', 'errors', 'failed', 'fails', 'failing', 'failure',
  'broken', 'crash', 'crashes', 'exception', 'panic', 'regression', 'missing', 'warning', 'cannot',
  "can't", 'problem', 'issue', 'cause', 'caused', 'found', 'reverted', 'revert', 'blocked', 'remaining',
  'done', 'verified', 'verify', 'works', 'passes', 'passing', 'tested', 'confirmed',
]);
/** The shortest and longest keyword: a word of another length is not looked up. */
const KEYWORD_LENGTHS = { min: Math.min(...[...KEYWORDS].map((k) => k.length)), max: Math.max(...[...KEYWORDS].map((k) => k.length)) };
// dprint-ignore
const STOPWORDS = new Set([
  'the', 'and', 'for', 'with', 'that', 'this', 'from', 'into', 'about', 'what', 'when', 'where',
  'which', 'keep', 'are', 'was', 'were', 'has', 'have', 'had', 'not', 'but', 'all', 'any', 'our',
  'you', 'your', 'its', 'then', 'than', 'there', 'their', 'them', 'they', 'how', 'why', 'who',
  'can', 'also', 'just', 'only', 'some', 'more', 'most', 'other', 'such', 'very', 'one', 'out',
]);

const CUT_MARKER = /\[…\d+ more characters cut\]/g;
const BACKTICKED = /`[^`\n]+`/g;
const TOKEN = /[\w$@.:/~+-]+/;
const CAMEL = /^[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*$/;
const PASCAL = /^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$/;
const SNAKE = /^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+$/;
const DOTTED = /^[A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)+$/;
const VERSION = /^v?\d+(?:\.\d+)+[\w.+-]*$/;
const HEX = /^(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,64}$/i;
const ERROR_CODE = /^(?:[A-Z]{1,6}-?\d{2,}|E[A-Z]{3,})$/;
const NUMBER = /^-?\d{3,}(?:[.,]\d+)?(?:ms|s|kb|mb|gb|k|m|%|px)?$/i;
const ARITY = /\/\d+$/;
const WORD = /[\p{L}\p{N}_']+/gu;
const PLAIN_WORD = /^[a-z]+$/;

export type IdKind = 'path' | 'symbol' | 'number';

function isPath(tok: string): boolean {
  if (tok.includes('/')) {
    // Two path segments with something word-like on each side; bare "/" or "a/" are not paths.
    return /[\w.~-]\/[\w.@-]/.test(tok) || /^\/[\w.@-]+/.test(tok);
  }
  const dot = tok.lastIndexOf('.');
  if (dot <= 0 || dot === tok.length - 1) return false;
  return /^[\w.@-]+$/.test(tok) && /[A-Za-z_]/.test(tok.slice(0, dot)) && FILE_EXTENSIONS.has(tok.slice(dot + 1).toLowerCase());
}

function isSymbol(tok: string): boolean {
  if (CAMEL.test(tok) || PASCAL.test(tok) || SNAKE.test(tok)) return true;
  if (!DOTTED.test(tok)) return false;
  // `MapSet.new`, `Enum.take`, `a.fooBar`: a module or a code-like part; not "e.g" or "i.e".
  const parts = tok.split(/\.|::/);
  return /^[A-Z]/.test(parts[0] ?? '') || parts.some((p) => CAMEL.test(p) || SNAKE.test(p) || PASCAL.test(p));
}

/** One token's identifier, if it is one: leading sigils (`@attr`, `:atom`) and an arity (`f/2`) dropped. */
function identifierOf(raw: string): { id: string; kind: IdKind } | undefined {
  // Most tokens are short or plain words, which the trimming below cannot turn into anything else.
  if (raw.length < 3 || PLAIN_WORD.test(raw)) return undefined;
  let tok = raw.replace(/^[@:+~-]+(?=[\w/.~])/, '').replace(/[.:,+-]+$/, '');
  if (tok.length < 3 || tok.length > 120) return undefined;
  if (ARITY.test(tok) && !tok.slice(0, tok.lastIndexOf('/')).includes('/')) tok = tok.replace(ARITY, '');
  if (PLAIN_WORD.test(tok)) return undefined;
  if (isPath(tok)) return { id: tok.replace(/^~(?=\/)/, '~'), kind: 'path' };
  if (isSymbol(tok)) return { id: tok, kind: 'symbol' };
  if (VERSION.test(tok) || HEX.test(tok) || ERROR_CODE.test(tok) || NUMBER.test(tok)) return { id: tok, kind: 'number' };
  return undefined;
}

/**
 * The text with each cut marker and the token it cut short (`load_ses […1436 more characters
 * cut]`) replaced by a space: neither names anything. The token is the run of characters other
 * than whitespace and `[` before the marker, across at most one whitespace character, and never
 * reaching back into the previous replacement. Found by walking back from each marker: a regex
 * that starts with that run (`[^\s[]*\s?\[…`) retries it from every position, quadratic in
 * long unbroken runs, and was a seventh of the summarizer's time on long tool output.
 */
export function withoutCutTokens(text: string): string {
  if (!text.includes('more characters cut]')) return text;
  let out = '';
  let done = 0;
  for (const m of text.matchAll(CUT_MARKER)) {
    let start = m.index;
    if (start > done && /\s/.test(text[start - 1]!)) start--;
    while (start > done && !/[\s[]/.test(text[start - 1]!)) start--;
    out += `${text.slice(done, start)} `;
    done = m.index + m[0].length;
  }
  return out + text.slice(done);
}

/** Character codes below 128 that TOKEN's runs are made of. */
const TOKEN_CODES = (() => {
  const codes = new Uint8Array(128);
  const one = new RegExp(`^${TOKEN.source}$`);
  for (let c = 0; c < 128; c++) if (one.test(String.fromCharCode(c))) codes[c] = 1;
  return codes;
})();

/**
 * Calls `visit` with the bounds of each run of TOKEN in `text`, in order: what
 * `text.matchAll(TOKEN)` finds, without a match array for every word. The summarizer reads
 * every word of every prompt, and those arrays were most of what a compaction allocated (its
 * collections then paused the daemon for every session).
 */
export function eachToken(text: string, visit: (start: number, end: number) => void): void {
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c >= 128 || TOKEN_CODES[c] === 0) {
      i++;
      continue;
    }
    const start = i;
    do i++; while (i < n && text.charCodeAt(i) < 128 && TOKEN_CODES[text.charCodeAt(i)] === 1);
    visit(start, i);
  }
}

/** Whether text[start, end) is a PLAIN_WORD: ASCII lowercase letters only. */
function isPlainWord(text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c < 97 || c > 122) return false;
  }
  return end > start;
}

/** Calls `visit` with each identifier of a text, in order, as often as it occurs. */
function eachIdentifier(text: string, visit: (id: string, kind: IdKind) => void): void {
  const clean = withoutCutTokens(text);
  eachToken(clean, (start, end) => {
    // What identifierOf refuses first, decided without cutting the word out.
    if (end - start < 3 || isPlainWord(clean, start, end)) return;
    const found = identifierOf(clean.slice(start, end));
    if (found !== undefined) visit(found.id, found.kind);
  });
}

/** The identifiers of a text, once each, in order of first appearance. */
export function identifiers(text: string): Map<string, IdKind> {
  const out = new Map<string, IdKind>();
  eachIdentifier(text, (id, kind) => {
    if (!out.has(id)) out.set(id, kind);
  });
  return out;
}

export interface Features {
  paths: number;
  identifiers: number;
  numbers: number;
  keywords: number;
}

/** Counts what a line carries: paths, identifiers (with `backticked` spans), numbers, decision words. */
export function features(text: string): Features {
  const clean = text.replace(IMAGE_MARKER_PATTERN, ' ').replace(CUT_MARKER, ' ').replaceAll(BLOB_PLACEHOLDER, ' ');
  const f: Features = { paths: 0, identifiers: (clean.match(BACKTICKED) ?? []).length, numbers: 0, keywords: 0 };
  eachToken(clean, (start, end) => {
    if (isPlainWord(clean, start, end)) {
      const length = end - start;
      if (length >= KEYWORD_LENGTHS.min && length <= KEYWORD_LENGTHS.max && KEYWORDS.has(clean.slice(start, end))) f.keywords++;
      return;
    }
    const raw = clean.slice(start, end);
    const found = identifierOf(raw);
    if (found?.kind === 'path') f.paths++;
    else if (found?.kind === 'symbol') f.identifiers++;
    else if (found?.kind === 'number') f.numbers++;
    if (KEYWORDS.has(raw.toLowerCase())) f.keywords++;
  });
  for (const w of clean.toLowerCase().match(/\b(?:don't|can't)\b/g) ?? []) if (KEYWORDS.has(w)) f.keywords++;
  return f;
}

/** Lowercase words of two or more characters. */
export function wordSet(text: string): Set<string> {
  const out = new Set<string>();
  for (const w of text.toLowerCase().match(WORD) ?? []) if (w.length >= 2) out.add(w);
  return out;
}

export function focusWords(focus: string | undefined): Set<string> {
  const out = new Set<string>();
  for (const w of wordSet(focus ?? '')) if (w.length >= 3 && !STOPWORDS.has(w)) out.add(w);
  return out;
}

/**
 * What a line carries, as a number: 3 per file path, 1.5 per identifier, 1 per number, version,
 * hash or error code, 2 per decision or open-work word, each kind capped so one long line cannot
 * win on volume, plus 3 per focus word it shares (up to 3). 0 for a line that carries nothing.
 */
export function contentScore(text: string, focus: ReadonlySet<string>): number {
  const f = features(text);
  let s = 3 * Math.min(f.paths, 3) + 1.5 * Math.min(f.identifiers, 4) + Math.min(f.numbers, 3) + 2 * Math.min(f.keywords, 3);
  if (focus.size > 0) {
    const words = wordSet(text);
    let shared = 0;
    for (const w of focus) if (words.has(w)) shared++;
    s += 3 * Math.min(shared, 3);
  }
  return s;
}

/** Prose rather than code, markup or a log line: mostly letters, starting with a word, at least `n` words. */
export function isProse(line: string, n = 4): boolean {
  const t = line.replace(/^(?:[-*•]|\d+[.)])\s+/, '').replace(/\*\*/g, '');
  if (!/^[\p{L}`"'(]/u.test(t) || !hasWords(t, n)) return false;
  const chars = t.replace(/\s+/g, '');
  const letters = (chars.match(/\p{L}/gu) ?? []).length;
  return letters >= chars.length * 0.6;
}

/** Whether a line has at least `n` words: "ok", "let me look" are chat, not content. */
export function hasWords(text: string, n: number): boolean {
  return text.split(/\s+/, n + 1).filter((w) => w !== '' && w !== '-').length >= n;
}

// ---------------------------------------------------------------------------------------------
// Entries: the transcript as messages and tool calls

export interface Call {
  name: string;
  args: Map<string, unknown>;
}

export interface Entry {
  /** Position in the transcript, from 0. */
  index: number;
  kind: Exclude<TranscriptLineKind, 'continuation'>;
  /** `¶user (notes):` -> 'notes'. */
  origin?: string;
  /** The entry's text, continuation lines included (their two-space indent removed). */
  text: string;
  isError: boolean;
  /** For `call` entries. */
  call?: Call;
  /** For `out` entries: the call it answers (calls are answered in the order they were made). */
  answers?: Entry;
  /** For `call` entries: the output that answered it. */
  result?: Entry;
}

/**
 * The JSON value starting at `at` (a string, number, literal, object or array) and where it ends;
 * for a value cut short (the call line was capped), what there is of it.
 */
function jsonValue(text: string, at: number): { value: unknown; end: number } {
  const c = text[at];
  let end = at;
  if (c === '"') {
    end = at + 1;
    while (end < text.length && text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
    const raw = text.slice(at, Math.min(end + 1, text.length));
    try {
      return { value: JSON.parse(raw.endsWith('"') && raw.length > 1 ? raw : `${raw.replace(/\\$/, '')}"`), end: end + 1 };
    } catch {
      return { value: raw.slice(1), end: end + 1 };
    }
  }
  if (c === '{' || c === '[') {
    let depth = 0;
    for (; end < text.length; end++) {
      const ch = text[end];
      if (ch === '"') {
        end++;
        while (end < text.length && text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      } else if (ch === '{' || ch === '[') depth++;
      else if (ch === '}' || ch === ']') {
        depth--;
        if (depth === 0) break;
      }
    }
    const raw = text.slice(at, end + 1);
    try {
      return { value: JSON.parse(raw), end: end + 1 };
    } catch {
      return { value: raw, end: end + 1 };
    }
  }
  const stop = text.indexOf(', ', at);
  end = stop < 0 ? text.length : stop;
  const raw = text.slice(at, end).replace(/\)$/, '');
  try {
    return { value: JSON.parse(raw), end };
  } catch {
    return { value: raw, end };
  }
}

/** `name(k = v, ...)` (callLine's layout) read back into a name and argument values. */
export function parseCall(text: string): Call {
  const open = text.indexOf('(');
  const name = open < 0 ? text.trim() : text.slice(0, open).trim();
  const args = new Map<string, unknown>();
  if (open < 0) return { name, args };
  const arg = /(?:, )?([\w$-]+) = /y;
  let at = open + 1;
  while (at < text.length) {
    arg.lastIndex = at;
    const m = arg.exec(text);
    if (m === null || m[1] === undefined) break;
    const v = jsonValue(text, arg.lastIndex);
    args.set(m[1], v.value);
    at = v.end;
  }
  return { name, args };
}

/** The transcript's entries, calls linked with their results; a step per line (see runSteps). */
export function* entrySteps(transcript: string): Steps<Entry[]> {
  const entries: Entry[] = [];
  const pending: Entry[] = [];
  let current: Entry | undefined;
  for (const raw of transcript.split('\n')) {
    yield;
    const parsed = parseTranscriptLine(redactBlobs(raw));
    if (parsed.kind === 'continuation') {
      if (current === undefined) {
        current = { index: entries.length, kind: 'note', text: parsed.text, isError: false };
        entries.push(current);
      } else current.text += `\n${parsed.text.replace(/^ {2}/, '')}`;
      continue;
    }
    current = { index: entries.length, kind: parsed.kind, text: parsed.text, isError: parsed.isError === true };
    if (parsed.kind === 'user' && parsed.origin !== undefined) current.origin = parsed.origin;
    if (parsed.kind === 'call') {
      current.call = parseCall(parsed.text);
      pending.push(current);
    } else if (parsed.kind === 'out') {
      const call = pending.shift();
      if (call !== undefined) {
        current.answers = call;
        call.result = current;
      }
    } else if (parsed.kind === 'user') pending.length = 0;
    entries.push(current);
  }
  return entries;
}

// ---------------------------------------------------------------------------------------------
// Later references

/** Weight of a mention by entry kind: a tool output (file contents, logs) mentions everything. */
function mentionWeight(kind: Entry['kind']): number {
  return kind === 'out' ? 0.34 : 1;
}

/**
 * For each identifier, the entries that mention it (ascending) with their weights; how much
 * later turns refer back to an identifier is the weight of the mentions after a given entry.
 */
export class References {
  private readonly at = new Map<string, { index: number[]; weight: number[] }>();
  /** Identifiers the assistant or the user wrote (not only tools). */
  readonly spoken = new Set<string>();

  private constructor() {}

  /** The references of `entries`, a step per entry (see runSteps). */
  static *of(entries: readonly Entry[]): Steps<References> {
    const refs = new References();
    for (const e of entries) {
      yield;
      refs.add(e);
    }
    return refs;
  }

  /** Counts the mentions of one entry, the next in transcript order. */
  private add(e: Entry): void {
    const w = mentionWeight(e.kind);
    // An image marker's hash and size name nothing a summary keeps.
    const text = e.text.includes('[image ') ? e.text.replace(IMAGE_MARKER_PATTERN, ' ') : e.text;
    const spoken = e.kind === 'ai' || e.kind === 'user' || e.kind === 'thinking';
    eachIdentifier(text, (id) => {
      let r = this.at.get(id);
      if (r === undefined) this.at.set(id, r = { index: [], weight: [] });
      // Once per entry: entries are added in order, so an earlier mention here is the last one kept.
      else if (r.index[r.index.length - 1] === e.index) return;
      r.index.push(e.index);
      r.weight.push(w);
      if (spoken) this.spoken.add(id);
    });
  }

  /** Weighted mentions of `id` in entries after `entry` (-1: the whole transcript). */
  after(id: string, entry: number): number {
    const r = this.at.get(id);
    if (r === undefined) return 0;
    let lo = 0;
    let hi = r.index.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((r.index[mid] ?? 0) <= entry) lo = mid + 1;
      else hi = mid;
    }
    let sum = 0;
    for (let i = lo; i < r.index.length; i++) sum += r.weight[i] ?? 0;
    return sum;
  }

  /** Every identifier seen, the most mentioned (by weight) first; ties keep first appearance. */
  ranked(): string[] {
    const all = [...this.at.entries()].map(([id, r]) => ({ id, w: r.weight.reduce((a, b) => a + b, 0) }));
    // Array.prototype.sort is stable: equal weights stay in first-appearance (insertion) order.
    return all.sort((a, b) => b.w - a.w).map((x) => x.id);
  }

  /** How much later entries refer back to what `text` names: per identifier at most 3, in all at most 8. */
  of(text: string, entry: number): number {
    let sum = 0;
    for (const id of identifiers(text).keys()) sum += Math.min(3, this.after(id, entry));
    return Math.min(8, sum);
  }
}
