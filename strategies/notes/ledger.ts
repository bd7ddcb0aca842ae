// The artifact ledger of the notes layer: the files the session read, changed, created and
// deleted, the last commands with their exit status, and each test command's last verdict. It
// is read off the tool calls and their results, never written by a summarizer, so it is exact
// and costs no model call. That is the part of the work agents most often lose at a compaction:
// after it, they read again what they read and redo what they changed.
//
// It also keeps where the work stood at the cut, read the same way: what the assistant wrote
// just before the user's latest message (a reply such as "yes, do that" means nothing without
// it), the assistant's last words, and the open items of the newest plan the agent wrote with
// its own plan tool. Summaries retell these loosely or drop them; the ledger quotes them. So
// it does the user's standing instructions: the sentences of their messages that set a
// constraint ("never touch the generated schema", "use pnpm instead"), which a retelling loses
// first; newest last, so that a later one reads as overriding an earlier one.
//
// The tools it understands are those of the agents the daemon imports and proxies (Claude Code,
// Codex, pi), plus one rule for any other tool that names a file. It is folded forward over the
// rows each compaction evicts (notes.ts) and kept with the notes, so it survives every
// compaction and every change of strategy.
import path from 'node:path';
import { z } from 'zod';
import type { StoredRow } from '../../protocol/rows.ts';
import { textTokens } from '../estimate.ts';
import { clipChars } from '../harness/summary-text.ts';

const FileEntry = z.strictObject({
  path: z.string(),
  reads: z.number().int().nonnegative(),
  /** Edits and writes. */
  changes: z.number().int().nonnegative(),
  created: z.boolean(),
  deleted: z.boolean(),
  /** The row of the newest call that touched it. */
  lastSeq: z.number().int().nonnegative(),
});
export type FileEntry = z.infer<typeof FileEntry>;

const CommandEntry = z.strictObject({
  command: z.string(),
  seq: z.number().int().nonnegative(),
  /** The exit status where the output shows it. */
  exit: z.number().int().nullable(),
  /** The agent's tool marked the result an error. */
  failed: z.boolean(),
});
export type CommandEntry = z.infer<typeof CommandEntry>;

const TestEntry = z.strictObject({
  command: z.string(),
  seq: z.number().int().nonnegative(),
  verdict: z.enum(['pass', 'fail', 'unknown']),
});

/** An assistant text, clipped to EXCHANGE_CHARS, with its row. */
const Said = z.strictObject({ seq: z.number().int().nonnegative(), text: z.string() });

const PlanItem = z.strictObject({ text: z.string(), status: z.string() });
export type PlanItem = z.infer<typeof PlanItem>;

/** The ledger as it is saved with the notes (storage/state/notes.ts), checked when read back. */
export const Ledger = z.strictObject({
  files: z.array(FileEntry),
  commands: z.array(CommandEntry),
  tests: z.array(TestEntry),
  /** The newest row folded in: a row at or before it is never counted twice. */
  through: z.number().int().nonnegative().default(0),
  /** The newest assistant text folded in. */
  lastWords: Said.nullable().default(null),
  /** The assistant text before the newest user message folded in (`user` is that message's row). */
  beforeUser: Said.extend({ user: z.number().int().nonnegative() }).nullable().default(null),
  /** The newest plan the agent wrote with its plan tool: the items not yet completed. */
  plan: z.strictObject({ seq: z.number().int().nonnegative(), tool: z.string(), open: z.array(PlanItem) }).nullable().default(null),
  /** The user's standing instructions, newest last (instructionSentences), clipped to INSTRUCTION_CHARS. */
  instructions: z.array(Said).default([]),
});
export type Ledger = z.infer<typeof Ledger>;

/** Commands kept, newest last. */
export const LEDGER_COMMANDS = 10;
/** Files only read that the saved ledger keeps, the newest touched; a changed file is always kept. */
const LEDGER_READ_ONLY_FILES = 1000;
/** Test commands kept, by their last run. */
const LEDGER_TESTS = 5;
/** A command longer than this is shown cut (transcript_grep finds it whole). */
const COMMAND_CHARS = 100;
/** Commands kept while changed files are still shown one by one. */
const COMMANDS_BEFORE_COLLAPSE = 3;
/** Characters kept of an assistant text the ledger quotes (transcript_read reads the rest). */
const EXCHANGE_CHARS = 300;
/** The shortest a quote is cut to for the budget. */
const MIN_QUOTE_CHARS = 80;
/** Open plan items shown at most, items kept (the rest counted when shown), and characters kept of each. */
const PLAN_ITEMS = 8;
const PLAN_ITEMS_KEPT = 50;
const PLAN_ITEM_CHARS = 120;
/** Standing instructions kept, the newest; and characters kept of each. */
const INSTRUCTIONS_KEPT = 8;
const INSTRUCTION_CHARS = 400;
/** Instructions shown before any quote is cut shorter. */
const INSTRUCTIONS_BEFORE_CUTS = 3;

/**
 * The ledger's share, in estimated tokens, of a notes budget: half of it (a quarter for where
 * the work stood, at least a quarter for the files, commands and tests), on top of what the
 * summarizer is asked to write (the layer's reserve counts both).
 */
export function ledgerBudget(notesBudgetTokens: number): number {
  return Math.max(200, Math.floor(notesBudgetTokens / 2));
}

/** The saved ledger read back: JSON checked against the schema, or why it cannot be read. */
export function readLedger(json: string | null): Ledger | { unreadable: string } {
  if (json === null) return emptyLedger();
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    return { unreadable: `not JSON (${(err as Error).message})` };
  }
  const parsed = Ledger.safeParse(value);
  return parsed.success ? parsed.data : { unreadable: `a format this build does not know (${parsed.error.issues[0]?.message ?? 'invalid'})` };
}

export function emptyLedger(): Ledger {
  return { files: [], commands: [], tests: [], through: 0, lastWords: null, beforeUser: null, plan: null, instructions: [] };
}

/** Words that make a sentence of the user's a constraint. */
const CONSTRAINT = /\b(?:must|never|don't|do not|always|instead)\b/i;

/**
 * The sentences of a user message that set a constraint, whitespace collapsed, at least 12
 * characters and at most INSTRUCTION_CHARS. Blocks an agent wraps in a tag inside the user's
 * turn (`<system-reminder>`, `<environment_context>`, `<user_instructions>`) are context it
 * injected, not what the user said, and are left out; so is a fenced code block (pasted code, a
 * log or an error saying "must not be null" is not the user's rule). So is a question ("should
 * we always retry?"): it asks, and whatever was settled comes in a later sentence.
 */
export function instructionSentences(text: string): string[] {
  return text
    .replace(/<([A-Za-z][\w-]*)\b[^>]*>[\s\S]*?<\/\1>/g, '\n')
    .replace(/```[\s\S]*?(?:```|$)/g, '\n')
    .split(/(?<=[.!?])\s+|\n+/)
    .map((x) => x.replace(/\s+/g, ' ').trim())
    .filter((x) => x.length >= 12 && x.length <= INSTRUCTION_CHARS && !x.endsWith('?') && CONSTRAINT.test(x));
}

/** An instruction's words, lower case, in order: two that say the same words are one. */
const instructionKey = (text: string): string => (text.toLowerCase().match(/[\p{L}\p{N}_]+/gu) ?? []).join(' ');

/**
 * The instructions with a newer one added, the newest INSTRUCTIONS_KEPT: the same words said
 * again move to the end. Which earlier instruction a later one overrides is not judged here (two
 * that share most words may still both hold); the order, newest last, tells the model.
 */
function withInstruction(kept: ReadonlyArray<{ seq: number; text: string }>, added: { seq: number; text: string }): Array<{ seq: number; text: string }> {
  const key = instructionKey(added.text);
  return [...kept.filter((k) => instructionKey(k.text) !== key), added].slice(-INSTRUCTIONS_KEPT);
}

/** What one tool call did. */
type Action = { kind: 'read' | 'change' | 'create' | 'delete'; path: string } | { kind: 'command'; command: string };

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v : undefined);

/** The files a Codex patch names: `*** Add File:`, `*** Update File:` (with `*** Move to:`), `*** Delete File:`. */
export function patchActions(patch: string): Action[] {
  const out: Action[] = [];
  for (const line of patch.split('\n')) {
    const m = /^\*\*\* (Add File|Update File|Delete File|Move to): (.+)$/.exec(line.trimEnd());
    if (m === null) continue;
    const p = m[2]!.trim();
    if (m[1] === 'Add File') out.push({ kind: 'create', path: p });
    else if (m[1] === 'Delete File') out.push({ kind: 'delete', path: p });
    else out.push({ kind: m[1] === 'Move to' ? 'create' : 'change', path: p });
  }
  return out;
}

/** Claude Code's TodoWrite and Codex's update_plan. */
const PLAN_TOOLS = new Set(['TodoWrite', 'update_plan']);

/**
 * The open items of a plan tool's call (those not marked completed), or null when the call is
 * not a plan: Claude Code's `todos: [{content, status}]`, Codex's `plan: [{step, status}]`.
 */
export function planItems(name: string, args: Record<string, unknown>): PlanItem[] | null {
  if (!PLAN_TOOLS.has(name)) return null;
  const list: unknown = Array.isArray(args.todos) ? args.todos : args.plan;
  if (!Array.isArray(list)) return null;
  const open: PlanItem[] = [];
  for (const item of list as unknown[]) {
    if (typeof item !== 'object' || item === null) continue;
    const it = item as Record<string, unknown>;
    const text = str(it.content) ?? str(it.step);
    const status = typeof it.status === 'string' ? it.status : 'pending';
    if (text !== undefined && status !== 'completed') open.push({ text: text.trim(), status });
  }
  return open;
}

/** A shell call's command as one line: `bash -lc X` is X, an argv list joined. */
function shellCommand(v: unknown): string | undefined {
  if (typeof v === 'string') return str(v);
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) return undefined;
  const argv = v;
  if (argv.length === 3 && /(^|\/)(ba|z)?sh$/.test(argv[0]!) && /^-l?c$/.test(argv[1]!)) return str(argv[2]);
  return str(argv.join(' '));
}

/** A tool the ledger does not know that writes, by its name. */
const WRITING = /write|edit|create|delete|remove|patch|replace|update|save|move|rename/i;

/** What a tool call did to files and the shell, by the agent's tool. */
export function callActions(name: string, args: Record<string, unknown>): Action[] {
  const file = str(args.file_path) ?? str(args.path) ?? str(args.notebook_path) ?? str(args.filename);
  switch (name) {
    // Claude Code's, and pi's in lower case.
    case 'Read':
    case 'read':
      return file === undefined ? [] : [{ kind: 'read', path: file }];
    case 'Edit':
    case 'MultiEdit':
    case 'NotebookEdit':
    case 'edit':
      return file === undefined ? [] : [{ kind: 'change', path: file }];
    case 'Write':
    case 'write':
      return file === undefined ? [] : [{ kind: 'create', path: file }];
    case 'Bash':
    case 'bash':
      return commandActions(str(args.command));
    // Codex
    case 'apply_patch':
      return patchActions(str(args.input) ?? str(args.patch) ?? str(args._raw) ?? '');
    case 'shell':
    case 'local_shell':
    case 'exec_command':
      return commandActions(shellCommand(args.command) ?? shellCommand(args.cmd));
    default:
      return file === undefined ? [] : [{ kind: WRITING.test(name) ? 'change' : 'read', path: file }];
  }
}

/** A shell command; Codex may run apply_patch through the shell, which is a patch. */
function commandActions(command: string | undefined): Action[] {
  if (command === undefined) return [];
  const patch = /^apply_patch\s+(['"]?)([\s\S]*)\1\s*$/.exec(command);
  if (patch !== null && patch[2]!.includes('*** Begin Patch')) return patchActions(patch[2]!);
  return [{ kind: 'command', command }];
}

/** The exit status a command's output states, as the agents write it. */
export function exitStatus(output: string): number | null {
  const m = /(?:exit(?:ed)?(?: with)?(?: code| status)?|exit_code|Exit code|Process exited with code)[:=\s"]+(-?\d+)/i.exec(output);
  return m === null ? null : Number(m[1]);
}

const TEST_COMMAND =
  /\b(?:(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test|npx\s+(?:jest|vitest|mocha)|pytest|py\.test|go\s+test|cargo\s+(?:test|nextest)|jest|vitest|mocha|node\s+--test|make\s+(?:test|check)|phpunit|rspec|tox|dotnet\s+test|mvn\s+test|gradle\w*\s+test|deno\s+test)\b/;

export function isTestCommand(command: string): boolean {
  return TEST_COMMAND.test(command);
}

/** A test run's verdict from its status and output. */
export function testVerdict(exit: number | null, failed: boolean, output: string): 'pass' | 'fail' | 'unknown' {
  if (failed || (exit !== null && exit !== 0)) return 'fail';
  if (/\b[1-9]\d* (?:failed|failing|failures?|errors?)\b|^not ok\b|^FAIL\b|\bFAILED\b/m.test(output)) return 'fail';
  if (exit === 0) return 'pass';
  if (/\b\d+ (?:passed|passing)\b|^ok\b|\bPASS\b|\ball tests passed\b|^# fail 0$/im.test(output)) return 'pass';
  return 'unknown';
}

function resultText(row: StoredRow): string {
  if (row.body.kind !== 'tool_result') return '';
  return row.body.content.map((p) => (p.type === 'text' ? p.text : '')).join('\n');
}

/** The tool results among `rows`, by the call they answer. */
export function resultsOf(rows: readonly StoredRow[]): Map<string, StoredRow> {
  const results = new Map<string, StoredRow>();
  for (const r of rows) if (r.body.kind === 'tool_result') results.set(r.body.call_id, r);
  return results;
}

/**
 * The ledger with `rows` (in order) folded in: every tool call, and for a command the result
 * that answers it (among `results`, by default the same rows: a caller folding a long history
 * in slices passes the results of all of it).
 */
export function foldLedger(ledger: Ledger, rows: readonly StoredRow[], results: ReadonlyMap<string, StoredRow> = resultsOf(rows)): Ledger {
  const files = new Map(ledger.files.map((f) => [f.path, { ...f }]));
  const commands = [...ledger.commands];
  const tests = new Map(ledger.tests.map((t) => [t.command, t]));
  let through = ledger.through;
  let { lastWords, beforeUser, plan, instructions } = ledger;
  const touch = (p: string, seq: number): FileEntry => {
    let f = files.get(p);
    if (f === undefined) {
      f = { path: p, reads: 0, changes: 0, created: false, deleted: false, lastSeq: seq };
      files.set(p, f);
    }
    f.lastSeq = seq;
    // Touched again in insertion order: the map's order is the order of last touch.
    files.delete(p);
    files.set(p, f);
    return f;
  };
  for (const row of rows) {
    if (row.seq <= ledger.through) continue;
    through = Math.max(through, row.seq);
    const body = row.body;
    if (body.kind === 'user' && body.origin === 'user' && body.content.some((p) => p.type === 'text' && p.text.trim() !== '')) {
      beforeUser = lastWords === null ? null : { ...lastWords, user: row.seq };
      const said = body.content.map((p) => (p.type === 'text' ? p.text : '')).join('\n');
      for (const text of instructionSentences(said)) instructions = withInstruction(instructions, { seq: row.seq, text });
      continue;
    }
    if (body.kind !== 'assistant') continue;
    const said = body.content.map((p) => (p.type === 'text' ? p.text : '')).join('\n').trim();
    if (said !== '') lastWords = { seq: row.seq, text: clipChars(said, EXCHANGE_CHARS) };
    for (const part of body.content) {
      if (part.type !== 'tool_call') continue;
      const items = planItems(part.name, part.arguments);
      if (items !== null) plan = { seq: row.seq, tool: part.name, open: items.slice(0, PLAN_ITEMS_KEPT).map((i) => ({ ...i, text: clipChars(i.text, PLAN_ITEM_CHARS) })) };
      const result = results.get(part.id);
      for (const a of callActions(part.name, part.arguments)) {
        if (a.kind === 'command') {
          const output = result === undefined ? '' : resultText(result);
          const failed = result !== undefined && result.body.kind === 'tool_result' && result.body.is_error;
          const exit = exitStatus(output);
          commands.push({ command: a.command, seq: row.seq, exit, failed });
          if (isTestCommand(a.command)) {
            tests.delete(a.command);
            tests.set(a.command, { command: a.command, seq: row.seq, verdict: result === undefined ? 'unknown' : testVerdict(exit, failed, output) });
          }
          continue;
        }
        const f = touch(a.path, row.seq);
        if (a.kind === 'read') f.reads++;
        else if (a.kind === 'delete') f.deleted = true;
        else {
          // A write to a file the session never saw is a creation; one it knew is a change.
          if (a.kind === 'create' && f.reads === 0 && f.changes === 0 && !f.created) f.created = true;
          f.changes++;
          f.deleted = false;
        }
      }
    }
  }
  // Files only read past the bound go, oldest first: the render would drop them first anyway.
  let readOnly = [...files.values()].filter((f) => !isChanged(f)).length;
  const kept = [...files.values()].filter((f) => isChanged(f) || readOnly-- <= LEDGER_READ_ONLY_FILES);
  return { files: kept, commands: commands.slice(-LEDGER_COMMANDS), tests: [...tests.values()].slice(-LEDGER_TESTS), through, lastWords, beforeUser, plan, instructions };
}

const isChanged = (f: FileEntry): boolean => f.changes > 0 || f.created || f.deleted;

function fileLine(f: FileEntry, shown: string): string {
  const what = [f.deleted ? 'deleted' : f.created ? 'created' : '', f.changes > 0 ? `${f.changes} change${f.changes === 1 ? '' : 's'}` : '', f.reads > 0 ? `${f.reads} read${f.reads === 1 ? '' : 's'}` : ''].filter((x) => x !== '');
  return `${shown} (${what.join(', ')}; #${f.lastSeq})`;
}

function commandLine(c: CommandEntry): string {
  const cmd = c.command.replace(/\s+/g, ' ').trim();
  const shown = cmd.length > COMMAND_CHARS ? `${cmd.slice(0, COMMAND_CHARS)}…` : cmd;
  const status = c.exit !== null ? `exit ${c.exit}` : c.failed ? 'failed' : 'status not shown';
  return `\`${shown}\` → ${status} (#${c.seq})`;
}

/** The directory a path or directory is in: `a/b` for `a/b/c`, `/` at the root, `.` above a relative top. */
function parentOf(p: string): string {
  return path.posix.dirname(p);
}

/** The directory every path shares (ending in `/`), or '' when they share none worth naming. */
function commonDirectory(paths: readonly string[]): string {
  if (paths.length < 2) return '';
  let common = parentOf(paths[0]!);
  for (const p of paths) while (common !== '.' && common !== '/' && !p.startsWith(`${common}/`)) common = parentOf(common);
  return common === '.' || common === '/' ? '' : `${common}/`;
}

/** `f`, answering its last result again while it is called with the same arguments (===). */
function lastCall<A extends unknown[], R>(f: (...args: A) => R): (...args: A) => R {
  let last: { args: A; result: R } | undefined;
  return (...args) => {
    if (last !== undefined && last.args.length === args.length && last.args.every((a, i) => a === args[i])) return last.result;
    last = { args, result: f(...args) };
    return last.result;
  };
}

/** A changed file shown alone, or a directory standing for the changed files under it. */
type Shown = { file: FileEntry } | { dir: string; files: number; last: number };

const shownPath = (u: Shown): string => ('file' in u ? u.file.path : u.dir);
const shownLast = (u: Shown): number => ('file' in u ? u.file.lastSeq : u.last);

/**
 * One step of collapsing changed files into directories: the directory holding most of the
 * shown entries takes their place (the oldest such first when several hold as many); when every
 * entry is alone in its directory, the deepest one is shown as its directory instead. Null when
 * nothing is left to collapse.
 */
function collapseOnce(units: readonly Shown[]): Shown[] | null {
  if (units.length === 0 || (units.length === 1 && !('file' in units[0]!))) return null;
  const groups = new Map<string, Shown[]>();
  for (const u of units) {
    const dir = parentOf(shownPath(u));
    const g = groups.get(dir);
    if (g === undefined) groups.set(dir, [u]);
    else g.push(u);
  }
  let pick: [string, Shown[]] | undefined;
  let pickLast = 0;
  for (const g of groups) {
    if (g[1].length < 2) continue;
    const last = Math.max(...g[1].map(shownLast));
    if (pick === undefined || g[1].length > pick[1].length || (g[1].length === pick[1].length && last < pickLast)) {
      pick = g;
      pickLast = last;
    }
  }
  if (pick === undefined) {
    // Each alone: lift the deepest one level, so that it may meet others.
    // The first of the deepest, as a stable sort by depth would put first.
    let deepest = units[0]!;
    let depth = -1;
    for (const u of units) {
      const d = shownPath(u).split('/').length;
      if (d > depth) [deepest, depth] = [u, d];
    }
    const dir = parentOf(shownPath(deepest));
    if (dir === shownPath(deepest)) return null;
    pick = [dir, [deepest]];
  }
  const [dir, lifted] = pick;
  // The new directory also takes in what is already shown in or under it, rather than it being named twice.
  const inLifted = new Set(lifted);
  const under = dir === '/' ? '/' : `${dir}/`;
  const members = [...lifted, ...units.filter((u) => !inLifted.has(u) && (shownPath(u) === dir || shownPath(u).startsWith(under)))];
  const inMembers = new Set(members);
  const merged: Shown = { dir, files: members.reduce((n, u) => n + ('file' in u ? 1 : u.files), 0), last: Math.max(...members.map(shownLast)) };
  return [...units.filter((u) => !inMembers.has(u)), merged];
}

function shownLine(u: Shown, strip: (p: string) => string): string {
  if ('file' in u) return fileLine(u.file, strip(u.file.path));
  const dir = u.dir === '/' ? '/' : `${strip(u.dir)}/`;
  return `${dir} (${u.files} file${u.files === 1 ? '' : 's'} changed, last #${u.last})`;
}

/** The ledger's first line. */
export const LEDGER_HEADER = 'Artifacts so far and where the work stood, read off the history (exact; #N is a row, transcript_read reads it):';

/** A quote on one line. */
function quoted(text: string): string {
  return `"${text.replace(/\s+/g, ' ').trim()}"`;
}

/**
 * Where the work stood at the cut: the user's standing instructions (the newest `rules`), what
 * the assistant wrote before the user's latest message, its last words when they came after
 * that message, and the newest plan's open items (the first `items`), each quote cut to `chars`.
 */
function standingLines(ledger: Ledger, chars: number, items: number, rules: number): string[] {
  const out: string[] = [];
  const { beforeUser, lastWords, plan, instructions } = ledger;
  const q = (text: string): string => quoted(clipChars(text, chars));
  const shownRules = rules > 0 ? instructions.slice(-rules) : [];
  if (shownRules.length > 0) {
    const more = instructions.length - shownRules.length;
    out.push(`The user's standing instructions, newest last${more > 0 ? ` (${more} older: transcript_grep finds them)` : ''}: ${shownRules.map((i) => `${q(i.text)} (#${i.seq})`).join('; ')}`);
  }
  if (beforeUser !== null) out.push(`The assistant wrote before the user's message #${beforeUser.user} (#${beforeUser.seq}): ${q(beforeUser.text)}`);
  if (lastWords !== null && lastWords.seq > (beforeUser?.user ?? 0)) out.push(`The assistant's last words before the verbatim history (#${lastWords.seq}): ${q(lastWords.text)}`);
  if (plan !== null) {
    const shown = plan.open.slice(0, items).map((i) => `${q(i.text)} (${i.status})`);
    if (plan.open.length > items) shown.push(`${plan.open.length - items} more`);
    out.push(plan.open.length === 0 ? `Plan (${plan.tool} #${plan.seq}): every item completed` : `Open plan items (${plan.tool} #${plan.seq}): ${shown.join('; ')}`);
  }
  return out;
}

/**
 * Where the work stood, within half the ledger's budget: the oldest instructions go first,
 * down to the newest three; then the quotes are cut shorter, down to MIN_QUOTE_CHARS; then plan
 * items go from the last, down to one; then the instructions, down to none (at the floor a
 * changed file's directory goes before a quote of the user). The files keep the rest.
 */
function fittedStanding(ledger: Ledger, budgetTokens: number): string[] {
  let chars = INSTRUCTION_CHARS;
  let items = PLAN_ITEMS;
  let rules = ledger.instructions.length;
  let lines = standingLines(ledger, chars, items, rules);
  while (textTokens(lines.join('\n')) > budgetTokens / 2) {
    if (rules > INSTRUCTIONS_BEFORE_CUTS) rules--;
    else if (chars > MIN_QUOTE_CHARS) chars = Math.max(MIN_QUOTE_CHARS, Math.floor(chars / 2));
    else if (items > 1) items--;
    else if (rules > 0) rules--;
    else break;
    lines = standingLines(ledger, chars, items, rules);
  }
  return lines;
}

/**
 * The ledger as the notes show it, within `budgetTokens` (estimated): where the work stood
 * (within half the budget, fittedStanding), then the changed files, the files only read, the
 * commands, the test runs, paths under the directory they all share. Over
 * the budget the oldest files only read go first; then the oldest commands, down to the newest
 * three; then changed files are shown by directory, the fullest directory first and a level up
 * at a time, so that a changed file is never left out without its directory named, down to the
 * directories below the one all changed files share; then the remaining commands go; then
 * where the work stood is cut to its shortest quotes and one plan item, without the user's
 * instructions; then the collapse goes on, up to that shared directory and never above it.
 * Empty when the ledger holds nothing.
 */
export function renderLedger(ledger: Ledger, budgetTokens: number): string {
  const changed = ledger.files.filter(isChanged);
  let readOnly = ledger.files.filter((f) => !isChanged(f));
  let commands = ledger.commands;
  let standing = fittedStanding(ledger, budgetTokens);
  if (ledger.files.length === 0 && commands.length === 0 && ledger.tests.length === 0 && standing.length === 0) return '';
  let units: Shown[] = changed.map((f) => ({ file: f }));
  // Each step below changes one of the parts and renders again; a part is rendered only when
  // what it shows changed (a collapse steps once per directory, and the files only read can
  // be a thousand), so fitting a long ledger is not a render of all of it per step.
  const tests = ledger.tests.length > 0 ? `Tests: ${ledger.tests.map((t) => `\`${t.command.slice(0, COMMAND_CHARS)}\` ${t.verdict} (#${t.seq})`).join('; ')}` : undefined;
  // The shared directory of what is shown: a file only read elsewhere stops pulling it up once it goes.
  const rootOf = lastCall((shown: readonly FileEntry[]) => commonDirectory([...changed, ...shown].map((f) => f.path)));
  const stripFor = (root: string) => (p: string): string => (root !== '' && p.startsWith(root) ? p.slice(root.length) : p);
  const readOnlyLine = lastCall((shown: readonly FileEntry[], root: string) => {
    const strip = stripFor(root);
    return shown.length > 0 ? `Read only: ${shown.map((f) => fileLine(f, strip(f.path))).join('; ')}` : undefined;
  });
  const changedLine = lastCall((shown: readonly Shown[], root: string) => {
    const strip = stripFor(root);
    const byDir = shown.some((u) => !('file' in u)) ? ' (a directory stands for the files changed under it; transcript_grep it to list them)' : '';
    return shown.length > 0 ? `Changed${byDir}: ${shown.map((u) => shownLine(u, strip)).join('; ')}` : undefined;
  });
  const commandsLine = lastCall((shown: readonly CommandEntry[]) => (shown.length > 0 ? `Last commands: ${shown.map(commandLine).join('; ')}` : undefined));
  const render = (): string => {
    const root = rootOf(readOnly);
    const out = [LEDGER_HEADER, ...standing];
    if (root !== '') out.push(`Paths below are under ${root}`);
    for (const line of [changedLine(units, root), readOnlyLine(readOnly, root), commandsLine(commands), tests]) if (line !== undefined) out.push(line);
    return out.join('\n');
  };
  let text = render();
  while (textTokens(text) > budgetTokens && readOnly.length > 0) {
    readOnly = readOnly.slice(Math.max(1, Math.floor(readOnly.length / 4)));
    text = render();
  }
  while (textTokens(text) > budgetTokens && commands.length > COMMANDS_BEFORE_COLLAPSE) {
    commands = commands.slice(1);
    text = render();
  }
  // Changed files collapse into directories below the one they all share; the last commands go
  // before a collapse would name only that shared directory, which tells the agent little.
  // A collapse never goes above that directory: it already stands for every changed file.
  const changedRoot = commonDirectory(changed.map((f) => f.path));
  const allowed = (u: Shown | undefined, belowRoot: boolean): boolean => {
    if (u === undefined || 'file' in u || changedRoot === '') return true;
    const dir = `${u.dir}/`;
    return dir.startsWith(changedRoot) && (!belowRoot || dir !== changedRoot);
  };
  const collapse = (belowRoot: boolean): void => {
    while (textTokens(text) > budgetTokens) {
      const next = collapseOnce(units);
      if (next === null || !allowed(next[next.length - 1], belowRoot)) break;
      units = next;
      text = render();
    }
  };
  collapse(true);
  while (textTokens(text) > budgetTokens && commands.length > 0) {
    commands = commands.slice(1);
    text = render();
  }
  // Then where the work stood gives up its room down to its shortest quotes, which still carry
  // each message's opening words, and drops the user's instructions (transcript_grep finds them),
  // before the changed directories merge into the shared one.
  if (textTokens(text) > budgetTokens) {
    standing = fittedStanding(ledger, 0);
    text = render();
    collapse(true);
  }
  collapse(false);
  return text;
}
