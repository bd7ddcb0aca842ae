// The offline summarizer: keeps the most informative lines of a summary prompt (previous
// summary first, then transcript) within the output budget, deterministically and without a
// model. It reads prompts in the prompt-format.ts layout; building them is the strategies' job.
import {
  BLOB_PLACEHOLDER,
  parseSummaryPrompt,
  parseTranscriptLine,
  redactBlobs,
  type TranscriptLineKind,
} from './prompt-format.ts';
import { IMAGE_MARKER_PATTERN } from '../../storage/row-text.ts';
import { textTokens } from '../estimate.ts';
import { summarizerFailed, type Summarizer, type SummaryRequest, type SummaryResult } from './types.ts';

/** Output headings, in output order. A previous summary's own headings are not copied again. */
export const EXTRACTIVE_HEADINGS = ['Earlier summary:', 'User requests:', 'Actions and findings:'] as const;
const GROUP_SUMMARY = 0;
const GROUP_USER = 1;
const GROUP_ACTIONS = 2;
type Group = 0 | 1 | 2;

/** Bytes of output per token of maxOutputTokens. */
const BYTES_PER_TOKEN = 4;
/** Below this budget (bytes) headings cost more than they tell; lines go out bare. */
const MIN_BUDGET_FOR_HEADINGS = 200;
/** Longest line kept (bytes): user lines get more room, because intent is the point. */
const LINE_CAP_USER = 1200;
const LINE_CAP_OTHER = 480;
/** Share of the budget the previous summary may claim before the transcript gets its turn. */
const SUMMARY_SHARE = 2 / 3;
/** A tool output (file contents, logs) contributes at most this many lines. */
const MAX_LINES_PER_OUTPUT = 3;
/** Rank bonus of the newest transcript line over the oldest: later history is closer to the work at hand. */
const RECENCY_BONUS = 0.2;
/** Two lines whose word sets overlap at least this much (Jaccard) are near-duplicates. */
const NEAR_DUPLICATE = 0.8;
const ELLIPSIS = '…';

const KEYWORDS = new Set([
  'decided', 'decide', 'decision', 'agreed', 'must', 'should', 'will', 'need', 'needs', 'required',
  'never', 'always', "don't", 'dont', 'instead', 'because', 'plan', 'planned', 'next', 'todo',
  'fix', 'fixed', 'fixes', 'bug', 'bugs', 'error', 'errors', 'failed', 'fails', 'failing', 'failure',
  'broken', 'crash', 'crashes', 'exception', 'panic', 'regression', 'missing', 'warning', 'cannot',
  "can't", 'problem', 'issue', 'cause', 'caused', 'found', 'reverted', 'revert', 'blocked', 'remaining',
  'done', 'verified', 'verify', 'works', 'passes', 'passing', 'tested', 'confirmed',
]);
const STOPWORDS = new Set([
  'the', 'and', 'for', 'with', 'that', 'this', 'from', 'into', 'about', 'what', 'when', 'where',
  'which', 'keep', 'are', 'was', 'were', 'has', 'have', 'had', 'not', 'but', 'all', 'any', 'our',
  'you', 'your', 'its', 'then', 'than', 'there', 'their', 'them', 'they', 'how', 'why', 'who',
  'can', 'also', 'just', 'only', 'some', 'more', 'most', 'other', 'such', 'very', 'one', 'out',
]);
const FILE_EXTENSIONS = new Set([
  'ts', 'tsx', 'mts', 'cts', 'js', 'jsx', 'mjs', 'cjs', 'json', 'jsonl', 'py', 'pyi', 'rs', 'go', 'java', 'kt',
  'c', 'h', 'cc', 'cpp', 'hpp', 'cs', 'rb', 'php', 'swift', 'scala', 'ex', 'exs', 'erl', 'gleam', 'hs', 'ml',
  'lua', 'sh', 'bash', 'zsh', 'ps1', 'md', 'rst', 'txt', 'yml', 'yaml', 'toml', 'ini', 'cfg', 'conf', 'env',
  'lock', 'sql', 'db', 'css', 'scss', 'html', 'vue', 'svelte', 'xml', 'proto', 'gradle', 'tf', 'nix', 'log',
  'csv', 'png', 'jpg', 'svg', 'wasm', 'zig', 'dart', 'r', 'jl', 'sol',
]);

const CUT_MARKER = /\[…\d+ more characters cut\]/g;
const BACKTICKED = /`[^`\n]+`/g;
const TOKEN_SPLIT = /[\s"'()[\]{},;<>|]+/;
const TRAILING_PUNCT = /[.:!?]+$/;
const CAMEL = /^[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*$/;
const PASCAL = /^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$/;
const SNAKE = /^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+$/;
const VERSION = /^v?\d+(?:\.\d+)+[\w.+-]*$/;
const HEX = /^(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,64}$/i;
const ERROR_CODE = /^(?:[A-Z]{1,6}-?\d{2,}|E[A-Z]{3,})$/;
const NUMBER = /^-?\d{2,}(?:[.,]\d+)?(?:ms|s|kb|mb|gb|k|m|%|px)?$/i;
const WORD = /[\p{L}\p{N}_']+/gu;

interface Features {
  paths: number;
  identifiers: number;
  numbers: number;
  keywords: number;
}

const PLAIN_WORD = /^[a-z]+$/;

function isPath(tok: string): boolean {
  const slash = tok.indexOf('/');
  if (slash >= 0) {
    // Two path segments with something word-like on each side; bare "/" or "a/" are not paths.
    return /[\w.~-]\/[\w.@-]/.test(tok) || /^\/[\w.@-]+/.test(tok);
  }
  const dot = tok.lastIndexOf('.');
  if (dot <= 0 || dot === tok.length - 1) return false;
  return /^[\w.@-]+$/.test(tok) && /[A-Za-z_]/.test(tok.slice(0, dot)) && FILE_EXTENSIONS.has(tok.slice(dot + 1).toLowerCase());
}

/** Counts what a line carries. One pass over its whitespace-separated tokens, plus backticks. */
function features(text: string): Features {
  const f: Features = { paths: 0, identifiers: 0, numbers: 0, keywords: 0 };
  f.identifiers += (text.match(BACKTICKED) ?? []).length;
  for (const raw of text.split(TOKEN_SPLIT)) {
    if (raw === '' || raw === BLOB_PLACEHOLDER) continue;
    const tok = raw.replace(TRAILING_PUNCT, '');
    if (tok === '') continue;
    // Most tokens are plain lowercase words: only the keyword lookup can match them.
    if (PLAIN_WORD.test(tok)) {
      if (KEYWORDS.has(tok)) f.keywords++;
      continue;
    }
    if (isPath(tok)) f.paths++;
    else if (CAMEL.test(tok) || PASCAL.test(tok) || SNAKE.test(tok)) f.identifiers++;
    else if (VERSION.test(tok) || HEX.test(tok) || ERROR_CODE.test(tok) || NUMBER.test(tok)) f.numbers++;
    if (KEYWORDS.has(tok.toLowerCase())) f.keywords++;
  }
  return f;
}

/** Lowercase words of two or more characters. */
function wordSet(text: string): Set<string> {
  const out = new Set<string>();
  for (const w of text.toLowerCase().match(WORD) ?? []) if (w.length >= 2) out.add(w);
  return out;
}

function focusWords(focus: string | undefined): Set<string> {
  const out = new Set<string>();
  for (const w of wordSet(focus ?? '')) if (w.length >= 3 && !STOPWORDS.has(w)) out.add(w);
  return out;
}

/** Cuts `text` to at most `maxBytes` UTF-8 bytes, at a character boundary, ending in '…'. */
export function clipUtf8(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  const room = maxBytes - Buffer.byteLength(ELLIPSIS, 'utf8');
  if (room <= 0) return '';
  const buf = Buffer.from(text, 'utf8');
  let cut = room;
  while (cut > 0 && ((buf[cut] ?? 0) & 0xc0) === 0x80) cut--; // never split a multi-byte sequence
  return buf.subarray(0, cut).toString('utf8') + ELLIPSIS;
}

interface Candidate {
  /** Position in the prompt (summary lines first), for output order and tie-breaks. */
  order: number;
  group: Group;
  /** Which transcript entry (message, call, output) the line belongs to; -1 for the summary. */
  entry: number;
  isOutput: boolean;
  line: string;
  bytes: number;
  score: number;
  rank: number;
  /** Computed when first needed: most lines never get that far. */
  key?: string;
  words?: Set<string>;
}

const BASE_SCORE: Record<TranscriptLineKind, number> = {
  user: 5,
  call: 2,
  note: 1,
  ai: 0.5,
  thinking: 0,
  out: 0,
  continuation: 0,
};

/**
 * A line's score is what it carries: 3 per file path, 1.5 per identifier (camelCase, snake_case,
 * PascalCase, `backticked`), 1 per number, version, hash or error code, 2 per decision or
 * open-work word, each kind capped so one long line cannot win on volume; tool output counts
 * 0.6 of that. Sharing words with the focus adds 3 per word (up to 3). Lines that carry
 * something then get their role's base (BASE_SCORE: user requests most, then tool calls);
 * lines that carry nothing score their base only if they have at least four words, else 0.
 */
function score(text: string, base: number, isOutput: boolean, focus: Set<string>): { score: number; words?: Set<string> } {
  const f = features(text.replace(IMAGE_MARKER_PATTERN, ' ').replace(CUT_MARKER, ' '));
  let s =
    3 * Math.min(f.paths, 3) +
    1.5 * Math.min(f.identifiers, 4) +
    1 * Math.min(f.numbers, 3) +
    2 * Math.min(f.keywords, 3);
  // Tool output is mostly file contents and logs, dense with identifiers that say little alone.
  if (isOutput) s *= 0.6;
  let words: Set<string> | undefined;
  if (focus.size > 0) {
    words = wordSet(text);
    let shared = 0;
    for (const w of focus) if (words.has(w)) shared++;
    s += 3 * Math.min(shared, 3);
  }
  if (s > 0) return { score: s + base, words };
  // Chat filler ("ok", "let me look") carries nothing; a line of a few plain words scores 0.
  const wordCount = text.split(/\s+/, 5).filter((w) => w !== '' && w !== '-').length;
  return { score: wordCount < 4 ? 0 : base, words };
}

function dedupeKey(line: string): string {
  return line.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, ' ').trim();
}

function nearDuplicate(a: Set<string>, b: Set<string>): boolean {
  if (a.size < 4 || b.size < 4) return false;
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  if (small.size / large.size < NEAR_DUPLICATE) return false;
  let shared = 0;
  for (const w of small) if (large.has(w)) shared++;
  return shared / (a.size + b.size - shared) >= NEAR_DUPLICATE;
}

/** Candidate lines of a prompt, each already redacted, clipped, scored and ranked. */
function candidates(prompt: string, lineRoom: number): Candidate[] {
  const parts = parseSummaryPrompt(prompt);
  const focus = focusWords(parts.focus);
  const out: Candidate[] = [];
  const push = (group: Group, entry: number, isOutput: boolean, text: string, base: number, cap: number): void => {
    const line = clipUtf8(redactBlobs(text), Math.min(cap, lineRoom));
    if (line === '' || line === '- ') return;
    const { score: s, words } = score(line, base, isOutput, focus);
    const bytes = Buffer.byteLength(line, 'utf8');
    // Density, softened: a long line needs more to say than a short one, but not pro rata.
    const rank = s / Math.sqrt(Math.max(bytes, 32) / 32);
    out.push({ order: out.length, group, entry, isOutput, line, bytes, score: s, rank, words });
  };

  const headings = new Set<string>(EXTRACTIVE_HEADINGS);
  for (const raw of (parts.previousSummary ?? '').split('\n')) {
    const text = raw.trim();
    if (text === '' || headings.has(text)) continue;
    push(GROUP_SUMMARY, -1, false, text, 2, LINE_CAP_OTHER);
  }

  let entry = -1;
  let current: TranscriptLineKind = 'note';
  let isError = false;
  for (const raw of parts.transcript.split('\n')) {
    const parsed = parseTranscriptLine(raw);
    let label = '';
    if (parsed.kind !== 'continuation') {
      entry++;
      current = parsed.kind;
      isError = parsed.isError === true;
      if (parsed.kind === 'user' && parsed.origin !== 'user') label = `(${parsed.origin}) `;
      else if (parsed.kind === 'thinking') label = '(thinking) ';
      else if (parsed.kind === 'call') label = '→ ';
      else if (parsed.kind === 'out') label = isError ? 'error: ' : 'result: ';
    }
    const text = parsed.text.trim();
    if (text === '') continue;
    const isUser = current === 'user';
    const base = parsed.kind === 'continuation' ? (isUser ? 3 : BASE_SCORE[current] / 2) : BASE_SCORE[current];
    push(
      isUser ? GROUP_USER : GROUP_ACTIONS,
      entry,
      current === 'out',
      `- ${label}${text}`,
      base + (current === 'out' && isError ? 2 : 0),
      isUser ? LINE_CAP_USER : LINE_CAP_OTHER,
    );
  }
  const first = out.findIndex((c) => c.group !== GROUP_SUMMARY);
  if (first >= 0 && out.length - first > 1) {
    const span = out.length - 1 - first;
    for (let i = first; i < out.length; i++) {
      const c = out[i] as Candidate;
      c.rank *= 1 + (RECENCY_BONUS * (i - first)) / span;
    }
  }
  return out;
}

/**
 * Chooses lines for the summary. The output is its sections joined by blank lines, a section
 * being a heading followed by its kept lines; so a line costs its bytes plus a newline, and the
 * first line of a section also pays for the heading and the blank line before it. (Without
 * headings, below MIN_BUDGET_FOR_HEADINGS, a line costs its bytes plus a newline.)
 *
 * Selection is greedy by rank (score per softened byte cost, ties to the later line) in three
 * passes: previous-summary lines up to SUMMARY_SHARE of the budget, so what was already judged
 * worth keeping goes first; transcript lines up to the whole budget, so new history always gets
 * room; then leftover summary lines into whatever space remains. Lines with a zero score (chat
 * filler), exact or near duplicates of a kept line, and tool-output lines past
 * MAX_LINES_PER_OUTPUT are skipped. Only if nothing qualifies do zero-score lines get a chance,
 * so a transcript of pure chatter still yields a summary.
 */
function select(all: Candidate[], budget: number, headings: boolean): Set<Candidate> {
  const chosen = new Set<Candidate>();
  const keys = new Set<string>();
  const perEntry = new Map<number, number>();
  const groupUsed = [false, false, false];
  let used = 0;

  const costOf = (c: Candidate): number => {
    if (!headings) return c.bytes + (used > 0 ? 1 : 0);
    if (groupUsed[c.group] === true) return c.bytes + 1;
    const heading = Buffer.byteLength(EXTRACTIVE_HEADINGS[c.group], 'utf8');
    return heading + 1 + c.bytes + (used > 0 ? 2 : 0);
  };
  const take = (c: Candidate, limit: number, minScore: number): void => {
    if (chosen.has(c) || c.score < minScore) return;
    if (c.isOutput && (perEntry.get(c.entry) ?? 0) >= MAX_LINES_PER_OUTPUT) return;
    const cost = costOf(c);
    if (used + cost > limit) return;
    c.key ??= dedupeKey(c.line);
    if (keys.has(c.key)) return;
    const words = (c.words ??= wordSet(c.line));
    for (const k of chosen) if (k.words !== undefined && nearDuplicate(k.words, words)) return;
    chosen.add(c);
    keys.add(c.key);
    groupUsed[c.group] = true;
    used += cost;
    if (c.isOutput) perEntry.set(c.entry, (perEntry.get(c.entry) ?? 0) + 1);
  };

  const ranked = [...all].sort((a, b) => b.rank - a.rank || b.order - a.order);
  const summary = ranked.filter((c) => c.group === GROUP_SUMMARY);
  const transcript = ranked.filter((c) => c.group !== GROUP_SUMMARY);
  const positive = Number.MIN_VALUE;
  const summaryLimit = transcript.some((c) => c.score > 0) ? Math.floor(budget * SUMMARY_SHARE) : budget;
  for (const c of summary) take(c, summaryLimit, positive);
  for (const c of transcript) take(c, budget, positive);
  for (const c of summary) take(c, budget, positive);
  if (chosen.size === 0) for (const c of ranked) take(c, budget, 0);
  return chosen;
}

/** The extractive summary of a prompt, at most maxOutputTokens * 4 UTF-8 bytes; '' if nothing fits. */
export function extractSummary(prompt: string, maxOutputTokens: number): string {
  const budget = Math.max(0, Math.floor(maxOutputTokens)) * BYTES_PER_TOKEN;
  if (budget === 0) return '';
  const headings = budget >= MIN_BUDGET_FOR_HEADINGS;
  const longestHeading = Math.max(...EXTRACTIVE_HEADINGS.map((h) => Buffer.byteLength(h, 'utf8')));
  const lineRoom = headings ? budget - longestHeading - 1 : budget;
  const chosen = select(candidates(prompt, lineRoom), budget, headings);

  const byGroup: string[][] = [[], [], []];
  for (const c of [...chosen].sort((a, b) => a.order - b.order)) byGroup[c.group]?.push(c.line);
  const sections: string[] = [];
  byGroup.forEach((lines, g) => {
    if (lines.length === 0) return;
    sections.push(headings ? [EXTRACTIVE_HEADINGS[g as Group], ...lines].join('\n') : lines.join('\n'));
  });
  return sections.join(headings ? '\n\n' : '\n');
}

/** The `extractive` backend: no model, no network, same input -> same output. */
export function createExtractiveSummarizer(): Summarizer {
  return {
    backend: 'extractive',
    model: null,
    async summarize(req: SummaryRequest): Promise<SummaryResult> {
      if (req.signal?.aborted === true) throw summarizerFailed('extractive', 'cancelled', 'cancelled');
      const text = extractSummary(req.prompt, req.maxOutputTokens);
      if (text.trim() === '') throw summarizerFailed('extractive', 'empty_summary', 'empty summary (nothing to keep)');
      return { text, backend: 'extractive', model: null, outputTokens: textTokens(text) };
    },
  };
}
