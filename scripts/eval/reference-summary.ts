// `tsx scripts/eval/reference-summary.ts <claude-code.jsonl> [--cap N] [--window W,...]`: how
// much of a model-written compaction summary our summarizer keeps. It finds Claude Code's own
// compaction in the file (the compact_boundary record and the summary line after it), imports
// the history before it, folds that history into a summary chunk by chunk the way rolling
// does (the product's summary-text, summary-prompt and summarizer functions, extractive
// backend), and prints the share of the reference summary's identifiers present in ours and
// how many of our bullets are bare tool-call lines or raw tool output. Eval tooling, not product.
import fs from 'node:fs';
import { eachFlag } from '../flags.ts';
import { importTranscript } from '../../cli/import/index.ts';
import { extractIdentifiers, retainedShare } from './identifiers.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { foldSources } from '../../storage/transcript/history.ts';
import { openDb } from '../../storage/db.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { summaryCap } from '../../strategies/rolling/running-summary.ts';
import { summaryPrompt, SUMMARIZER_SYSTEM } from '../../strategies/harness/summarizer-prompt.ts';
import { summaryChunks } from '../../strategies/harness/summary-text.ts';
import { evictionChunkTokens } from '../../strategies/harness/units.ts';
import { plainTarget, tokenCounter } from '../../strategies/projection.ts';
import { createSummarizer, LINE_MARKERS, SummarizerConfig } from '../../strategies/summarizer/index.ts';

const USAGE = 'usage: tsx scripts/eval/reference-summary.ts <claude-code.jsonl> [--cap TOKENS] [--window TOKENS[,TOKENS...]] [--print]';

/** Windows measured by default: the two the issue names. Each gets rolling's cap for it. */
const DEFAULT_WINDOWS = [8192, 32768];

interface Reference {
  /** JSONL lines before the compact_boundary record. */
  before: string;
  /** The model-written summary, without Claude Code's fixed preamble and closing lines. */
  summary: string;
}

/** The history before Claude Code's first native compaction, and the summary it wrote. */
function findReference(text: string): Reference {
  const lines = text.split('\n');
  const boundary = lines.findIndex((l) => {
    if (!l.includes('compact_boundary')) return false;
    const rec = JSON.parse(l) as { type?: unknown; subtype?: unknown };
    return rec.type === 'system' && rec.subtype === 'compact_boundary';
  });
  if (boundary < 0) throw new Error('no compact_boundary record: this transcript was never compacted by Claude Code');
  for (const l of lines.slice(boundary + 1)) {
    if (!l.includes('isCompactSummary')) continue;
    const rec = JSON.parse(l) as { isCompactSummary?: unknown; message?: { content?: unknown } };
    if (rec.isCompactSummary !== true || typeof rec.message?.content !== 'string') continue;
    return { before: lines.slice(0, boundary).join('\n'), summary: stripWrapper(rec.message.content) };
  }
  throw new Error('a compact_boundary record with no isCompactSummary line after it');
}

/** Claude Code wraps the model's text in a fixed first line and a closing paragraph naming the transcript file. */
function stripWrapper(text: string): string {
  let body = text.replace(/^This session is being continued from a previous conversation[^\n]*\n/, '');
  const closing = body.search(/\n(?:If you need specific details from before compaction|Please continue the conversation from where we left off)/);
  if (closing >= 0) body = body.slice(0, closing);
  return body.trim();
}

/** A bullet that is only a tool call as the transcript writes it: `→ name(k = v)`, or `name(k = v)`. */
function isBareToolCall(line: string): boolean {
  const body = line.replace(/^\s*(?:[-*•]|\d+[.)])\s+/, '');
  return body.startsWith(LINE_MARKERS.call) || /^[\w.:-]+\(\w+ = /.test(body);
}

/** A bullet quoting a tool's output as it came (the extractive backend's old `result:` lines). */
function isRawOutput(line: string): boolean {
  return /^\s*-\s+(?:result|error):\s/.test(line);
}

async function storedRows(before: string): Promise<StoredRow[]> {
  const imported = importTranscript(before, { format: 'claude-code' });
  const db = openDb(':memory:');
  try {
    const { session } = openSession(db, { session: 'reference' });
    await appendRows(db, session, imported.rows);
    const rows: StoredRow[] = [];
    for (const page of foldSources(db, session, 1, Number.MAX_SAFE_INTEGER)) rows.push(...page);
    return rows;
  } finally {
    db.close();
  }
}

interface Run {
  window: number;
  cap: number;
  chunks: number;
  summary: string;
  ms: number;
}

/** Rolling's fold of the whole history: chunks of half the window, each summarized into the summary so far. */
async function rollingFold(rows: readonly StoredRow[], window: number, cap: number): Promise<Run> {
  const summarizer = createSummarizer(SummarizerConfig.parse({ provider: 'extractive' }));
  const tokens = tokenCounter(rows, plainTarget('reference'));
  const started = performance.now();
  let summary = '';
  let chunks = 0;
  for await (const transcript of summaryChunks(rows, tokens, evictionChunkTokens(window))) {
    chunks++;
    const prompt = summaryPrompt({ previousSummary: summary, transcript, focus: undefined, maxOutputTokens: cap, what: 'a running summary of the conversation' });
    const result = await summarizer.summarize({ session: 'reference', purpose: 'rolling', system: SUMMARIZER_SYSTEM, prompt, maxOutputTokens: cap });
    summary = result.text;
  }
  return { window, cap, chunks, summary, ms: performance.now() - started };
}

async function main(argv: readonly string[]): Promise<void> {
  let file: string | undefined;
  let cap: number | undefined;
  let windows = DEFAULT_WINDOWS;
  let print = false;
  const positive = (v: string, what: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n <= 0) throw new Error(`${what} must be a positive integer\n${USAGE}`);
    return n;
  };
  for (const flag of eachFlag(argv, USAGE)) {
    if (flag.name === '--cap') cap = positive(flag.value(), '--cap');
    else if (flag.name === '--window') windows = flag.value().split(',').map((w) => positive(w, '--window'));
    else if (flag.name === '--print') print = true;
    else if (flag.name.startsWith('--') || file !== undefined) throw new Error(`unexpected argument ${flag.raw}\n${USAGE}`);
    else file = flag.raw;
  }
  if (file === undefined) throw new Error(USAGE);

  const reference = findReference(fs.readFileSync(file, 'utf8'));
  const wanted = [...extractIdentifiers(reference.summary).keys()];
  const rows = await storedRows(reference.before);
  console.log(`${file}: ${rows.length} rows before the compaction; the reference summary names ${wanted.length} identifiers`);
  console.log('window  cap   chunks  kept/total  share  bullets  tool-call  raw-output  ms');
  for (const window of windows) {
    const run = await rollingFold(rows, window, cap ?? summaryCap(window));
    const kept = retainedShare(wanted, run.summary);
    const bullets = run.summary.split('\n').filter((l) => /^\s*(?:[-*•]|\d+[.)])\s/.test(l));
    console.log(
      [
        String(run.window).padEnd(7),
        String(run.cap).padEnd(5),
        String(run.chunks).padEnd(7),
        `${kept.kept}/${kept.total}`.padEnd(11),
        `${(kept.share * 100).toFixed(0)}%`.padEnd(6),
        String(bullets.length).padEnd(8),
        String(bullets.filter(isBareToolCall).length).padEnd(10),
        String(bullets.filter(isRawOutput).length).padEnd(11),
        run.ms.toFixed(0),
      ].join(' '),
    );
    if (print) console.log(`--- summary (window ${run.window}, cap ${run.cap}) ---\n${run.summary}\n--- missing ---\n${wanted.filter((id) => !run.summary.includes(id)).join(' ')}\n`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
