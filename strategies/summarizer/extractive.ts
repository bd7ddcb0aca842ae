// The offline summarizer: writes a summary prompt's digest (extractive-digest.ts: the task,
// decisions, files touched with what changed, errors and fixes, what is verified, open work, the
// next step) within the output budget, deterministically and without a model. It reads prompts
// in the prompt-format.ts layout; building them is the strategies' job.
import { runSteps, runStepsSliced, type Steps } from '../../protocol/time-slice.ts';
import { textTokens } from '../estimate.ts';
import { HEADINGS, LINE_CAP_TASK, LOOKED_AT_PREFIX, digestSteps, SECTIONS, type Digest, type Fact, type FileFact, type SectionName } from './extractive-digest.ts';
import { wordSet } from './extractive-facts.ts';
import { summarizerFailed, type Summarizer, type SummaryRequest, type SummaryResult } from './types.ts';

/** Output headings, in output order. A previous summary's own headings are read, not copied again. */
export const EXTRACTIVE_HEADINGS: readonly string[] = SECTIONS.map((s) => HEADINGS[s]);

/** Bytes of output per token of maxOutputTokens. */
const BYTES_PER_TOKEN = 4;
/** Below this budget (bytes) headings cost more than they tell; lines go out bare. */
const MIN_BUDGET_FOR_HEADINGS = 200;
/** Identifiers listed per file: one per this many bytes of budget, within [2, 24]. */
const BYTES_PER_FILE_IDENTIFIER = 340;
/** Share of the budget a previous summary in another layout may claim before the transcript's facts compete. */
const PREVIOUS_SHARE = 2 / 3;
/** Two lines whose word sets overlap at least this much (Jaccard) are near-duplicates. */
const NEAR_DUPLICATE = 0.8;
const ELLIPSIS = '…';

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

function nearDuplicate(a: Set<string>, b: Set<string>): boolean {
  if (a.size < 4 || b.size < 4) return false;
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  if (small.size / large.size < NEAR_DUPLICATE) return false;
  let shared = 0;
  for (const w of small) if (large.has(w)) shared++;
  return shared / (a.size + b.size - shared) >= NEAR_DUPLICATE;
}

/** Identifiers of a map, best value first (ties: first seen), at most `n`, `…` when some were left out. */
function topIds(ids: ReadonlyMap<string, number>, n: number): string {
  const ranked = [...ids.entries()].sort((a, b) => b[1] - a[1]).map(([id]) => id);
  return ranked.length <= n ? ranked.join(', ') : `${ranked.slice(0, n).join(', ')}, …`;
}

/**
 * A file's bullet: `path: created, edited 3×; added a, b; removed c`, with the best `perFile`
 * identifiers of what changed. Its score: what was done to it, how much later turns name it,
 * and what its changes carry.
 */
function fileFact(f: FileFact, perFile: number): Fact {
  const actions = [f.created ? 'created' : '', f.rewritten ? 'rewritten' : '', f.edits > 0 ? `edited ${f.edits}×` : '', f.deleted ? 'deleted' : '', f.read ? 'read' : ''].filter((a) => a !== '');
  const parts = [actions.join(', ')];
  if (f.added.size > 0) parts.push(`added ${topIds(f.added, perFile)}`);
  if (f.removed.size > 0) parts.push(`removed ${topIds(f.removed, Math.max(1, Math.floor(perFile / 2)))}`);
  const changed = f.created || f.rewritten || f.edits > 0 || f.deleted;
  let carried = 0;
  for (const v of f.added.values()) carried += v;
  const score = changed ? 8 + (f.created ? 3 : 0) + Math.min(f.edits, 6) + 1.5 * f.refs + Math.min(8, carried * 0.3) : 1 + Math.min(f.refs, 4);
  return { section: 'files', text: `${f.path}: ${parts.join('; ')}`, score, order: f.order };
}

/** One bullet for the files only looked at, most referred to first. */
function lookedAt(files: readonly FileFact[]): Fact | undefined {
  if (files.length === 0) return undefined;
  const ranked = [...files].sort((a, b) => b.refs - a.refs);
  const score = 3 + Math.min(6, ranked.reduce((n, f) => n + Math.min(f.refs, 4), 0) * 0.3);
  return { section: 'files', text: `${LOOKED_AT_PREFIX}${ranked.map((f) => f.path).join(', ')}`, score, order: Math.min(...files.map((f) => f.order)) };
}

interface Candidate {
  fact: Fact;
  line: string;
  bytes: number;
  rank: number;
  /** Computed when first needed: most candidates never get that far. */
  words?: Set<string>;
}

function candidates(digest: Digest, budget: number, lineRoom: number): Candidate[] {
  const perFile = Math.max(2, Math.min(24, Math.floor(budget / BYTES_PER_FILE_IDENTIFIER)));
  const files = [...digest.files.values()];
  const changed = files.filter((f) => f.created || f.rewritten || f.deleted || f.edits > 0);
  const facts = [...digest.facts, ...changed.map((f) => fileFact(f, perFile))];
  const looked = lookedAt(files.filter((f) => !changed.includes(f)));
  if (looked !== undefined) facts.push(looked);
  const out: Candidate[] = [];
  for (const fact of facts) {
    const cap = fact.section === 'task' ? LINE_CAP_TASK : Math.max(480, perFile * 40);
    const line = clipUtf8(`- ${fact.text}`, Math.min(cap, lineRoom));
    if (line === '' || line === '- ') continue;
    const bytes = Buffer.byteLength(line, 'utf8');
    // Density, softened: a long line needs more to say than a short one, but not pro rata.
    out.push({ fact, line, bytes, rank: fact.score / Math.sqrt(Math.max(bytes, 32) / 32) });
  }
  return out;
}

/**
 * Chooses bullets for the summary. The output is its sections in SECTIONS order, each a heading
 * and its bullets, joined by blank lines; so a bullet costs its bytes plus a newline, and the
 * first bullet of a section also pays for the heading and the blank line before it. (Without
 * headings, below MIN_BUDGET_FOR_HEADINGS, a bullet costs its bytes plus a newline.)
 *
 * 1. Mandatory facts first (the original task, the workspace paths are relative to, the next
 *    step), in that order, as far as they fit.
 * 2. The best-ranked bullet of every other section, so the summary keeps its structure.
 * 3. Everything else greedily by rank (score per softened byte cost; ties to the earlier fact).
 * Near-duplicates of a kept bullet are skipped. A bullet scoring 0 (chat filler) is taken only
 * when nothing else was, so a transcript of pure chatter still yields a summary.
 */
function select(all: Candidate[], budget: number, headings: boolean): Set<Candidate> {
  const chosen = new Set<Candidate>();
  const used = new Set<SectionName>();
  let total = 0;
  const costOf = (c: Candidate): number => {
    if (!headings) return c.bytes + (total > 0 ? 1 : 0);
    if (used.has(c.fact.section)) return c.bytes + 1;
    return Buffer.byteLength(HEADINGS[c.fact.section], 'utf8') + 1 + c.bytes + (total > 0 ? 2 : 0);
  };
  const take = (c: Candidate, minScore: number, limit = budget): void => {
    if (chosen.has(c) || c.fact.score < minScore) return;
    const cost = costOf(c);
    if (total + cost > limit) return;
    const words = (c.words ??= wordSet(c.line));
    for (const k of chosen) if (k.words !== undefined && nearDuplicate(k.words, words)) return;
    chosen.add(c);
    used.add(c.fact.section);
    total += cost;
  };
  const ranked = [...all].sort((a, b) => b.rank - a.rank || a.fact.order - b.fact.order || (a.line < b.line ? -1 : a.line > b.line ? 1 : 0));
  const positive = Number.MIN_VALUE;
  for (const section of ['task', 'next'] as const) for (const c of ranked) if (c.fact.mandatory === true && c.fact.section === section) take(c, 0);
  for (const section of SECTIONS) {
    const best = ranked.find((c) => c.fact.section === section && c.fact.score > 0);
    if (best !== undefined) take(best, positive);
  }
  const previousLimit = Math.floor(budget * PREVIOUS_SHARE);
  for (const c of ranked) if (c.fact.foreign === true && total < previousLimit) take(c, positive, previousLimit);
  for (const c of ranked) take(c, positive);
  if (chosen.size === 0) { for (const c of ranked) take(c, 0); }
  return chosen;
}

/** The extractive summary of a prompt, at most maxOutputTokens * 4 UTF-8 bytes; '' if nothing fits. */
export function extractSummary(prompt: string, maxOutputTokens: number): string {
  return runSteps(summarySteps(prompt, maxOutputTokens));
}

/**
 * `extractSummary` in steps (see runSteps): reading a prompt of half a large window is a long
 * stretch of work, which the daemon spends in slices between other requests.
 */
function* summarySteps(prompt: string, maxOutputTokens: number): Steps<string> {
  const budget = Math.max(0, Math.floor(maxOutputTokens)) * BYTES_PER_TOKEN;
  if (budget === 0) return '';
  const headings = budget >= MIN_BUDGET_FOR_HEADINGS;
  const longestHeading = Math.max(...EXTRACTIVE_HEADINGS.map((h) => Buffer.byteLength(h, 'utf8')));
  const lineRoom = headings ? budget - longestHeading - 1 : budget;
  const digest = yield* digestSteps(prompt);
  const chosen = select(candidates(digest, budget, lineRoom), budget, headings);

  const bySection = new Map<SectionName, string[]>();
  for (const section of SECTIONS) {
    const lines = [...chosen].filter((c) => c.fact.section === section).sort((a, b) => a.fact.order - b.fact.order).map((c) => c.line);
    if (lines.length > 0) bySection.set(section, lines);
  }
  const render = (): string => {
    const sections: string[] = [];
    for (const [section, lines] of bySection) sections.push(headings ? [HEADINGS[section], ...lines].join('\n') : lines.join('\n'));
    return sections.join(headings ? '\n\n' : '\n');
  };
  const facts = render();
  if (!headings) return facts;
  const names = namesLine(digest.names, facts, budget - Buffer.byteLength(facts, 'utf8') - Buffer.byteLength(HEADINGS.names, 'utf8') - 3);
  if (names === undefined) return facts;
  // Into its place in SECTIONS order (before the next step).
  const ordered = new Map<SectionName, string[]>();
  for (const section of SECTIONS) {
    const lines = section === 'names' ? [names] : bySection.get(section);
    if (lines !== undefined) ordered.set(section, lines);
  }
  bySection.clear();
  for (const [k, v] of ordered) bySection.set(k, v);
  return render();
}

/**
 * The budget the facts leave, filled with exact names they do not already carry: the strings a
 * later turn (or lcm_grep / transcript_grep) needs verbatim. Undefined when too little is left.
 */
function namesLine(names: readonly string[], written: string, room: number): string | undefined {
  if (room < 24) return undefined;
  const kept: string[] = [];
  let bytes = 2; // "- "
  for (const n of names) {
    // What fits is asked first: a long prompt names thousands, and once the room is nearly full
    // most do not, so the search of the written facts is left for the few that might.
    const cost = Buffer.byteLength(n, 'utf8') + (kept.length > 0 ? 2 : 0);
    if (bytes + cost > room || written.includes(n) || n.includes(', ')) continue;
    kept.push(n);
    bytes += cost;
  }
  return kept.length === 0 ? undefined : `- ${kept.join(', ')}`;
}

/** The `extractive` backend: no model, no network, same input -> same output. */
export function createExtractiveSummarizer(): Summarizer {
  return {
    backend: 'extractive',
    model: null,
    async summarize(req: SummaryRequest): Promise<SummaryResult> {
      const stop = (): void => {
        if (req.signal?.aborted === true) throw summarizerFailed('extractive', 'cancelled', 'cancelled');
      };
      stop();
      const text = await runStepsSliced(summarySteps(req.prompt, req.maxOutputTokens), stop);
      if (text.trim() === '') throw summarizerFailed('extractive', 'empty_summary', 'empty summary (nothing to keep)');
      return { text, backend: 'extractive', model: null, outputTokens: textTokens(text) };
    },
  };
}
