// Probes: what a compacted request must still let the agent answer, built from the transcript
// itself with no model, in the four kinds the published evaluations of compaction score (recall,
// artifact, continuation, decision). Each probe names the row it comes from, and a key: the text
// whose presence in the request counts as the probe kept, and which `transcript_grep` is asked
// for when checking that the source row can be found again. docs/eval.md explains each kind.
//
// Which files a tool call modified, which plan items are open and which user sentences set a
// constraint are read with the notes ledger's own parsers (callActions, planItems,
// instructionSentences): they have tests of their own, and what a probe measures is whether
// the request still carries the thing after compaction, not whether the parser is right.
import type { RowIn } from '../../protocol/rows.ts';
import { callActions, instructionSentences, planItems } from '../../strategies/notes/ledger.ts';
import { extractIdentifiers } from './identifiers.ts';
import { rowInText } from './retention.ts';

export const PROBE_KINDS = ['recall', 'artifact', 'continuation', 'decision'] as const;
export type ProbeKind = (typeof PROBE_KINDS)[number];

export interface Probe {
  kind: ProbeKind;
  /** The index of the source row in the transcript. */
  row: number;
  /** Kept when the request carries it: whitespace collapsed, or for an artifact the file's path. */
  key: string;
  /** An artifact: `key` is a path, matched by the path rules of `kept`. */
  path?: boolean;
  /** The literal `transcript_grep` is asked for, to find the source row again. */
  grep: string;
}

/**
 * A continuation key: the text's first characters, whitespace collapsed. Short enough that a
 * quote cut for a budget (the notes ledger cuts to 80 characters at the least) still holds it.
 */
export const KEY_CHARS = 64;
/** A grep literal's length at most, and a plan item's key (shorter than the ledger's quote of one). */
const GREP_CHARS = 80;

export function normalise(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

function userText(row: RowIn): string {
  if (row.kind !== 'user' || row.origin !== 'user') return '';
  return row.content.map((p) => (p.type === 'text' ? p.text : '')).join('\n').trim();
}

function assistantText(row: RowIn): string {
  if (row.kind !== 'assistant') return '';
  return row.content.map((p) => (p.type === 'text' ? p.text : '')).join('\n').trim();
}

function textKey(text: string): string {
  return normalise(text).slice(0, KEY_CHARS).trim();
}

/** A grep literal for a text: its first non-empty line, as written, cut short. */
function firstLine(text: string): string {
  return (text.split('\n').find((l) => l.trim() !== '') ?? text).trim().slice(0, GREP_CHARS).trim();
}

/**
 * The probes of one transcript. Built once from its rows; `at` answers those in force at a
 * request, given how many rows were appended before it and which of them have left it.
 */
export class ProbeSet {
  /** Identifiers that occur in one row only, by that row: tool outputs and user messages. */
  private readonly recall = new Map<number, string[]>();
  private readonly decisions = new Map<number, string[]>();
  /** Files modified, in row order. */
  private readonly modified: Array<{ row: number; path: string }> = [];
  private readonly users: number[] = [];
  private readonly plans: Array<{ row: number; open: string[] }> = [];

  constructor(private readonly rows: readonly RowIn[]) {
    const ids = rows.map((r) => [...extractIdentifiers(rowInText(r)).keys()]);
    // The row each identifier occurs in, or -1 once it occurs in a second one.
    const home = new Map<string, number>();
    ids.forEach((list, i) => {
      for (const id of list) home.set(id, home.has(id) && home.get(id) !== i ? -1 : i);
    });
    rows.forEach((r, i) => {
      const said = userText(r);
      if (r.kind === 'tool_result' || said !== '') {
        const mine = ids[i]!.filter((id) => home.get(id) === i);
        if (mine.length > 0) this.recall.set(i, mine);
      }
      if (said !== '') {
        this.users.push(i);
        const d = instructionSentences(said);
        if (d.length > 0) this.decisions.set(i, d);
      }
      if (r.kind !== 'assistant') return;
      for (const p of r.content) {
        if (p.type !== 'tool_call') continue;
        const plan = planItems(p.name, p.arguments);
        if (plan !== null) this.plans.push({ row: i, open: plan.map((item) => normalise(item.text).slice(0, GREP_CHARS).trim()) });
        for (const a of callActions(p.name, p.arguments)) if (a.kind === 'change' || a.kind === 'create' || a.kind === 'delete') this.modified.push({ row: i, path: a.path });
      }
    });
  }

  /** The probes at a request made after `appended` rows, of which `gone` have left it. */
  at(appended: number, gone: ReadonlySet<number>): Probe[] {
    const out: Probe[] = [];
    for (const [row, keys] of this.recall) if (row < appended && gone.has(row)) { for (const key of keys) out.push({ kind: 'recall', row, key, grep: key }); }
    for (const [row, keys] of this.decisions) if (row < appended && gone.has(row)) { for (const key of keys) out.push({ kind: 'decision', row, key, grep: key.slice(0, GREP_CHARS) }); }
    const files = new Map<string, number>();
    for (const m of this.modified) if (m.row < appended) files.set(m.path, m.row);
    for (const [path, row] of files) out.push({ kind: 'artifact', row, key: path, path: true, grep: path });
    const lastUser = this.users.filter((i) => i < appended).at(-1);
    if (lastUser !== undefined) {
      const said = userText(this.rows[lastUser]!);
      out.push({ kind: 'continuation', row: lastUser, key: textKey(said), grep: firstLine(said) });
      for (let i = lastUser - 1; i >= 0; i--) {
        const t = assistantText(this.rows[i]!);
        if (t === '') continue;
        out.push({ kind: 'continuation', row: i, key: textKey(t), grep: firstLine(t) });
        break;
      }
    }
    const plan = this.plans.filter((p) => p.row < appended).at(-1);
    if (plan !== undefined) { for (const key of plan.open) out.push({ kind: 'continuation', row: plan.row, key, grep: key }); }
    return out;
  }

  /** The common directory of every file modified before `appended` (ending in '/'), or ''. */
  modifiedRoot(appended: number): string {
    return commonDir(this.modified.filter((m) => m.row < appended).map((m) => m.path));
  }
}

/** The directory every path shares, ending in '/'; '' when they share none. */
function commonDir(paths: readonly string[]): string {
  if (paths.length === 0) return '';
  let common = paths[0]!.slice(0, paths[0]!.lastIndexOf('/') + 1);
  for (const p of paths) while (common !== '' && !p.startsWith(common)) common = parentDir(common);
  return common;
}

/** The directory above `dir` (both ending in '/'): `a/` for `a/b/`, '' above a top one and above '/'. */
function parentDir(dir: string): string {
  if (dir.length <= 1) return '';
  return dir.slice(0, dir.lastIndexOf('/', dir.length - 2) + 1);
}

const PATH_CHAR = /[\w.\-/@+~]/;

/** Whether `text` has `s` standing on its own: not inside a longer path or name. */
export function mentions(text: string, s: string): boolean {
  for (let at = text.indexOf(s); at !== -1; at = text.indexOf(s, at + 1)) {
    const before = at === 0 ? '' : text[at - 1]!;
    const after = text.slice(at + s.length, at + s.length + 2);
    if (before !== '' && PATH_CHAR.test(before)) continue;
    // A file may end a sentence ("a.ts."); a directory is named alone, not as the start of a path.
    if (s.endsWith('/') ? after !== '' && PATH_CHAR.test(after[0]!) : /^(?:[\w\-/]|\.\w)/.test(after)) continue;
    return true;
  }
  return false;
}

/** Whether the text names `p` (a file, or a directory ending in '/'): whole, or relative to a directory it also names. */
function names(text: string, p: string): boolean {
  if (mentions(text, p)) return true;
  for (let cut = p.indexOf('/'); cut !== -1 && cut < p.length - 1; cut = p.indexOf('/', cut + 1)) {
    const pre = p.slice(0, cut + 1);
    const rel = p.slice(cut + 1);
    if (rel !== '' && rel !== '/' && mentions(text, rel) && text.includes(pre)) return true;
  }
  return false;
}

/**
 * Whether a request's text keeps `probe`. An artifact is kept when the file is named, whole or
 * relative to a directory the text names, or when a directory of it below `root` (the directory
 * all modified files share) is named that way: a ledger past its budget shows changed files by
 * directory. Anything else is kept when its key appears, whitespace collapsed.
 */
export function kept(probe: Probe, text: string, normalisedText: string, root: string): boolean {
  if (probe.path !== true) return normalisedText.includes(probe.key);
  if (names(text, probe.key)) return true;
  for (let dir = probe.key.slice(0, probe.key.lastIndexOf('/') + 1); dir.length > root.length && dir !== '/'; dir = parentDir(dir)) {
    if (names(text, dir)) return true;
  }
  return false;
}

/** Per-kind tallies over a run's scored requests. */
export interface ProbeTally {
  /** Requests scored (every request from the first at which rows left, for recall only those at which rows left). */
  requests: number;
  probes: number;
  kept: number;
  /** Scored requests that kept every probe of this kind. */
  complete: number;
  /** The lowest share kept by one request (1 when none was scored). */
  worst: number;
  retrieval_checked: number;
  retrievable: number;
}

export function emptyTally(): ProbeTally {
  return { requests: 0, probes: 0, kept: 0, complete: 0, worst: 1, retrieval_checked: 0, retrievable: 0 };
}

/** Adds one request's score for `kind`: how many probes were in force and how many it kept. */
export function addScore(t: ProbeTally, total: number, keptCount: number): void {
  if (total === 0) return;
  t.requests++;
  t.probes += total;
  t.kept += keptCount;
  if (keptCount === total) t.complete++;
  t.worst = Math.min(t.worst, keptCount / total);
}
