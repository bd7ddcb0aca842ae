// The work of `albedo export` and `albedo import` (cli/verbs/transfer.ts declares the verbs and
// loads this module when one runs, so other verbs do not load the importers). `export` writes a
// session as JSON lines of rows `transcript.append` takes back; `import` reads such a file, or
// another agent's transcript (cli/import/), checks all of it, and only then appends it; a
// Claude Code session brings its subagents' files along as child sessions. Every row carries a
// client key, so importing the same file again completes an interrupted import instead of
// doubling it.
import fs from 'node:fs';
import path from 'node:path';
import { allRows } from '../protocol/client.ts';
import { RowIn, type StoredRow } from '../protocol/rows.ts';
import { jsonlLines, parseJsonl } from './import/common.ts';
import { IMPORT_FORMATS, OWN_FORMAT, type AnyFormat } from './import/formats.ts';
import { ImportError, importTranscript, rowCounts } from './import/index.ts';
import type { DaemonLink } from './daemon-link.ts';
import { CliError, n, UsageError, type Report } from './io.ts';
import type { VerbContext } from './program.ts';
import { ProgressBar, progressWanted } from './progress.ts';

/**
 * One `transcript.append` carries at most this many rows, and about this many bytes of JSON. The
 * daemon writes a batch in one transaction on its event loop, which every other session's
 * requests wait for: batches of a long Claude Code session held it 15-25 ms at this size, and
 * 65-120 ms at 1,000 rows and 8 MiB, for no faster an import (docs/transcript.md).
 */
export const BATCH_ROWS = 250;
export const BATCH_BYTES = 1024 * 1024;

type ImageIn = Extract<Extract<RowIn, { kind: 'user' }>['content'][number], { type: 'image' }>;
type StoredImage = { type: 'image'; hash: string; media_type: string };
const INLINE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/** Turns stored images into uploadable ones: inline base64 (fetched once per hash), or a hash reference. */
class ImageSource {
  private readonly cache = new Map<string, ImageIn>();
  inlined = 0;
  constructor(
    private readonly link: DaemonLink,
    private readonly refs: boolean,
  ) {}

  async part(p: StoredImage): Promise<ImageIn> {
    if (this.refs || !INLINE_TYPES.has(p.media_type)) return { type: 'image', hash: p.hash };
    let got = this.cache.get(p.hash);
    if (got === undefined) {
      const payload = await this.link.call('payload.get', { hash: p.hash });
      got = { type: 'image', media_type: payload.media_type as 'image/png', data: payload.data };
      this.cache.set(p.hash, got);
      this.inlined += 1;
    }
    return got;
  }
}

/** A stored row as `transcript.append` takes it; null for daemon-written notices, which clients cannot append. */
async function toRowIn(row: StoredRow, images: ImageSource): Promise<RowIn | null> {
  const b = row.body;
  // Rows appended without a key get one from their seq, so a re-import is idempotent too.
  const key = row.key ?? `seq:${row.seq}`;
  const content = async <P extends { type: string }>(parts: readonly P[]) => Promise.all(parts.map(async (p) => (p.type === 'image' ? images.part(p as unknown as StoredImage) : p)));
  switch (b.kind) {
    case 'notice':
      return null;
    case 'user':
      return RowIn.parse({ kind: 'user', origin: b.origin, key, content: await content(b.content) });
    case 'assistant':
      return RowIn.parse({ kind: 'assistant', key, provider: b.provider, model: b.model, content: b.content });
    case 'tool_result':
      return RowIn.parse({ kind: 'tool_result', key, call_id: b.call_id, is_error: b.is_error, content: await content(b.content) });
  }
}

/**
 * Our own JSONL: every non-blank line a row `transcript.append` accepts. Null when the text is
 * not that (another agent's format), judged by its first record before the rest is parsed: a
 * transcript of another agent is parsed once, by its importer (parsing all of it here as well
 * took a third of a large import's time, and its records all held at once). Past that, a bad
 * line is an error.
 */
function ownRows(text: string, forced: boolean): RowIn[] | null {
  const first = jsonlLines(text).next();
  if (!forced && (first.done === true || !RowIn.safeParse(parseOrNull(first.value.raw)).success)) return null;
  let recs: ReturnType<typeof parseJsonl>;
  try {
    recs = parseJsonl(text);
  } catch (err) {
    if (err instanceof ImportError) throw new CliError(err.message, undefined, 'nothing was stored; fix or remove that line');
    throw err;
  }
  const rows: RowIn[] = [];
  for (const { line, rec } of recs) {
    const r = RowIn.safeParse(rec);
    if (r.success) rows.push(r.data);
    else throw new CliError(`line ${line} is not a row transcript.append accepts: ${r.error.issues.map((x) => `${x.path.join('.')}: ${x.message}`).join('; ')}`, undefined, 'nothing was stored; fix or remove that line');
  }
  return rows.length === 0 ? null : rows;
}

function parseOrNull(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}

/** A session id from a file name: the characters ids allow, at most 200 of them. */
export function sessionFromPath(file: string): string {
  const base = path.basename(file).replace(/\.(jsonl|json|traj)$/i, '');
  const id = base.replace(/[^A-Za-z0-9._:@-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 200);
  return id === '' ? 'imported' : id;
}

/** The rows in appends of at most BATCH_ROWS rows and about BATCH_BYTES, each with its JSON size (UTF-16 units). */
export function batches(rows: readonly RowIn[]): Array<{ rows: RowIn[]; bytes: number }> {
  const out: Array<{ rows: RowIn[]; bytes: number }> = [];
  let batch: RowIn[] = [];
  let bytes = 0;
  for (const r of rows) {
    const size = JSON.stringify(r).length;
    if (batch.length > 0 && (batch.length >= BATCH_ROWS || bytes + size > BATCH_BYTES)) {
      out.push({ rows: batch, bytes });
      batch = [];
      bytes = 0;
    }
    batch.push(r);
    bytes += size;
  }
  if (batch.length > 0) out.push({ rows: batch, bytes });
  return out;
}

export interface ExportOptions {
  out?: string;
  imageRefs?: boolean;
}

/** `albedo export [session]`: the rows to stdout (summary on stderr), or to --out with the summary as the report. */
export async function exportSession(ctx: VerbContext, given: string | undefined, opts: ExportOptions): Promise<Report | number> {
  const session = ctx.session(given);
  const stored = await ctx.link.with('transcript.rows', (c) => allRows(c, session));
  const images = new ImageSource(ctx.link, opts.imageRefs === true);
  const lines: string[] = [];
  let notices = 0;
  for (const row of stored) {
    const r = await toRowIn(row, images);
    if (r === null) notices += 1;
    else lines.push(JSON.stringify(r));
  }
  const body = lines.length === 0 ? '' : `${lines.join('\n')}\n`;
  const summary = { session, rows: lines.length, skipped_notices: notices, images_inlined: images.inlined, out: opts.out ?? null };
  const text = `exported ${n(lines.length)} rows of ${session}${notices === 0 ? '' : ` (${n(notices)} daemon notices left out)`}${opts.out === undefined ? '' : ` to ${opts.out}`}`;
  if (opts.out !== undefined) {
    fs.writeFileSync(opts.out, body);
    return { json: summary, text };
  }
  // The rows are the output; the summary goes to stderr so a pipe gets only rows.
  ctx.io.stdout.write(body);
  if (!ctx.out.json) ctx.out.note(ctx.out.errStyle.dim(text));
  return 0;
}

export interface ImportOptions {
  format?: string;
  dryRun?: boolean;
}

/** `albedo import <file>`: parse and check the whole file, then append it in batches (a bar on a terminal for large files). */
export async function importFile(ctx: VerbContext, file: string, opts: ImportOptions): Promise<Report> {
  if (opts.format !== undefined && !(IMPORT_FORMATS as readonly string[]).includes(opts.format)) {
    throw new UsageError(`unknown format "${opts.format}"`, `known: ${IMPORT_FORMATS.join(', ')}`);
  }
  const forced = opts.format as AnyFormat | undefined;
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const fileBytes = Buffer.byteLength(text);
  const bar = progressWanted(ctx.io.stderr, ctx.io.env, { json: ctx.out.json, bytes: fileBytes }) ? new ProgressBar(ctx.io.stderr) : undefined;
  try {
    return await importText(ctx, file, text, fileBytes, forced, opts.dryRun === true, bar);
  } finally {
    bar?.end();
  }
}

/**
 * The one pairing rule the daemon would refuse a batch for, checked over the whole file first:
 * a tool call id may come back only once its earlier call has its result. Refused here, the
 * import stores nothing and names the rows, instead of failing halfway with the daemon's error.
 */
function checkCallIds(file: string, rows: readonly RowIn[]): void {
  const open = new Map<string, number>();
  const where = (i: number): string => `row ${i + 1}${rows[i]!.key === undefined ? '' : ` (key ${rows[i]!.key})`}`;
  rows.forEach((row, i) => {
    if (row.kind === 'tool_result') open.delete(row.call_id);
    if (row.kind !== 'assistant') return;
    for (const p of row.content) {
      if (p.type !== 'tool_call') continue;
      const earlier = open.get(p.id);
      if (earlier !== undefined) {
        throw new CliError(
          `${file}: tool call id "${p.id}" at ${where(i)} is used again while its call at ${where(earlier)} has no result yet`,
          undefined,
          'nothing was stored; a session can hold an id twice only after its first call was answered',
        );
      }
      open.set(p.id, i);
    }
  });
}

/** Rows from one file, parsed and checked, not stored yet. */
interface Parsed {
  rows: RowIn[];
  format: AnyFormat;
  skipped: Record<string, number>;
}

/** Parses and checks a whole file: albedo's own rows, or another agent's format (`forced` or detected). */
function parseText(file: string, text: string, forced: AnyFormat | undefined): Parsed {
  let parsed: Parsed;
  const own = forced === undefined || forced === OWN_FORMAT ? ownRows(text, forced === OWN_FORMAT) : null;
  if (own !== null) {
    parsed = { rows: own, format: OWN_FORMAT, skipped: {} };
  } else if (forced === OWN_FORMAT) {
    throw new CliError(`${file} holds no rows in albedo's export format`, undefined, 'leave out --format to detect the format');
  } else {
    try {
      const t = importTranscript(text, { path: file, format: forced });
      parsed = { rows: t.rows, format: t.format, skipped: t.skipped };
    } catch (err) {
      if (err instanceof ImportError) throw new CliError(`${file}: ${err.message}`, undefined, 'nothing was stored; --format forces a format');
      throw err;
    }
  }
  checkCallIds(file, parsed.rows);
  return parsed;
}

/**
 * Claude Code (2.x) keeps each Task subagent's conversation in its own file beside the session's:
 * `<session-id>/subagents/agent-<id>.jsonl`. They are found from the main file's path, in name order.
 */
function subagentFiles(file: string): string[] {
  const dir = path.join(path.dirname(file), path.basename(file).replace(/\.jsonl$/i, ''), 'subagents');
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return [];
    throw new UsageError(`cannot read ${dir}: ${(err as Error).message}`);
  }
  return names.filter((n) => /^agent-.+\.jsonl$/i.test(n)).sort().map((n) => path.join(dir, n));
}

/** A child session's id: the parent's, then the subagent file's name, within the id length. */
function childSession(parent: string, file: string): string {
  return `${parent}:${sessionFromPath(file)}`.slice(0, 200);
}

/** Appends parsed rows to a session (opened first, under `parent` when given); answers how many were new. */
async function storeRows(ctx: VerbContext, session: string, rows: readonly RowIn[], parent: string | undefined, bar: ProgressBar | undefined): Promise<number> {
  await ctx.link.call('session.open', { session, ...(parent === undefined ? {} : { parent }) });
  if (rows.length === 0) return 0;
  const before = (await ctx.link.call('session.list', {})).sessions.find((s) => s.session === session)?.rows ?? 0;
  const plan = batches(rows);
  const total = plan.reduce((sum, b) => sum + b.bytes, 0);
  let sent = 0;
  let stored = 0;
  bar?.update('storing', 0, total, `0/${n(rows.length)} rows`, true);
  for (const batch of plan) {
    await ctx.link.call('transcript.append', { session, rows: batch.rows });
    sent += batch.bytes;
    stored += batch.rows.length;
    bar?.update('storing', sent, total, `${n(stored)}/${n(rows.length)} rows`, stored === rows.length);
  }
  const after = (await ctx.link.call('session.list', {})).sessions.find((s) => s.session === session)?.rows ?? 0;
  return after - before;
}

async function importText(ctx: VerbContext, file: string, text: string, fileBytes: number, forced: AnyFormat | undefined, dryRun: boolean, bar: ProgressBar | undefined): Promise<Report> {
  // The whole file, and any subagent files beside it, are parsed and checked before anything is appended.
  bar?.update('checking', 0, fileBytes);
  const { rows, format, skipped } = parseText(file, text, forced);
  const session = ctx.session(ctx.maybeSession() ?? sessionFromPath(file));
  const children = (format === 'claude-code' ? subagentFiles(file) : []).map((sub) => {
    let subText: string;
    try {
      subText = fs.readFileSync(sub, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read ${sub}: ${(err as Error).message}`);
    }
    return { file: sub, session: childSession(session, sub), ...parseText(sub, subText, 'claude-code') };
  });
  bar?.update('checking', fileBytes, fileBytes, `${n(rows.length)} rows`, true);
  const counts = rowCounts(rows);
  let added = 0;
  const childAdded: number[] = [];
  if (!dryRun && (rows.length > 0 || children.length > 0)) {
    added = await storeRows(ctx, session, rows, undefined, bar);
    for (const c of children) childAdded.push(await storeRows(ctx, c.session, c.rows, session, undefined));
  }
  const subagents = children.map((c, i) => {
    const k = rowCounts(c.rows);
    const got = childAdded[i] ?? 0;
    return { session: c.session, file: c.file, ...k, added: got, already_stored: dryRun ? 0 : k.rows - got, skipped: c.skipped };
  });
  // How far the search index is behind once the rows are in: searches scan those rows until the
  // daemon has indexed them (docs/search.md).
  const behind = dryRun ? 0 : (await ctx.link.call('daemon.status', {})).search.rows_behind;
  const json = { session, format, dry_run: dryRun, ...counts, added, already_stored: dryRun ? 0 : counts.rows - added, skipped, subagents, search_rows_behind: behind };
  const skipList = (sk: Record<string, number>) => Object.entries(sk).map(([why, k]) => `${why} ×${k}`).join(', ');
  const lines = [
    `${dryRun ? 'checked' : 'imported'} ${file} (${format}) ${dryRun ? '' : `into ${ctx.out.style.bold(session)}`}`.trimEnd(),
    `  ${n(counts.rows)} rows: ${n(counts.user)} user, ${n(counts.assistant)} assistant, ${n(counts.tool_result)} tool results · ${n(counts.tool_calls)} tool calls · ${n(counts.images)} images`,
  ];
  if (!dryRun) lines.push(`  ${n(added)} new, ${n(counts.rows - added)} already stored`);
  if (Object.keys(skipped).length > 0) lines.push(`  skipped: ${skipList(skipped)}`);
  if (subagents.length > 0) {
    lines.push(`  ${n(subagents.length)} subagent${subagents.length === 1 ? '' : 's'} ${dryRun ? 'checked' : 'imported'} as child sessions of ${session}:`);
    for (const c of subagents) {
      const stored = dryRun ? '' : ` (${n(c.added)} new, ${n(c.already_stored)} already stored)`;
      lines.push(`    ${dryRun ? path.basename(c.file) : ctx.out.style.bold(c.session)}: ${n(c.rows)} rows${stored}${Object.keys(c.skipped).length > 0 ? ` · skipped: ${skipList(c.skipped)}` : ''}`);
    }
  }
  if (behind >= SEARCH_BEHIND_NOTED) lines.push(`  search: ${n(behind)} rows not in the search index yet; searches read them one by one until it catches up (\`albedo status\` shows how many are left)`);
  return { json, text: lines.join('\n') };
}

/** Rows behind the search index from which an import says so: fewer are indexed before anyone could search. */
const SEARCH_BEHIND_NOTED = 1000;
