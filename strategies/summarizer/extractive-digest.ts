// The offline summarizer's reading of one prompt as a digest: scored facts in the sections a
// summary is written in (the task, decisions and findings, files touched with what changed,
// errors and their fixes, what is verified, open work, the next step). A previous summary in
// this layout is read back into the same digest, so incremental summaries merge rather than
// repeat; any other previous summary counts as findings. Choosing within a budget is extractive.ts's.
import { contentScore, focusWords, hasWords, identifiers, entrySteps, isProse, References, type Call, type Entry } from './extractive-facts.ts';
import { runSteps, type Steps } from '../../protocol/time-slice.ts';
import { parseSummaryPrompt, redactBlobs } from './prompt-format.ts';

export const SECTIONS = ['task', 'decisions', 'files', 'errors', 'verified', 'open', 'names', 'next'] as const;
export type SectionName = (typeof SECTIONS)[number];

/** Each section's heading in the output, in output order. */
export const HEADINGS: Record<SectionName, string> = {
  task: 'Task:',
  decisions: 'Decisions and findings:',
  files: 'Files touched:',
  errors: 'Errors and fixes:',
  verified: 'Verified:',
  open: 'Open work:',
  names: 'Names to keep:',
  next: 'Next step:',
};

/** Headings of the extractive layout before sections; a previous summary may still carry them. */
const LEGACY_HEADINGS: Record<string, SectionName> = {
  'Earlier summary:': 'decisions',
  'User requests:': 'task',
  'Actions and findings:': 'decisions',
};

export interface Fact {
  section: SectionName;
  /** The bullet's text, without the leading "- ". */
  text: string;
  score: number;
  /** Output order within the section: previous-summary facts first, then by transcript position. */
  order: number;
  /** Kept before anything else (the original task, the workspace, the next step). */
  mandatory?: boolean;
  /**
   * A line of a previous summary in another layout (a model's, or hand-written): judged worth
   * keeping by whoever wrote it, it goes before the transcript's facts, up to a share.
   */
  foreign?: boolean;
}

export interface FileFact {
  path: string;
  created: boolean;
  rewritten: boolean;
  deleted: boolean;
  read: boolean;
  edits: number;
  /** Identifiers the changes introduced, each with its value (later references, definitions). */
  added: Map<string, number>;
  removed: Map<string, number>;
  order: number;
  /** How much later turns name the file. */
  refs: number;
}

export interface Digest {
  facts: Fact[];
  files: Map<string, FileFact>;
  /**
   * Exact names (paths, symbols, numbers, errors) for the budget the facts leave: those a
   * previous summary kept this way first, then the transcript's, most mentioned first.
   */
  names: string[];
  /** The directory most touched paths share; paths under it are written relative to it. */
  workspace: string | undefined;
}

/** Previous-summary facts come before every transcript fact in their section (their order is below 0). */
export const PREVIOUS_ORDER = -1_000_000;
const WORKSPACE_PREFIX = 'workspace: ';
/** Joins an error to what resolved it. */
const RESOLVED = ' → resolved: ';
const COMMANDS_PREFIX = 'commands run: ';
/** The files bullet of paths read or searched but never changed. */
export const LOOKED_AT_PREFIX = 'looked at, not changed: ';
/** Longest bullet kept (bytes, before the budget's own clip): a request gets more, intent is the point. */
export const LINE_CAP_TASK = 1200;
export const LINE_CAP = 360;
/** Rank bonus of the newest transcript fact over the oldest: later history is closer to the work at hand. */
const RECENCY_BONUS = 0.2;

const NEXT_LINE = /^(?:now(?:,| let| i| update| create| add| fix| run| write| implement)|next(?:,|:| step| i| let)|let me|let's|i'll|i will|i need to|i'm going to|then i)/i;
const OPEN_LINE = /\b(?:still needs? to|still need|todo|to do:|remaining|not yet|left to do|pending|open question)\b/i;
const VERIFIED_LINE = /\b(?:\d+ (?:tests?|checks?|specs?) (?:pass|passed|passes|green)|(?:tests?|checks?) pass(?:ed|es)?|compiles? clean|verified|confirmed|all green|no new (?:\w+ )?(?:issues|warnings))\b/i;
const TEST_COUNT = /\b\d+ (?=tests?\b)/g;
const LIST_ITEM = /^\s*(?:\d+[.)]|[-*•])\s+/;
const DONE_HEADER = /\b(?:done|completed|finished|summary|what i did|changes made)\b/i;
const ERROR_LINE =
  /(?:^|\s)(?:error|fatal|panic)(?:\[\w+\])?:|\*\* \(\w+\)|\b[A-Z]\w*(?:Error|Exception)\b|\btraceback\b|\bfailed\b|\b[1-9]\d* (?:failures?|failed|errors?)\b|command not found|no such file|cannot find|undefined (?:function|variable|method|reference|symbol|module)|✗|✘/i;
const NOT_AN_ERROR = /\b0 (?:errors?|failures?|failed)\b|\bno (?:errors?|failures?)\b/i;
const WARNING_LINE = /(?:^|\s)warning:/i;
/** An assistant line about something that went wrong (and usually what it does about it). */
const AI_ERROR_LINE = /\b(?:compile error|errors?|fail(?:s|ed|ing|ure)?|broke|broken|undefined|warnings?|crash(?:es|ed)?|bug|exception|nest(?:ed|ing) too deep|nesting issue)\b/i;
/** A line that says what was chosen and why: a decision, even when it names the bug it answers. */
const DECISION_LINE = /\b(?:decided|decision|agreed|instead of|rather than|chose)\b/i;
/** Directories a project keeps at its root: the directory above one is the workspace. */
const ROOT_DIRS = new Set(['lib', 'src', 'test', 'tests', 'spec', 'packages', 'cmd', 'internal', 'pkg', 'scripts', 'assets', 'priv', 'docs', 'deps', 'config', 'bin', 'include', 'crates', 'node_modules']);
const PASS_LINE = /\b\d+ (?:tests?|examples?|specs?|doctests?|properties)\b[^\n]*\b0 failures?\b|\b\d+ passed\b|^#? ?pass \d+|test result: ok|\btests? pass(?:ed)?\b|\bcompiled? (?:successfully|clean)|\bsucceeded\b/im;
const DEFINITION = /\b(?:def|defp|defmacro|defmodule|defstruct|function|class|interface|type|enum|struct|trait|fn|func|const|let|var|val|input|event|attr|computer)\s+:?([A-Za-z_$][\w$.]*)/g;

const PATH_ARGS = ['file_path', 'path', 'filePath', 'notebook_path', 'filename', 'file'];
const OLD_ARGS = ['old_string', 'old_str', 'oldText', 'old'];
const NEW_ARGS = ['new_string', 'new_str', 'newText', 'new'];
const CONTENT_ARGS = ['content', 'file_text', 'text', 'contents'];

function stringArg(call: Call, names: readonly string[]): string | undefined {
  for (const n of names) {
    const v = call.args.get(n);
    if (typeof v === 'string' && v !== '') return v;
  }
  return undefined;
}

/** A shell call's command line: `command`/`cmd` as a string, or an argv (`bash -lc "…"` unwrapped). */
function shellCommand(call: Call): string | undefined {
  const v = call.args.get('command') ?? call.args.get('cmd');
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) {
    const argv = v;
    if (argv.length === 3 && /^(?:ba|z)?sh$/.test(argv[0] ?? '') && /^-l?c$/.test(argv[1] ?? '')) return argv[2];
    return argv.join(' ');
  }
  return undefined;
}

/** The command as worth quoting: first line, without `cd … &&`, `2>&1` and a trailing `| tail -n`. */
function displayCommand(cmd: string): string {
  let c = (cmd.split('\n')[0] ?? '').trim();
  c = c.replace(/^cd \S+ && /, '').replace(/\s*2>&1/g, '').replace(/\s*\|\s*(?:tail|head)(?:\s+-n)?(?:\s+-?\d+)?\s*$/, '');
  return c.length > 100 ? `${c.slice(0, 99)}…` : c;
}

/** Two runs of the same tool (`mix test`, `npm run lint`) share a key: the first two words. */
function commandKey(cmd: string): string {
  return displayCommand(cmd).split(/\s+/).slice(0, 2).join(' ');
}

/**
 * `text` on one line (runs of white space as one space, trimmed), cut to `max` characters with
 * an ellipsis. Only a prefix is collapsed, growing until it is long enough: a tool's output can
 * be megabytes, and collapsing it whole held the event loop for tens of milliseconds.
 */
export function clip(text: string, max: number): string {
  for (let n = 2 * max + 64; n < text.length; n *= 4) {
    // The prefix's line is a prefix of the whole text's line; longer than `max` once trimmed at
    // the end, the whole one is too, and both cut to the same characters.
    const t = oneLine(text.slice(0, n)).trimStart();
    if (t.trimEnd().length > max) return `${t.slice(0, max - 1)}…`;
  }
  const t = oneLine(text).trim();
  return t.length <= max ? t : `${t.slice(0, max - 1)}…`;
}

/** Whitespace other than a lone space: what `oneLine` has to replace. */
const NOT_ONE_LINE = /[^\S ]|\s\s/;

/**
 * `text` with each run of whitespace made one space. Most lines already are: they are handed
 * back as they are, not copied (every candidate fact of a long transcript is clipped).
 */
function oneLine(text: string): string {
  return NOT_ONE_LINE.test(text) ? text.replace(/\s+/g, ' ') : text;
}

/** The sentence of `line` that matches `re` (the whole line when none does alone). */
function sentence(line: string, re: RegExp): string {
  return line.split(/(?<=[.!?])\s+/).find((x) => re.test(x)) ?? line;
}

function firstLines(text: string, re: RegExp, n: number, not?: RegExp): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    if (out.length >= n) break;
    const t = line.trim();
    if (t !== '' && re.test(t) && !(not?.test(t) ?? false)) out.push(clip(t, 200));
  }
  return out;
}

/**
 * The project directory of the absolute file paths: the directory above a root directory (`lib`,
 * `src`, `test`...) that most of them share; else the longest directory at least two distinct
 * paths share, at least two levels deep.
 */
function commonWorkspace(paths: readonly string[]): string | undefined {
  const abs = [...new Set(paths.filter((p) => p.startsWith('/')))];
  const roots = new Map<string, number>();
  for (const p of abs) {
    const parts = p.split('/');
    const i = parts.findIndex((x, k) => k >= 2 && k < parts.length - 1 && ROOT_DIRS.has(x));
    if (i > 0) roots.set(parts.slice(0, i).join('/'), (roots.get(parts.slice(0, i).join('/')) ?? 0) + 1);
  }
  const best = [...roots.entries()].sort((a, b) => b[1] - a[1])[0];
  if (best !== undefined && best[1] * 2 >= abs.length) return best[0];
  if (abs.length < 2) return undefined;
  let common = (abs[0] ?? '').split('/').slice(0, -1);
  for (const p of abs.slice(1)) {
    const parts = p.split('/').slice(0, -1);
    let i = 0;
    while (i < common.length && i < parts.length && common[i] === parts[i]) i++;
    common = common.slice(0, i);
  }
  return common.length >= 3 ? common.join('/') : undefined;
}

class Builder {
  readonly facts: Fact[] = [];
  readonly files = new Map<string, FileFact>();
  workspace: string | undefined;
  /** Shell commands run, with how often, in first-seen order. */
  readonly commands = new Map<string, number>();
  /** Names a previous summary listed under its names heading, in its order. */
  readonly names: string[] = [];
  private readonly keys = new Set<string>();

  add(fact: Fact): void {
    const key = `${fact.section}:${fact.text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, ' ').trim()}`;
    if (fact.text.trim() === '' || this.keys.has(key)) return;
    this.keys.add(key);
    this.facts.push(fact);
  }

  file(path: string, order: number): FileFact {
    const p = this.relative(path);
    let f = this.files.get(p);
    if (f === undefined) {
      f = { path: p, created: false, rewritten: false, deleted: false, read: false, edits: 0, added: new Map(), removed: new Map(), order, refs: 0 };
      this.files.set(p, f);
    }
    return f;
  }

  relative(path: string): string {
    const ws = this.workspace;
    return ws !== undefined && path.startsWith(`${ws}/`) ? path.slice(ws.length + 1) : path;
  }
}

// ---------------------------------------------------------------------------------------------
// A previous summary (or, for lcm, summaries to condense) read back

const FILE_LINE = /^(\S+): (.*)$/;

function readFileLine(b: Builder, text: string, order: number): boolean {
  const m = FILE_LINE.exec(text);
  if (m === null || m[1] === undefined || m[2] === undefined) return false;
  const f = b.file(m[1], order);
  for (const part of m[2].split('; ')) {
    const list = /^(added|removed) (.*)$/.exec(part);
    if (list !== null && list[2] !== undefined) {
      const into = list[1] === 'added' ? f.added : f.removed;
      list[2].split(', ').forEach((id, i) => {
        const v = 3 - i * 0.01;
        if (id !== '' && id !== '…' && (into.get(id) ?? 0) < v) into.set(id.replace(/…$/, ''), v);
      });
      continue;
    }
    for (const action of part.split(', ')) {
      if (action === 'created') f.created = true;
      else if (action === 'rewritten') f.rewritten = true;
      else if (action === 'deleted') f.deleted = true;
      else if (action === 'read') f.read = true;
      else {
        const n = /^edited (\d+)×$/.exec(action);
        if (n !== null) f.edits += Number(n[1]);
      }
    }
  }
  return true;
}

/** Reads a summary's lines into the builder: lines under a known heading go to its section, others to findings. */
function readSummary(b: Builder, text: string, focus: ReadonlySet<string>, refs: References, orderBase: number): void {
  const byHeading = new Map<string, SectionName>(SECTIONS.map((s) => [HEADINGS[s], s]));
  let section: SectionName = 'decisions';
  let foreign = true;
  let i = 0;
  for (const raw of redactBlobs(text).split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    const heading = byHeading.get(line) ?? LEGACY_HEADINGS[line];
    if (heading !== undefined) {
      section = heading;
      foreign = false;
      continue;
    }
    const body = line.replace(/^- /, '');
    const order = orderBase + i++;
    if (section === 'names') {
      for (const n of body.split(', ')) if (n !== '' && !n.endsWith('…')) b.names.push(n);
      continue;
    }
    if (section === 'task' && body.startsWith(WORKSPACE_PREFIX)) {
      b.workspace ??= body.slice(WORKSPACE_PREFIX.length);
      continue;
    }
    if (section === 'task' && body.startsWith(COMMANDS_PREFIX)) {
      for (const m of body.matchAll(/`([^`]+)`/g)) if (m[1] !== undefined) b.commands.set(m[1], (b.commands.get(m[1]) ?? 0) + 1);
      continue;
    }
    if (section === 'files' && body.startsWith(LOOKED_AT_PREFIX)) {
      for (const p of body.slice(LOOKED_AT_PREFIX.length).split(', ')) if (p !== '' && !p.endsWith('…')) b.file(p, order).read = true;
      continue;
    }
    if (section === 'files' && readFileLine(b, body, order)) continue;
    const later = refs.of(body, -1);
    const base = section === 'decisions' ? 2 : section === 'task' ? 8 : 5;
    const score = base + contentScore(body, focus) / (section === 'decisions' ? 1 : 2) + 1.5 * later;
    b.add({ section, text: body, score, order, ...(foreign ? { foreign } : {}) });
  }
}

// ---------------------------------------------------------------------------------------------
// The transcript

interface ErrorFact {
  fact: Fact;
  entry: number;
  key: string | undefined;
}

function definitions(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(DEFINITION)) if (m[1] !== undefined) out.add(m[1].replace(/[.?!]+$/, ''));
  return out;
}

function recordChange(b: Builder, f: FileFact, before: string, after: string, entry: number, refs: References): void {
  const old = identifiers(before);
  const now = identifiers(after);
  const defs = definitions(after);
  const value = (id: string): number => 1 + Math.min(3, refs.after(id, entry)) + (defs.has(id) ? 2 : 0) + (refs.spoken.has(id) ? 1.5 : 0);
  for (const id of now.keys()) {
    if (old.has(id) || id === f.path || b.relative(id) === f.path) continue;
    f.added.set(id, Math.max(f.added.get(id) ?? 0, value(id)));
    f.removed.delete(id);
  }
  for (const id of old.keys()) {
    if (now.has(id)) continue;
    if (f.added.delete(id)) continue;
    f.removed.set(id, Math.max(f.removed.get(id) ?? 0, value(id)));
  }
}

function patchFiles(text: string): Array<{ action: string; path: string; minus: string; plus: string }> {
  const out: Array<{ action: string; path: string; minus: string; plus: string }> = [];
  let cur: { action: string; path: string; minus: string; plus: string } | undefined;
  for (const line of text.split('\n')) {
    const m = /^\*\*\* (Add|Update|Delete) File: (.+)$/.exec(line);
    if (m !== null && m[1] !== undefined && m[2] !== undefined) {
      cur = { action: m[1], path: m[2].trim(), minus: '', plus: '' };
      out.push(cur);
    } else if (cur !== undefined && line.startsWith('+')) cur.plus += `${line.slice(1)}\n`;
    else if (cur !== undefined && line.startsWith('-')) cur.minus += `${line.slice(1)}\n`;
  }
  return out;
}

/** Open items of a todo or plan call (`todos`, `plan`), the ones not completed. */
function todoItems(call: Call): string[] | undefined {
  for (const key of ['todos', 'plan', 'items']) {
    const v = call.args.get(key);
    if (!Array.isArray(v)) continue;
    const out: string[] = [];
    for (const item of v as unknown[]) {
      if (typeof item !== 'object' || item === null) continue;
      const o = item as Record<string, unknown>;
      const text = typeof o.content === 'string' ? o.content : typeof o.step === 'string' ? o.step : typeof o.title === 'string' ? o.title : undefined;
      if (text === undefined || o.status === 'completed' || o.status === 'done') continue;
      out.push(o.status === 'in_progress' ? `${text} (in progress)` : text);
    }
    return out;
  }
  return undefined;
}

function* readTranscript(b: Builder, entries: readonly Entry[], focus: ReadonlySet<string>, refs: References): Steps<void> {
  const span = Math.max(1, entries.length - 1);
  const recency = (entry: number): number => 1 + (RECENCY_BONUS * entry) / span;
  const order = (entry: number, sub = 0): number => entry * 1000 + sub;
  const errors: ErrorFact[] = [];
  const commands = b.commands;
  /** "N tests" counts verified runs reported, so the assistant repeating one is not a second fact. */
  const testCounts = new Set<string>();
  let next: Fact | undefined;
  let plan: Fact[] | undefined;
  let todos: Fact[] | undefined;

  const finding = (e: Entry, line: string, sub: number, factor: number): void => {
    // A list item's own marker would read as a second bullet under the section's.
    const text = line.replace(LIST_ITEM, '');
    const s = contentScore(text, focus);
    if (s === 0 && !hasWords(text, 4)) {
      if (e.kind === 'ai') b.add({ section: 'decisions', text: clip(text, LINE_CAP), score: 0, order: order(e.index, sub) });
      return;
    }
    b.add({ section: 'decisions', text: clip(text, LINE_CAP), score: (s * factor + (s > 0 ? 0.5 : 0) + 1.5 * refs.of(text, e.index)) * recency(e.index), order: order(e.index, sub) });
  };

  for (const e of entries) {
    yield;
    if (e.kind === 'user') {
      const label = e.origin !== undefined && e.origin !== 'user' ? `(${e.origin}) ` : '';
      const s = contentScore(e.text, focus);
      // "continue", "ok": kept only when there is nothing else (score 0).
      const filler = s === 0 && !hasWords(e.text, 3);
      b.add({ section: 'task', text: clip(label + e.text, LINE_CAP_TASK), score: filler ? 0 : (8 + s + refs.of(e.text, e.index)) * recency(e.index), order: order(e.index) });
    } else if (e.kind === 'ai' || e.kind === 'thinking') {
      readMessage(e);
    } else if (e.kind === 'note') {
      finding(e, e.text, 0, 1);
    } else if (e.kind === 'call' && e.call !== undefined) {
      readCall(e, e.call);
    } else if (e.kind === 'out' && e.answers === undefined && e.isError) {
      b.add({ section: 'errors', text: clip(`error: ${e.text}`, LINE_CAP), score: 6 * recency(e.index), order: order(e.index) });
    }
  }

  function readMessage(e: Entry): void {
    const factor = e.kind === 'thinking' ? 0.5 : 1;
    const items: Fact[] = [];
    let header = '';
    let fenced = false;
    e.text.split('\n').forEach((raw, sub) => {
      const line = raw.trim();
      if (line.startsWith('```')) {
        fenced = !fenced;
        return;
      }
      // Code and markup the assistant quoted say less than its prose around them.
      if (fenced || line === '' || /^[<{}\])]/.test(line) || /[{>;]$/.test(line)) return;
      const isItem = LIST_ITEM.test(line);
      if (isItem) {
        items.push({ section: 'open', text: clip(line.replace(LIST_ITEM, ''), LINE_CAP), score: (6 + contentScore(line, focus) / 2) * recency(e.index), order: order(e.index, sub) });
      } else header = line;
      const at = { index: e.index, sub };
      if (e.kind === 'ai' && NEXT_LINE.test(line)) next = { section: 'next', text: clip(line, LINE_CAP), score: 100, order: order(e.index, sub), mandatory: true };
      if (e.kind === 'ai' && VERIFIED_LINE.test(line)) {
        // "All 397 tests pass" after the run that printed "397 tests, 0 failures" says it twice.
        const said = sentence(line, VERIFIED_LINE);
        const counts = said.match(TEST_COUNT) ?? [];
        if (counts.length === 0 || counts.some((c) => !testCounts.has(c))) add('verified', said, 5, at);
      } else if (AI_ERROR_LINE.test(line) && !DECISION_LINE.test(line) && !isItem) add('errors', line, 5, at);
      else if (OPEN_LINE.test(line) && !isItem) add('open', line, 6, at);
      else if (/^#+\s/.test(line)) finding(e, line.replace(/^#+\s+/, ''), sub, factor * 0.3);
      else finding(e, line, sub, factor);
    });
    // The newest list the assistant wrote is its plan, unless it reports what was done.
    if (items.length >= 2 && e.kind === 'ai' && !DONE_HEADER.test(header)) plan = items;
  }

  function add(section: SectionName, text: string, base: number, at: { index: number; sub: number }): void {
    b.add({ section, text: clip(text, LINE_CAP), score: (base + contentScore(text, focus) / 2 + refs.of(text, at.index)) * recency(at.index), order: order(at.index, at.sub) });
  }

  function readCall(e: Entry, call: Call): void {
    const name = call.name.toLowerCase();
    const result = e.result;
    const path = stringArg(call, PATH_ARGS);
    const oldText = stringArg(call, OLD_ARGS);
    const newText = stringArg(call, NEW_ARGS);
    const content = stringArg(call, CONTENT_ARGS);
    const patch = stringArg(call, ['input', 'patch']);
    const cmd = shellCommand(call);
    const failed = result?.isError === true;
    if (path !== undefined && (oldText !== undefined || newText !== undefined)) {
      const f = b.file(path, order(e.index));
      if (!failed) {
        f.edits++;
        recordChange(b, f, oldText ?? '', newText ?? '', e.index, refs);
      }
    } else if (path !== undefined && content !== undefined && !/read|view|grep|search|glob/.test(name)) {
      const f = b.file(path, order(e.index));
      if (!failed) {
        if (/\bcreated?\b/i.test(result?.text ?? '') && !f.edits && !f.rewritten) f.created = true;
        else f.rewritten = true;
        recordChange(b, f, '', content, e.index, refs);
      }
    } else if (patch !== undefined && patch.includes('*** ')) {
      for (const p of patchFiles(patch)) {
        const f = b.file(p.path, order(e.index));
        if (failed) continue;
        if (p.action === 'Add') f.created = true;
        else if (p.action === 'Delete') f.deleted = true;
        else f.edits++;
        recordChange(b, f, p.minus, p.plus, e.index, refs);
      }
    } else if (path !== undefined && /read|view|open|cat|grep|glob|search|find|list|ls/.test(name)) {
      b.file(path, order(e.index)).read = true;
    } else if (cmd !== undefined) {
      readShell(e, cmd, result);
      return;
    } else {
      const items = todoItems(call);
      if (items !== undefined) {
        todos = items.map((t, i) => ({ section: 'open', text: clip(t, LINE_CAP), score: 7 * recency(e.index), order: order(e.index, i) }));
        return;
      }
      // Another tool (a subagent, a search, a fetch, a background job): a test run it reports
      // is verified; its prose may be a finding.
      if (result !== undefined && !failed) {
        const pass = firstLines(result.text, PASS_LINE, 1)[0];
        if (pass !== undefined && firstLines(result.text, ERROR_LINE, 1, NOT_AN_ERROR).length === 0) add('verified', `${call.name}: ${pass}`, 5, { index: e.index, sub: 0 });
        const kept = result.text.split('\n').map((l) => l.trim()).filter((l) => isProse(l, 5)).slice(0, 40);
        kept.forEach((l, i) => finding(result, l, i, 0.6));
      }
    }
    if (failed && result !== undefined) {
      const what = path === undefined ? call.name : `${call.name} ${b.relative(path)}`;
      const first = firstLines(result.text, /./, 1)[0] ?? 'failed';
      errors.push({ fact: { section: 'errors', text: clip(`${what}: ${first}`, LINE_CAP), score: 6 * recency(e.index), order: order(e.index) }, entry: e.index, key: undefined });
    }
  }

  function readShell(e: Entry, cmd: string, result: Entry | undefined): void {
    const shown = displayCommand(cmd);
    if (shown === '') return;
    commands.set(shown, (commands.get(shown) ?? 0) + 1);
    if (result === undefined) return;
    const errorLines = firstLines(result.text, ERROR_LINE, 2, NOT_AN_ERROR);
    const lines = errorLines.length > 0 ? errorLines : result.isError ? firstLines(result.text, /./, 1) : firstLines(result.text, WARNING_LINE, 1);
    const pass = errorLines.length === 0 && !result.isError ? firstLines(result.text, PASS_LINE, 1)[0] : undefined;
    if (pass === undefined && lines.length > 0) {
      const text = `\`${shown}\`: ${lines.join(' / ')}`;
      errors.push({ fact: { section: 'errors', text: clip(text, LINE_CAP), score: (5 + contentScore(lines.join(' '), focus) / 2) * recency(e.index), order: order(e.index) }, entry: e.index, key: commandKey(cmd) });
      return;
    }
    // A clean run of a command that failed before resolves it.
    const key = commandKey(cmd);
    for (const x of errors) if (x.key === key && !x.fact.text.includes(RESOLVED)) x.fact.text = `${x.fact.text}${RESOLVED}the next \`${key}\` ran clean`;
    if (pass !== undefined) {
      for (const c of pass.match(TEST_COUNT) ?? []) testCounts.add(c);
      b.add({ section: 'verified', text: clip(`\`${shown}\`: ${pass}`, LINE_CAP), score: (5 + contentScore(pass, focus) / 2) * recency(e.index), order: order(e.index) });
    }
  }

  // An error's fix is what the assistant said right after it.
  for (const x of errors) {
    const said = entries.slice(x.entry + 1, x.entry + 6).find((e) => e.kind === 'ai' && hasWords(e.text, 4));
    const first = said?.text.split('\n').find((l) => l.trim() !== '')?.trim();
    if (first !== undefined) {
      // Said as the fix, the line is not a fact of its own as well.
      const line = clip(first, LINE_CAP);
      const own = b.facts.findIndex((f) => f.text === line);
      if (own >= 0) b.facts.splice(own, 1);
      const [head, resolved] = x.fact.text.split(RESOLVED);
      x.fact.text = `${clip(`${head ?? ''} — then: ${first}`, LINE_CAP + 120)}${resolved === undefined ? '' : RESOLVED + resolved}`;
    }
    if (!x.fact.text.includes(RESOLVED)) x.fact.score += 2;
    b.add(x.fact);
  }
  for (const f of todos ?? plan ?? []) b.add(f);
  if (next !== undefined) b.add(next);
}

/** The digest of a summary prompt: previous summary and transcript merged. */
export function readDigest(prompt: string): Digest {
  return runSteps(digestSteps(prompt));
}

/** `readDigest` in steps, about one per transcript line or entry (see runSteps). */
export function* digestSteps(prompt: string): Steps<Digest> {
  const parts = parseSummaryPrompt(prompt);
  const focus = focusWords(parts.focus);
  const entries = yield* entrySteps(parts.transcript);
  const refs = yield* References.of(entries);
  const b = new Builder();
  if (parts.previousSummary !== undefined) readSummary(b, parts.previousSummary, focus, refs, PREVIOUS_ORDER);
  const previousNext = b.facts.find((f) => f.section === 'next');
  const previousOpen = b.facts.filter((f) => f.section === 'open');

  const headings = new Set<string>([...SECTIONS.map((s) => HEADINGS[s]), ...Object.keys(LEGACY_HEADINGS)]);
  const isSummaries = entries.length > 0 && entries.every((e) => e.kind === 'note') && parts.transcript.split('\n').some((l) => headings.has(l.trim()));
  if (isSummaries) {
    // Summaries to condense (lcm): each read like a previous summary, later ones later.
    readSummary(b, parts.transcript, focus, refs, 0);
  } else {
    const paths: string[] = [];
    for (const e of entries) {
      if (e.call !== undefined) {
        for (const n of PATH_ARGS) {
          const v = e.call.args.get(n);
          if (typeof v === 'string') paths.push(v);
        }
      }
    }
    b.workspace ??= commonWorkspace(paths);
    yield* readTranscript(b, entries, focus, refs);
  }

  // One next step: the newest. Open work the transcript replaced with a newer plan weighs less.
  const nexts = b.facts.filter((f) => f.section === 'next');
  const keepNext = nexts.length > 1 ? nexts.filter((f) => f !== previousNext) : nexts;
  const newOpen = b.facts.some((f) => f.section === 'open' && !previousOpen.includes(f));
  const facts = b.facts.filter((f) => f.section !== 'next' || f === keepNext[keepNext.length - 1]);
  for (const f of facts) {
    if (f.section === 'next') f.mandatory = true;
    if (newOpen && previousOpen.includes(f)) f.score *= 0.5;
  }
  if (b.commands.size > 0) {
    // Most run first; the list is clipped, so the rare ones go.
    const ranked = [...b.commands.entries()].sort((x, y) => y[1] - x[1]).map(([c]) => `\`${c}\``);
    facts.push({ section: 'task', text: clip(`${COMMANDS_PREFIX}${ranked.slice(0, 12).join(', ')}`, LINE_CAP), score: 6, order: Number.MAX_SAFE_INTEGER });
  }
  for (const f of b.files.values()) {
    const abs = b.workspace !== undefined && !f.path.startsWith('/') ? `${b.workspace}/${f.path}` : f.path;
    const base = f.path.slice(f.path.lastIndexOf('/') + 1);
    f.refs = Math.min(8, refs.after(abs, -1) + (abs === f.path ? 0 : refs.after(f.path, -1)) + (base === f.path ? 0 : refs.after(base, -1)));
  }
  if (b.workspace !== undefined && b.files.size > 0) {
    facts.push({ section: 'task', text: `${WORKSPACE_PREFIX}${b.workspace}`, score: 50, order: PREVIOUS_ORDER - 1, mandatory: true });
  }
  // The first request is the task; it stays whatever else comes.
  const task = facts.filter((f) => f.section === 'task' && f.score > 0 && !f.text.startsWith(WORKSPACE_PREFIX) && !f.text.startsWith(COMMANDS_PREFIX)).sort((x, y) => x.order - y.order)[0];
  if (task !== undefined) task.mandatory = true;
  const names = [...new Set([...b.names, ...refs.ranked()])];
  return { facts, files: b.files, workspace: b.workspace, names };
}
