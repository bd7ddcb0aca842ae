// Transcript writes: client rows (idempotent keys, tool-call bookkeeping, settling a late tool
// result beside its call, orphan results), daemon notices, forks and excursions, each batch in
// one transaction. Reads, snapshots and search live in conversation.ts, transcript-read.ts, search*.ts.
import { randomUUID } from 'node:crypto';
import { AlbedoError } from '../../protocol/errors.ts';
import { MAX_JSON_DEPTH, tooDeepPath } from '../../protocol/json-depth.ts';
import type { ImagePart, ImagePartIn, Notice, OpaquePart, RowClass, RowIn, StoredBody, TextPart } from '../../protocol/rows.ts';
import { commitOwed, type Db, durable, perDb } from '../db.ts';
import { followSettle } from '../state/lcm-tree.ts';
import { DEFAULT_MAX_IMAGE_BYTES, hasPayload, prepareImage, putPayload, type PreparedImage } from '../images/payloads.ts';
import { renderedGraphemesWithoutSeq } from './graphemes.ts';
import { bodyJson, bodySql, PACK_OFF_THREAD_CHARS, packBody, packBodyAsync, type PackedBody } from './row-body.ts';
import { rowText } from './row-text.ts';
import { createSession, findSession, requireSession } from './sessions.ts';

export interface AppendOptions {
  /** Largest image accepted, in decoded bytes; default DEFAULT_MAX_IMAGE_BYTES. */
  maxImageBytes?: number;
  /** Clock for `created_at`, milliseconds since the epoch. */
  now?: () => number;
  /**
   * Runs inside the append's transaction once the rows are written, with their seqs: what
   * records them (the proxy's chain links) commits with them, in the same fsync, or not at all.
   */
  withRows?: (result: AppendResult) => void;
}

/** A row's contents moved from one seq of its session to another (tool-result settling). */
export interface SeqMove {
  from: number;
  to: number;
}

export interface AppendResult {
  /** Where each input row's contents sit once the batch is stored, in input order. */
  seqs: number[];
  /** Newest seq of the session. */
  head: number;
  /**
   * Contents this batch moved, from the seq they had before the batch (or were first written
   * at) to the seq they end at. Absent when nothing moved.
   */
  moved?: SeqMove[];
}

export interface ForkOptions {
  /** Parent seq to copy up to (inclusive); default the parent's head. */
  at?: number;
  /** Id of the new session; default a fresh UUID. */
  branch?: string;
  /** Write an excursion marker in the parent that the branch later answers. */
  excursion?: boolean;
  now?: () => number;
}

export interface ForkResult {
  session: string;
  sid: number;
  /** Rows copied into the branch. */
  rows: number;
  /** Seq of the parent's excursion marker; null without `excursion`. */
  marker_seq: number | null;
}

type RowKind = StoredBody['kind'];

/** A transcript row exactly as stored, for moving it to another seq. */
interface RawRow {
  seq: number;
  kind: RowKind;
  row_class: RowClass;
  key: string | null;
  call_id: string | null;
  /** The body's JSON, or '' when `packed` holds it (storage/transcript/row-body.ts). */
  body: string;
  packed: Buffer | null;
  /** Kept text of a row whose text is not its body's derivation (migration 16); else null. */
  legacy_text: string | null;
  created_at: number;
  /** Rendered graphemes without the seq's digits (storage/transcript/graphemes.ts); null for old rows. */
  graphemes: number | null;
}

type InsertArgs = [number, RowKind, RowClass, string | null, string | null, string, Buffer | null, string | null, number, number | null];

function prepare(db: Db) {
  return {
    insert: db.prepare<InsertArgs>(
      `INSERT INTO transcript (sid, kind, row_class, key, call_id, body, packed, legacy_text, created_at, graphemes)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    insertAt: db.prepare<[number, ...InsertArgs]>(
      `INSERT INTO transcript (seq, sid, kind, row_class, key, call_id, body, packed, legacy_text, created_at, graphemes)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    byKey: db.prepare<[number, string], { seq: number; body: string }>(
      `SELECT seq, ${bodySql()} AS body FROM transcript WHERE sid = ? AND key = ?`,
    ),
    // One probe of the key index per key, for a whole batch in one statement (a JSON array of keys).
    storedKeys: db
      .prepare<[number, string], string>(
        'SELECT key FROM transcript WHERE sid = ? AND key IN (SELECT value FROM json_each(?))',
      )
      .pluck(),
    rowSid: db.prepare<[number], { sid: number }>('SELECT sid FROM transcript WHERE seq = ?'),
    head: db.prepare<[number], { head: number | null }>('SELECT max(seq) AS head FROM transcript WHERE sid = ?'),
    insertCall: db.prepare<[number, string, number, number | null]>(
      'INSERT INTO tool_calls (sid, call_id, seq, result_seq) VALUES (?, ?, ?, ?)',
    ),
    // A batch's call records in one statement: a JSON array of [call_id, seq, result_seq].
    insertCalls: db.prepare<[number, string]>(
      `INSERT INTO tool_calls (sid, call_id, seq, result_seq)
       SELECT ?, value->>0, value->>1, value->>2 FROM json_each(?)`,
    ),
    // The session's open calls among a JSON array of ids, in one statement.
    openCalls: db.prepare<[number, string], { call_id: string; seq: number }>(
      'SELECT call_id, seq FROM tool_calls WHERE sid = ? AND result_seq IS NULL AND call_id IN (SELECT value FROM json_each(?))',
    ),
    // Answers the session's open call with this id, if any, and names the call's row.
    answerOpen: db.prepare<[number, number, string], { seq: number }>(
      'UPDATE tool_calls SET result_seq = ? WHERE sid = ? AND call_id = ? AND result_seq IS NULL RETURNING seq',
    ),
    markOrphan: db.prepare<[string, Buffer | null, number]>('UPDATE transcript SET body = ?, packed = ?, call_id = NULL WHERE seq = ?'),
    orphans: db
      .prepare<[number], number>(
        "SELECT count(*) FROM transcript INDEXED BY transcript_orphans WHERE sid = ? AND kind = 'tool_result' AND call_id IS NULL",
      )
      .pluck(),
    insertRef: db.prepare<[string, number]>('INSERT INTO payload_refs (hash, seq) VALUES (?, ?)'),
    insertFork: db.prepare<[number, number]>('INSERT INTO fork_rows (seq, parent_seq) VALUES (?, ?)'),
    // Settling: the session's rows between a call and its fresh result, with the assistant
    // row each tool_result answers (null for an orphan).
    between: db.prepare<[number, number, number], { seq: number; kind: RowKind; call_seq: number | null }>(
      `SELECT t.seq, t.kind, tc.seq AS call_seq
         FROM transcript t LEFT JOIN tool_calls tc ON tc.result_seq = t.seq
        WHERE t.sid = ? AND t.seq > ? AND t.seq < ? ORDER BY t.seq`,
    ),
    rowsFrom: db.prepare<[number, number], RawRow>(
      `SELECT seq, kind, row_class, key, call_id, body, packed, legacy_text, created_at, graphemes
         FROM transcript WHERE sid = ? AND seq >= ? ORDER BY seq`,
    ),
    // Call records whose call row or result row is at or after a seq of the session.
    callsFrom: db.prepare<[number, number, number, number], { call_id: string; seq: number; result_seq: number | null }>(
      `SELECT tc.call_id, tc.seq, tc.result_seq FROM transcript t JOIN tool_calls tc ON tc.seq = t.seq
        WHERE t.sid = ? AND t.seq >= ?
       UNION
       SELECT tc.call_id, tc.seq, tc.result_seq FROM transcript t JOIN tool_calls tc ON tc.result_seq = t.seq
        WHERE t.sid = ? AND t.seq >= ?`,
    ),
    refsFrom: db.prepare<[number, number], { hash: string; seq: number }>(
      `SELECT r.hash, r.seq FROM transcript t JOIN payload_refs r ON r.seq = t.seq
        WHERE t.sid = ? AND t.seq >= ?`,
    ),
    forksFrom: db.prepare<[number, number], { seq: number; parent_seq: number }>(
      `SELECT f.seq, f.parent_seq FROM transcript t JOIN fork_rows f ON f.seq = t.seq
        WHERE t.sid = ? AND t.seq >= ?`,
    ),
    deleteFrom: db.prepare<[number, number]>('DELETE FROM transcript WHERE sid = ? AND seq >= ?'),
    children: db.prepare<[number], { sid: number; excursion_marker: number | null; returned_seq: number | null }>(
      'SELECT sid, excursion_marker, returned_seq FROM sessions WHERE parent_sid = ?',
    ),
    setChildLinks: db.prepare<[number | null, number | null, number]>(
      'UPDATE sessions SET excursion_marker = ?, returned_seq = ? WHERE sid = ?',
    ),
    childForks: db.prepare<[number, number], { seq: number; parent_seq: number }>(
      `SELECT f.seq, f.parent_seq FROM transcript t JOIN fork_rows f ON f.seq = t.seq
        WHERE t.sid = ? AND f.parent_seq >= ?`,
    ),
    setForkParent: db.prepare<[number, number]>('UPDATE fork_rows SET parent_seq = ? WHERE seq = ?'),
    // Caches of positions derived from this session's rows (a verified cut) key on this counter.
    bumpRewrites: db.prepare<[number]>('UPDATE sessions SET rewrites = rewrites + 1 WHERE sid = ?'),
    // Forks: rows are copied in seq order, so the n-th copy answers the n-th parent row.
    copyRows: db.prepare<[number, number, number]>(
      `INSERT INTO transcript (sid, kind, row_class, key, call_id, body, packed, legacy_text, created_at, graphemes)
       SELECT ?, kind, row_class, key, call_id, body, packed, legacy_text, created_at, graphemes
         FROM transcript WHERE sid = ? AND seq <= ? ORDER BY seq`,
    ),
    copyForkRows: db.prepare<[number, number, number]>(
      `INSERT INTO fork_rows (seq, parent_seq)
       WITH p AS (SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM transcript WHERE sid = ? AND seq <= ?),
            c AS (SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM transcript WHERE sid = ?)
       SELECT c.seq, p.seq FROM c JOIN p ON p.n = c.n`,
    ),
    // Each copied call row gets its record, answered by the copy of its result when the
    // result was copied too and open otherwise.
    copyCalls: db.prepare<[number, number]>(
      `INSERT INTO tool_calls (sid, call_id, seq, result_seq)
       WITH m AS (SELECT f.parent_seq AS p, f.seq AS c FROM transcript t JOIN fork_rows f ON f.seq = t.seq WHERE t.sid = ?)
       SELECT ?, tc.call_id, m.c, r.c FROM m JOIN tool_calls tc ON tc.seq = m.p LEFT JOIN m r ON r.p = tc.result_seq`,
    ),
    copyRefs: db.prepare<[number]>(
      `INSERT INTO payload_refs (hash, seq)
       SELECT r.hash, f.seq FROM transcript t JOIN fork_rows f ON f.seq = t.seq
         JOIN payload_refs r ON r.seq = f.parent_seq WHERE t.sid = ?`,
    ),
    forkMap: db.prepare<[number], { parent_seq: number; seq: number }>(
      'SELECT f.parent_seq, f.seq FROM transcript t JOIN fork_rows f ON f.seq = t.seq WHERE t.sid = ?',
    ),
    setReturned: db.prepare<[number, number]>('UPDATE sessions SET returned_seq = ? WHERE sid = ?'),
  };
}

const stmts = perDb(prepare);
type Statements = ReturnType<typeof prepare>;

/**
 * Inserts a new row at the end. `stored` is the body's JSON as its columns (packBody); the
 * grapheme count is derived from the parsed `body` here, so every new row gets it the same way.
 * Its text is not stored: readers derive it from the body (storage/transcript/row-text.ts).
 */
function insertRow(
  st: Statements,
  sid: number,
  r: Omit<RawRow, 'seq' | 'body' | 'packed' | 'legacy_text' | 'graphemes'>,
  stored: PackedBody,
  body: StoredBody,
): number {
  const graphemes = renderedGraphemesWithoutSeq(body, rowText(body));
  return Number(st.insert.run(sid, r.kind, r.row_class, r.key, r.call_id, stored.body, stored.packed, null, r.created_at, graphemes).lastInsertRowid);
}

function headOf(st: Statements, sid: number): number {
  return st.head.get(sid)?.head ?? 0;
}

// ---------------------------------------------------------------------------------------------
// Building stored bodies

/**
 * Stored body of a client row. Parts are rebuilt field by field so that the JSON is the same
 * for the same content however the client ordered its keys: key retries compare this JSON.
 */
function storedBody(row: RowIn, images: Map<ImagePartIn, PreparedImage>): StoredBody {
  const opaque = (p: OpaquePart): OpaquePart => ({ type: 'opaque', wire: p.wire, label: p.label, data: p.data });
  const media = (p: TextPart | ImagePartIn): TextPart | ImagePart => {
    if (p.type === 'text') return { type: 'text', text: p.text };
    const img = images.get(p);
    if (img === undefined) throw new Error('image part was not prepared');
    return img.part;
  };
  switch (row.kind) {
    case 'user':
      return { kind: 'user', origin: row.origin, content: row.content.map((p) => (p.type === 'opaque' ? opaque(p) : media(p))) };
    case 'tool_result':
      return { kind: 'tool_result', call_id: row.call_id, is_error: row.is_error, content: row.content.map(media) };
    case 'assistant':
      return {
        kind: 'assistant',
        provider: row.provider,
        model: row.model,
        content: row.content.map((p) => {
          if (p.type === 'text') return { type: 'text', text: p.text };
          if (p.type === 'tool_call') return { type: 'tool_call', id: p.id, name: p.name, arguments: p.arguments };
          if (p.type === 'opaque') return opaque(p);
          return { type: 'reasoning', provider: p.provider, text: p.text, encrypted: p.encrypted };
        }),
      };
  }
}

function rowClassOf(body: StoredBody): RowClass {
  if (body.kind === 'user') return 'user';
  if (body.kind === 'notice' && body.body.notice === 'image_fit') return 'image_fit';
  return 'other';
}

/**
 * Whether a stored body holds the same content as a new one. Compaction may mark a stored
 * image `elided` after the fact, and a result stored as an orphan carries `orphan: true`
 * (which a retry, built from the client's row alone, does not): neither mark makes a retry a
 * different row.
 */
function sameBody(stored: string, fresh: string): boolean {
  if (stored === fresh) return true;
  if (!stored.includes('"elided"') && !stored.includes('"orphan"')) return false;
  const parsed = JSON.parse(stored) as Record<string, unknown>;
  if (parsed.kind === 'tool_result') delete parsed.orphan;
  // A stored body nested past the depth bound (written before it) is never a fresh row's.
  if (tooDeepPath(parsed, MAX_JSON_DEPTH + 4) !== null) return false;
  const unmarked = JSON.stringify(parsed, (_k, v: unknown) => {
    if (typeof v === 'object' && v !== null && (v as { type?: unknown }).type === 'image' && 'elided' in v) {
      const { elided: _elided, ...rest } = v as Record<string, unknown>;
      return rest;
    }
    return v;
  });
  return unmarked === fresh;
}

/** Resolves every image of a batch, each distinct upload once; the first failure in input order wins. */
async function prepareImages(db: Db, rows: readonly RowIn[], maxBytes: number): Promise<Map<ImagePartIn, PreparedImage>> {
  const parts: ImagePartIn[] = [];
  for (const row of rows) {
    if (row.kind === 'assistant') continue;
    for (const p of row.content) if (p.type === 'image') parts.push(p);
  }
  const out = new Map<ImagePartIn, PreparedImage>();
  if (parts.length === 0) return out;
  const byContent = new Map<string, Promise<PreparedImage>>();
  const pending = parts.map((p) => {
    const id = 'hash' in p ? p.hash : `${p.media_type};${p.data}`;
    let job = byContent.get(id);
    if (job === undefined) byContent.set(id, job = prepareImage(p, { maxBytes }, db));
    return job;
  });
  const settled = await Promise.allSettled(pending);
  settled.forEach((s, i) => {
    if (s.status === 'rejected') throw s.reason;
    out.set(parts[i]!, s.value);
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Appending

/**
 * Appends client rows to a session. Images are checked first (asynchronously, before anything
 * is written); then the whole batch is written in one transaction, so a failing row leaves
 * nothing of the batch behind. A row whose key the session already holds is not stored again:
 * with the same content it answers with the stored seq, with other content it fails the batch.
 * A tool result answers the session's open call with its id and is settled beside it (see
 * `settle` and docs/transcript.md); with no open call it is stored as an orphan. Resolves once
 * the batch is on disk: its commit leaves the fsync owed, and it is paid off the event loop,
 * shared with whatever else is owed meanwhile (storage/db.ts commitOwed), so that an append on
 * a busy disk does not hold every other session's requests.
 */
export async function appendRows(
  db: Db,
  session: string,
  rows: readonly RowIn[],
  opts: AppendOptions = {},
): Promise<AppendResult> {
  requireSession(db, session);
  const images = await prepareImages(db, rows, opts.maxImageBytes ?? DEFAULT_MAX_IMAGE_BYTES);
  const long = await packLongBodies(rows, images);
  const now = (opts.now ?? Date.now)();
  const result = commitOwed(db, () => {
    const result = writeBatch(db, session, rows, long, images, now);
    opts.withRows?.(result);
    return result;
  });
  await durable(db);
  return result;
}

/** A batch row's stored body: as an object, as JSON, and as its columns. */
interface BatchBody {
  body: StoredBody;
  json: string;
  stored: PackedBody;
}

/**
 * The bodies of the batch's rows whose text alone reaches PACK_OFF_THREAD_CHARS, built and packed
 * before the transaction with the compression off the event loop (packBodyAsync), by row index.
 * Every other body is built, and packed when long enough, inside the transaction as the row is
 * written: building them all ahead kept a whole batch of bodies alive across the await, and the
 * daemon's garbage collection cost much more a row. A row whose length is in its tool-call
 * arguments is not seen here and is compressed on the loop, however long it is.
 */
async function packLongBodies(rows: readonly RowIn[], images: Map<ImagePartIn, PreparedImage>): Promise<Map<number, BatchBody>> {
  const out = new Map<number, BatchBody>();
  const jobs: Array<Promise<void>> = [];
  rows.forEach((row, index) => {
    let chars = 0;
    for (const p of row.content) if ((p.type === 'text' || p.type === 'reasoning') && p.text !== undefined) chars += p.text.length;
    if (chars < PACK_OFF_THREAD_CHARS) return;
    const body = storedBody(row, images);
    const json = JSON.stringify(body);
    jobs.push(packBodyAsync(json).then((stored) => void out.set(index, { body, json, stored })));
  });
  await Promise.all(jobs);
  return out;
}

/** Orphan tool results of a session: results stored while no call with their id was open. */
export function orphanResults(db: Db, sid: number): number {
  return stmts(db).orphans.get(sid) ?? 0;
}

/** What one batch row needs besides its own fields. */
interface BatchContext {
  db: Db;
  st: Statements;
  sid: number;
  session: string;
  images: Map<ImagePartIn, PreparedImage>;
  now: number;
  calls: CallBook;
}

/**
 * The tool_calls bookkeeping of one batch. The calls the batch makes are kept here and written
 * in one statement (already answered when their result came in the same batch) instead of an
 * INSERT per call and an UPDATE per result. The session's open calls from before the batch,
 * for the ids the batch names, are read in one statement at the start; a result answering one
 * of them updates its record at once. A call whose id has an open call, stored or kept here,
 * is refused, as the index of open calls (tool_calls_open) would refuse its record.
 *
 * Settling reads and rewrites call records, so `flush` writes the kept records before each
 * settle (the calls still open among them join the stored ones), and `follow` moves the
 * stored calls' rows with a settle's moves.
 */
class CallBook {
  /** Open calls whose records are written: id -> the call's row. */
  private readonly stored = new Map<string, number>();
  /** Records not written yet: [call_id, seq, result_seq]. */
  private pending: Array<[string, number, number | null]> = [];
  /** Unanswered calls among `pending`: id -> its record. */
  private readonly open = new Map<string, [string, number, number | null]>();

  constructor(
    private readonly st: Statements,
    private readonly sid: number,
    rows: readonly RowIn[],
  ) {
    const ids = new Set<string>();
    for (const r of rows) {
      if (r.kind === 'tool_result') ids.add(r.call_id);
      else if (r.kind === 'assistant') { for (const p of r.content) if (p.type === 'tool_call') ids.add(p.id); }
    }
    if (ids.size === 0) return;
    for (const c of st.openCalls.all(sid, JSON.stringify([...ids]))) this.stored.set(c.call_id, c.seq);
  }

  /**
   * Records a call made by row `seq`; returns the row of the session's open call with the
   * same id when there is one (the call is then refused), else undefined.
   */
  call(id: string, seq: number): number | undefined {
    const open = this.open.get(id)?.[1] ?? this.stored.get(id);
    if (open !== undefined) return open;
    const rec: [string, number, number | null] = [id, seq, null];
    this.pending.push(rec);
    this.open.set(id, rec);
    return undefined;
  }

  /** Answers the session's open call with this id by row `seq`: the call's row, or undefined when none is open. */
  answer(id: string, seq: number): number | undefined {
    const rec = this.open.get(id);
    if (rec !== undefined) {
      rec[2] = seq;
      this.open.delete(id);
      return rec[1];
    }
    if (!this.stored.delete(id)) return undefined;
    return this.st.answerOpen.get(seq, this.sid, id)?.seq;
  }

  /** Writes the kept records. */
  flush(): void {
    if (this.pending.length === 0) return;
    this.st.insertCalls.run(this.sid, JSON.stringify(this.pending));
    for (const [id, rec] of this.open) this.stored.set(id, rec[1]);
    this.pending = [];
    this.open.clear();
  }

  /** After a settle (which runs after `flush`): stored calls' rows that moved, where they went. */
  follow(dest: ReadonlyMap<number, number>): void {
    for (const [id, seq] of this.stored) {
      const to = dest.get(seq);
      if (to !== undefined) this.stored.set(id, to);
    }
  }
}

/**
 * Writing a batch, and how its seqs and moves compose.
 *
 * Rows are taken in input order. A row whose key the session holds writes nothing and answers
 * the seq its contents sit at now (the key lookup reads the table, so a row this batch already
 * moved is found where it went). Any other row is inserted at a fresh seq at the end of the
 * counter. When that row is a tool result answering an open call, settling may then move
 * contents along the session's seqs: rows stored before the batch, rows of this batch, and the
 * result itself (from its fresh seq to the slot). Settle reports one map, `dest`, from the seq
 * each moved row had just before to the seq it has after.
 *
 * Two things follow every settle, so that many results in one batch compose:
 * - `seqs[i]` is where input row i's contents are now. Earlier entries are passed through
 *   `dest`; the result's own entry is `dest(fresh)`.
 * - `origin` maps each current seq whose contents moved during the batch to where they were
 *   before it (or were first written, for this batch's rows). For a move s → dest(s) the
 *   origin of dest(s) becomes the origin of s if s had already moved, else s; entries the
 *   settle did not touch stay as they are.
 * At the end, `moved` lists origin → current for every entry whose two ends differ (contents
 * that moved and came back did not move), ordered by origin.
 */
function writeBatch(
  db: Db,
  session: string,
  rows: readonly RowIn[],
  long: ReadonlyMap<number, BatchBody>,
  images: Map<ImagePartIn, PreparedImage>,
  now: number,
): AppendResult {
  const st = stmts(db);
  const sid = requireSession(db, session).sid;
  const cx: BatchContext = { db, st, sid, session, images, now, calls: new CallBook(st, sid, rows) };
  const seqs: number[] = [];
  let origin: Map<number, number> | undefined;
  // Keys to look up one by one: those stored before the batch (one statement finds them all)
  // and those this batch writes. Any other key is new, and its row is simply inserted.
  const keys = rows.flatMap((r) => (r.key === undefined ? [] : [r.key]));
  const lookUp = new Set(keys.length === 0 ? [] : st.storedKeys.all(cx.sid, JSON.stringify(keys)));
  // The call row that the session's rows end with, when every row after it is a result
  // answering one of its calls: a result for that row is then in its slot already, and
  // settle would find nothing to move. Unknown (undefined) at the start of a batch and after
  // anything else is written.
  let tailCall: number | undefined;

  rows.forEach((row, index) => {
    const pre = long.get(index);
    const body = pre?.body ?? storedBody(row, images);
    const json = pre?.json ?? JSON.stringify(body);
    const key = row.key ?? null;
    if (key !== null) {
      if (lookUp.has(key)) {
        const hit = storedUnderKey(cx, key, json, index);
        if (hit !== undefined) {
          seqs.push(hit);
          return;
        }
      }
      lookUp.add(key);
    }

    const { seq, callSeq } = writeRow(cx, row, body, pre?.stored ?? packBody(json), key, index);
    const inSlot = callSeq !== undefined && callSeq === tailCall;
    tailCall = body.kind === 'assistant' ? seq : inSlot ? tailCall : undefined;
    if (callSeq !== undefined && !inSlot) cx.calls.flush();
    const dest = callSeq === undefined || inSlot ? undefined : settle(st, cx.sid, seq, callSeq);
    if (dest === undefined) {
      seqs.push(seq);
      return;
    }
    // Derived tables that name source seqs follow the moved contents in this transaction.
    followSettle(db, cx.sid, callSeq!, dest.get(seq)!, dest);
    cx.calls.follow(dest);
    for (let i = 0; i < seqs.length; i++) seqs[i] = dest.get(seqs[i]!) ?? seqs[i]!;
    seqs.push(dest.get(seq)!);
    const next = new Map<number, number>();
    for (const [from, to] of dest) next.set(to, origin?.get(from) ?? from);
    for (const [cur, first] of origin ?? []) if (!dest.has(cur)) next.set(cur, first);
    origin = next;
  });

  cx.calls.flush();
  const result: AppendResult = { seqs, head: headOf(st, cx.sid) };
  const moved = [...(origin ?? [])].filter(([to, from]) => to !== from).map(([to, from]) => ({ from, to }));
  if (moved.length > 0) result.moved = moved.sort((a, b) => a.from - b.from);
  return result;
}

/** The seq of the row stored under `key`, when its content is the same; a key_conflict when not. */
function storedUnderKey(cx: BatchContext, key: string, json: string, index: number): number | undefined {
  const hit = cx.st.byKey.get(cx.sid, key);
  if (hit === undefined) return undefined;
  if (!sameBody(hit.body, json)) {
    const msg = `key "${key}" is already stored in session "${cx.session}" with other content`;
    throw new AlbedoError('key_conflict', msg, {
      session: cx.session,
      key,
      seq: hit.seq,
      index,
    });
  }
  return hit.seq;
}

/**
 * Inserts one new client row at the end with its bookkeeping: an assistant row records its
 * calls (each id must have no open call: `duplicate_tool_call`); a tool result with an open
 * call of its id answers it (the call's record names the result's seq; `callSeq` is the
 * call's row, for settling); a tool result without one is stored as an orphan, its body marked
 * and its call_id column NULL, linked to nothing. Image rows record their payload references.
 *
 * The call records go through the batch's CallBook. A result is written as answering; an
 * orphan, rare, then gets its mark and loses its call_id column in a second statement.
 */
function writeRow(
  cx: BatchContext,
  row: RowIn,
  body: StoredBody,
  stored: PackedBody,
  key: string | null,
  index: number,
): { seq: number; callSeq: number | undefined } {
  const { db, st, sid, session } = cx;
  const seq = insertRow(
    st,
    sid,
    {
      kind: body.kind,
      row_class: rowClassOf(body),
      key,
      call_id: body.kind === 'tool_result' ? body.call_id : null,
      created_at: cx.now,
    },
    stored,
    body,
  );

  if (body.kind === 'assistant') {
    for (const p of body.content) {
      if (p.type !== 'tool_call') continue;
      const open = cx.calls.call(p.id, seq);
      if (open !== undefined) {
        const msg = `tool call id "${p.id}" is already used in session "${session}" by a call with no result yet (seq ${open})`;
        throw new AlbedoError('duplicate_tool_call', msg, {
          session,
          call_id: p.id,
          seq: open,
          index,
        });
      }
    }
  } else if (row.kind !== 'assistant') {
    for (const q of row.content) {
      if (q.type !== 'image') continue;
      const { part: p, bytes } = cx.images.get(q)!;
      if (bytes !== null) putPayload(db, p.hash, p.media_type, p.width, p.height, bytes);
      else if (!hasPayload(db, p.hash)) {
        // Stored when the images were checked, collected since: the client must upload it again.
        throw new AlbedoError('unknown_payload', `unknown payload ${p.hash}`, { hash: p.hash, index });
      }
      st.insertRef.run(p.hash, seq);
    }
  }

  if (body.kind !== 'tool_result') return { seq, callSeq: undefined };
  const callSeq = cx.calls.answer(body.call_id, seq);
  if (callSeq === undefined) {
    const stored = packBody(JSON.stringify({ ...body, orphan: true }));
    st.markOrphan.run(stored.body, stored.packed, seq);
  }
  return { seq, callSeq };
}

/**
 * Settling a tool result beside its call.
 *
 * The result of a call made by assistant row A belongs in the "slot" right after A and after
 * the results of A's other calls that already follow it. The result row was just inserted with
 * a fresh seq F at the end of the session. Walk the session's rows between A and F: skip the
 * leading tool_result rows that answer A's calls (known by their call records' links, since an
 * id may name several calls); the rest, P0 < P1 < ... < Pk, are what the session recorded
 * after the slot. If there are none, the result is already in place.
 * Otherwise the contents rotate one position along the session's own seqs: the result's
 * contents go to P0, P0's to P1, ..., Pk's to F. Seqs are never allocated anywhere but the end
 * (F was), and every seq keeps exactly one row.
 *
 * The rotation deletes the rows from P0 on and re-inserts each at its new seq with the same
 * body, kept text, key and created_at; tool_calls, payload_refs and fork_rows entries follow their
 * contents. A call record follows both of its rows, the call's and the answering result's (so
 * the record the fresh result just answered is rewritten too); the rows' deletion cascades to
 * every such record and each is re-inserted with both seqs mapped. Child sessions' links into
 * this session (excursion marker, return notice, fork origins) are remapped, and so is the
 * marker seq inside a moved excursion_return notice.
 * Returns the mapping old seq -> new seq, or undefined when nothing moved.
 */
function settle(st: Statements, sid: number, fresh: number, callSeq: number): Map<number, number> | undefined {
  const positions: number[] = [];
  for (const r of st.between.all(sid, callSeq, fresh)) {
    if (positions.length === 0 && r.kind === 'tool_result' && r.call_seq === callSeq) continue;
    positions.push(r.seq);
  }
  const first = positions[0];
  if (first === undefined) return undefined;
  positions.push(fresh);
  const dest = new Map<number, number>([[fresh, first]]);
  for (let i = 0; i + 1 < positions.length; i++) dest.set(positions[i]!, positions[i + 1]!);
  const to = (seq: number): number => dest.get(seq) ?? seq;

  const rows = st.rowsFrom.all(sid, first);
  const calls = st.callsFrom.all(sid, first, sid, first);
  const refs = st.refsFrom.all(sid, first);
  const forks = st.forksFrom.all(sid, first);
  st.deleteFrom.run(sid, first);
  st.bumpRewrites.run(sid);
  for (const r of rows) {
    // Rows move with their stored columns as they are, packed or not; only a return notice's
    // marker seq inside the JSON is rewritten.
    let stored: PackedBody = { body: r.body, packed: r.packed };
    if (r.kind === 'notice') {
      const json = bodyJson(r.seq, r.body, r.packed);
      if (json.includes('"excursion_return"')) {
        const parsed = JSON.parse(json) as { body: { notice: string; marker_seq?: number } };
        if (parsed.body.notice === 'excursion_return' && parsed.body.marker_seq !== undefined) {
          parsed.body.marker_seq = to(parsed.body.marker_seq);
          stored = packBody(JSON.stringify(parsed));
        }
      }
    }
    st.insertAt.run(to(r.seq), sid, r.kind, r.row_class, r.key, r.call_id, stored.body, stored.packed, r.legacy_text, r.created_at, r.graphemes);
  }
  for (const c of calls) st.insertCall.run(sid, c.call_id, to(c.seq), c.result_seq === null ? null : to(c.result_seq));
  for (const r of refs) st.insertRef.run(r.hash, to(r.seq));
  for (const f of forks) st.insertFork.run(to(f.seq), f.parent_seq);

  for (const child of st.children.all(sid)) {
    const marker = child.excursion_marker === null ? null : to(child.excursion_marker);
    const returned = child.returned_seq === null ? null : to(child.returned_seq);
    if (marker !== child.excursion_marker || returned !== child.returned_seq) {
      st.setChildLinks.run(marker, returned, child.sid);
    }
    for (const f of st.childForks.all(child.sid, first)) {
      if (dest.has(f.parent_seq)) st.setForkParent.run(to(f.parent_seq), f.seq);
    }
  }
  return dest;
}

/**
 * Appends a daemon-written notice. With a key the notice is idempotent like a client row: the
 * same notice answers with its stored seq, another one under that key is a key_conflict.
 * An image_fit notice names its replacement payload, which must already be stored.
 */
export function appendNotice(db: Db, sid: number, notice: Notice, opts: { key?: string; now?: () => number } = {}): number {
  const st = stmts(db);
  return db.transaction(() => {
    const body: StoredBody = { kind: 'notice', body: notice };
    const json = JSON.stringify(body);
    const key = opts.key ?? null;
    if (key !== null) {
      const hit = st.byKey.get(sid, key);
      if (hit !== undefined) {
        if (hit.body === json) return hit.seq;
        throw new AlbedoError('key_conflict', `key "${key}" is already stored with another notice`, { key, seq: hit.seq });
      }
    }
    const seq = insertRow(
      st,
      sid,
      {
        kind: 'notice',
        row_class: rowClassOf(body),
        key,
        call_id: null,
        created_at: (opts.now ?? Date.now)(),
      },
      packBody(json),
      body,
    );
    if (notice.notice === 'image_fit') {
      if (!hasPayload(db, notice.to.hash)) {
        throw new AlbedoError('unknown_payload', `unknown payload ${notice.to.hash}`, { hash: notice.to.hash });
      }
      st.insertRef.run(notice.to.hash, seq);
    }
    return seq;
  })();
}

// ---------------------------------------------------------------------------------------------
// Forks and excursions

/**
 * Forks a session: a new session holding copies (new seqs, same contents and keys) of the
 * parent's rows up to `at`, with fork_rows recording where each copy came from. With
 * `excursion` the parent first gets an excursion marker, which the copy does not include.
 */
export function forkSession(db: Db, parent: string, opts: ForkOptions = {}): ForkResult {
  const st = stmts(db);
  return db.transaction(() => {
    const p = requireSession(db, parent);
    const name = opts.branch ?? randomUUID();
    if (findSession(db, name) !== undefined) {
      throw new AlbedoError('session_exists', `session "${name}" already exists`, { session: name });
    }
    let at = headOf(st, p.sid);
    if (opts.at !== undefined) {
      const owner = st.rowSid.get(opts.at);
      if (owner === undefined) throw new AlbedoError('unknown_row', `no row with seq ${opts.at}`, { seq: opts.at });
      if (owner.sid !== p.sid) {
        throw new AlbedoError('row_session_mismatch', `seq ${opts.at} is not a row of session "${parent}"`, {
          session: parent,
          seq: opts.at,
        });
      }
      at = opts.at;
    }
    const now = (opts.now ?? Date.now)();
    const marker = opts.excursion
      ? appendNotice(db, p.sid, { notice: 'excursion', branch: name }, { key: `excursion:${name}`, now: () => now })
      : null;
    const sid = createSession(db, {
      name,
      workspace: p.workspace,
      created_at: now,
      parent_sid: p.sid,
      fork_seq: at,
      excursion_marker: marker,
    });
    if (sid === undefined) throw new AlbedoError('session_exists', `session "${name}" already exists`, { session: name });
    const rows = st.copyRows.run(sid, p.sid, at).changes;
    if (rows > 0) {
      st.copyForkRows.run(p.sid, at, sid);
      st.copyCalls.run(sid, sid);
      st.copyRefs.run(sid);
    }
    return { session: name, sid, rows, marker_seq: marker };
  })();
}

/** For a forked session: parent seq -> the seq of its copy in the branch. */
export function forkMap(db: Db, sid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const r of stmts(db).forkMap.all(sid)) out.set(r.parent_seq, r.seq);
  return out;
}

/**
 * Ends an excursion: appends to the parent an excursion_return notice linked to the marker,
 * once. The marker is found by its key, since settling may have moved its contents.
 */
export function returnFromExcursion(
  db: Db,
  branch: string,
  outcome: string,
  opts: { now?: () => number } = {},
): { session: string; seq: number } {
  const st = stmts(db);
  return db.transaction(() => {
    const b = requireSession(db, branch);
    if (b.excursion_marker === null) {
      throw new AlbedoError('not_an_excursion', `session "${branch}" is not an excursion`, { session: branch });
    }
    if (b.returned_seq !== null) {
      throw new AlbedoError('excursion_returned', `excursion "${branch}" already returned (seq ${b.returned_seq})`, {
        session: branch,
        seq: b.returned_seq,
      });
    }
    if (b.parent_sid === null || b.parent === null) {
      throw new AlbedoError('unknown_session', `the parent session of excursion "${branch}" no longer exists`, {
        session: branch,
      });
    }
    const marker = st.byKey.get(b.parent_sid, `excursion:${branch}`)?.seq ?? b.excursion_marker;
    const seq = appendNotice(
      db,
      b.parent_sid,
      { notice: 'excursion_return', branch, marker_seq: marker, outcome },
      { key: `excursion-return:${branch}`, ...(opts.now ? { now: opts.now } : {}) },
    );
    st.setReturned.run(seq, b.sid);
    return { session: b.parent, seq };
  })();
}
