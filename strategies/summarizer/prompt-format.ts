// The plain-text layout of a summary prompt, written and read in one place: tagged sections
// (previous summary, focus, transcript, instructions) and the line markers of a transcript.
// Which rows become transcript lines, and how they are capped, is the harness's business.
import { stringifyJson } from '../../protocol/json-depth.ts';

/** Section tags, in the order buildSummaryPrompt writes them. */
export const SECTION_TAGS = ['previous-summary', 'focus', 'transcript', 'instructions'] as const;
export type SectionTag = (typeof SECTION_TAGS)[number];

/** Line markers of the transcript section. A line starting with none of them continues the one above. */
export const LINE_MARKERS = {
  user: '¶user',
  ai: '¶ai',
  out: '¶out',
  note: '¶note',
  call: '→ ',
} as const;

/** What a long base64-looking run becomes wherever the summarizer copies text. */
export const BLOB_PLACEHOLDER = '[data]';
/** Longest run of base64 alphabet characters copied as is; a longer one is a blob. */
export const MAX_BLOB_RUN = 200;

export interface SummaryPromptParts {
  /** The summary being replaced or extended; '' and undefined both mean none. */
  previousSummary?: string;
  /** What the user asked the compaction to keep (`/compact <strategy> focus`); '' means none. */
  focus?: string;
  /** Transcript lines (see LINE_MARKERS), joined with "\n". */
  transcript: string;
  /** Free text for a model: what to write and how long. The extractive backend ignores it. */
  instructions?: string;
}

const TAG_LINE = /^(\\*)<(\/?)(previous-summary|focus|transcript|instructions)>$/;
/** TAG_LINE for every line of a text at once. */
const TAG_LINES = /^\\*<\/?(?:previous-summary|focus|transcript|instructions)>$/gm;

/**
 * Content lines that look exactly like a tag line get one more leading backslash, so a
 * transcript that quotes `</transcript>` cannot end its section early. parse removes one.
 */
function escapeContent(text: string): string {
  return text.replace(TAG_LINES, (line) => `\\${line}`);
}

function section(tag: SectionTag, content: string): string {
  return `<${tag}>\n${escapeContent(content)}\n</${tag}>`;
}

/** Prompt text with the given sections; empty optional ones are left out. */
export function buildSummaryPrompt(parts: SummaryPromptParts): string {
  const out: string[] = [];
  if (parts.previousSummary !== undefined && parts.previousSummary !== '') {
    out.push(section('previous-summary', parts.previousSummary));
  }
  if (parts.focus !== undefined && parts.focus !== '') out.push(section('focus', parts.focus));
  out.push(section('transcript', parts.transcript));
  if (parts.instructions !== undefined && parts.instructions !== '') {
    out.push(section('instructions', parts.instructions));
  }
  return out.join('\n\n');
}

/**
 * Reads back the sections of a prompt written by buildSummaryPrompt. Text outside any section
 * is ignored; a prompt with no transcript section at all is taken whole as the transcript, so
 * a hand-written prompt still summarizes. An unclosed section runs to the end of the prompt.
 */
export function parseSummaryPrompt(prompt: string): SummaryPromptParts {
  const found = new Map<SectionTag, string[]>();
  let open: SectionTag | null = null;
  let lines: string[] = [];
  for (const line of prompt.split('\n')) {
    const m = TAG_LINE.exec(line);
    if (m !== null && m[1] === '') {
      const tag = m[3] as SectionTag;
      const closing = m[2] === '/';
      if (open === null && !closing && !found.has(tag)) {
        open = tag;
        lines = [];
        continue;
      }
      if (open === tag && closing) {
        found.set(tag, lines);
        open = null;
        continue;
      }
    }
    if (open !== null) lines.push(m !== null && m[1] !== '' ? line.slice(1) : line);
  }
  if (open !== null) found.set(open, lines);

  const get = (tag: SectionTag): string | undefined => found.get(tag)?.join('\n');
  const parts: SummaryPromptParts = { transcript: get('transcript') ?? (found.size === 0 ? prompt : '') };
  const previousSummary = get('previous-summary');
  const focus = get('focus');
  const instructions = get('instructions');
  if (previousSummary !== undefined && previousSummary !== '') parts.previousSummary = previousSummary;
  if (focus !== undefined && focus !== '') parts.focus = focus;
  if (instructions !== undefined && instructions !== '') parts.instructions = instructions;
  return parts;
}

export type TranscriptLineKind = 'user' | 'ai' | 'thinking' | 'call' | 'out' | 'note' | 'continuation';

export interface TranscriptLine {
  kind: TranscriptLineKind;
  /** The line without its marker (and without the call id for `out`), untrimmed otherwise. */
  text: string;
  /** `¶user (notes):` -> 'notes'; a plain `¶user:` -> 'user'. */
  origin?: string;
  /** For `out` lines. */
  callId?: string;
  /** For `out` lines marked `(error)`. */
  isError?: boolean;
}

const USER_LINE = /^¶user(?: \(([^)]*)\))?: ?/;
const AI_LINE = /^¶ai(?: \(([^)]*)\))?: ?/;
const OUT_LINE = /^¶out (\S+)( \(error\))?: ?/;
const NOTE_LINE = /^¶note: ?/;

/** Classifies one transcript line by its marker. */
export function parseTranscriptLine(line: string): TranscriptLine {
  let m = USER_LINE.exec(line);
  if (m !== null) return { kind: 'user', text: line.slice(m[0].length), origin: m[1] ?? 'user' };
  m = AI_LINE.exec(line);
  if (m !== null) return { kind: m[1] === 'thinking' ? 'thinking' : 'ai', text: line.slice(m[0].length) };
  if (line.startsWith(LINE_MARKERS.call)) return { kind: 'call', text: line.slice(LINE_MARKERS.call.length) };
  m = OUT_LINE.exec(line);
  if (m !== null && m[1] !== undefined) {
    return { kind: 'out', text: line.slice(m[0].length), callId: m[1], isError: m[2] !== undefined };
  }
  m = NOTE_LINE.exec(line);
  if (m !== null) return { kind: 'note', text: line.slice(m[0].length) };
  return { kind: 'continuation', text: line };
}

/** `¶user: text` (or `¶user (origin): text` for notes and mail). */
export function userLine(text: string, origin = 'user'): string {
  return origin === 'user' ? `${LINE_MARKERS.user}: ${text}` : `${LINE_MARKERS.user} (${origin}): ${text}`;
}
/** `¶ai: text`. */
export function aiLine(text: string): string {
  return `${LINE_MARKERS.ai}: ${text}`;
}
/** `→ name(k = v, ...)` with JSON values (parts nested past the depth limit as a marker). */
export function callLine(name: string, args: Record<string, unknown>): string {
  const inner = Object.entries(args)
    .map(([k, v]) => `${k} = ${stringifyJson(v) ?? 'undefined'}`)
    .join(', ');
  return `${LINE_MARKERS.call}${name}(${inner})`;
}
/** `¶out <call_id>: text`, or `¶out <call_id> (error): text`. */
export function outLine(callId: string, text: string, isError = false): string {
  return `${LINE_MARKERS.out} ${callId}${isError ? ' (error)' : ''}: ${text}`;
}

function isBlobChar(c: number): boolean {
  return (
    (c >= 65 && c <= 90) || // A-Z
    (c >= 97 && c <= 122) || // a-z
    (c >= 48 && c <= 57) || // 0-9
    c === 43 || // +
    c === 47 || // /
    c === 61 // =
  );
}

/**
 * Replaces every run of more than MAX_BLOB_RUN base64-alphabet characters with BLOB_PLACEHOLDER.
 * A hand-written scan rather than a regex: linear even on long lines full of runs just under
 * the limit, where a backtracking pattern would restart at every position.
 */
export function redactBlobs(text: string): string {
  if (text.length <= MAX_BLOB_RUN) return text;
  let out = '';
  let copied = 0;
  let runStart = -1;
  for (let i = 0; i <= text.length; i++) {
    if (i < text.length && isBlobChar(text.charCodeAt(i))) {
      if (runStart < 0) runStart = i;
      continue;
    }
    if (runStart >= 0 && i - runStart > MAX_BLOB_RUN) {
      out += text.slice(copied, runStart) + BLOB_PLACEHOLDER;
      copied = i;
    }
    runStart = -1;
  }
  return copied === 0 ? text : out + text.slice(copied);
}
