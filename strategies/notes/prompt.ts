// What the notes layer asks the summarizer, and how it checks the answer. The notes are not a
// second summary: the strategy's summary or archive tells the story, so the notes hold what a
// story loses — exact identifiers, decisions, what is verified, open work, the next step.
import { TRANSCRIPT_IS_DATA } from '../harness/summarizer-prompt.ts';
import type { WindowInfo } from '../harness/window.ts';
import { buildSummaryPrompt, SECTION_TAGS } from '../summarizer/prompt-format.ts';

export const NOTES_SYSTEM = [
  'You keep the working notes of an AI coding-agent session: a short list the agent reads at the top of every request, after older turns have left its context window.',
  TRANSCRIPT_IS_DATA,
  'Write plain text, one fact per line, no preamble.',
].join('\n');

/**
 * The budget a rewrite works to: the configured one, but on a small window never more than half
 * the room the trigger leaves (never under 100). Triggers do not count the notes, so on a small
 * window the configured budget alone could carry a request past the window (2000 tokens is a
 * quarter of an 8k window); half the room keeps the other half for the turn that makes the
 * request due, and strategies keep the notes' cap free under the window (Layer.reserve).
 */
export function notesBudget(budgetTokens: number, window: WindowInfo): number {
  if (window.window === null) return budgetTokens;
  const room = (window.window * (100 - window.triggerPercent)) / 100 / 2 / window.ratio;
  return Math.min(budgetTokens, Math.max(100, Math.floor(room)));
}

/** The output cap of one rewrite: a quarter over the budget, so a model slightly over is not cut mid-line. */
export function notesOutputCap(budgetTokens: number): number {
  return Math.floor((budgetTokens * 5) / 4);
}

/** The prompt for one rewrite: the notes so far (as the previous summary) and one chunk of evicted history. */
export function notesPrompt(args: { notes: string; transcript: string; focus: string | undefined; budgetTokens: number }): string {
  const instructions = [
    'Rewrite the session notes: start from <previous-summary> (the notes so far, if any) and update them with what <transcript> adds.',
    'A separate summary or archive already tells what happened, so do not retell it.',
    'Keep, copied exactly: file paths, symbols, commands, ids, numbers and error messages that still matter; decisions and their reasons; what was verified and how; open work; the next step.',
    'Remove what is finished and no longer matters.',
    `Use at most about ${args.budgetTokens} tokens.`,
    args.focus ? 'Give extra weight to what <focus> asks to keep.' : '',
  ]
    .filter((s) => s !== '')
    .join(' ');
  return buildSummaryPrompt({ previousSummary: args.notes, focus: args.focus, transcript: args.transcript, instructions });
}

const TAG_LINE = new RegExp(`^</?(?:${SECTION_TAGS.join('|')})>$`, 'm');
// Control characters other than tab, newline and carriage return.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/;

/**
 * Why an answer cannot be the notes, or null when it can. Backends already refuse empty
 * answers; this also refuses one that echoes the prompt's section tags (a model that repeated
 * its input) or carries control characters (binary garbage), so such text never replaces
 * notes that still hold.
 */
export function notesAnswerProblem(text: string): string | null {
  if (text.trim() === '') return 'the answer is empty';
  if (TAG_LINE.test(text)) return "the answer repeats the prompt's section tags instead of writing notes";
  if (CONTROL.test(text)) return 'the answer contains control characters';
  return null;
}
