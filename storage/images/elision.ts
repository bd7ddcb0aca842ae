// Image elision: after a compaction, tool-output images the new request no longer carries lose
// their payloads. The rows keep their text and gain the elided mark (their rendered text then
// says the image is gone); a payload goes once no row, pin or cached frame names it. Which
// seqs a compaction left behind is the engine's call (strategies/prepare.ts schedules it in
// the commit's transaction); when batches run is the daemon's (daemon/image-elision.ts).
// Each batch is one transaction — marks, reference deletes, payload deletes and counters —
// so a crash leaves either a batch done or not started, and the job itself stays here.
import { z } from 'zod';
import { StoredBody } from '../../protocol/rows.ts';
import { commitOwed, type Db, perDb } from '../db.ts';
import { releasePayloads } from './payloads.ts';
import { renderedGraphemesWithoutSeq } from '../transcript/graphemes.ts';
import { bodySql, packBody } from '../transcript/row-body.ts';
import { parseRowJson, rowText } from '../transcript/row-text.ts';
import { OPENS_UNIT } from '../transcript/user-rows.ts';

/** What one session's elision did so far, for /context. */
export interface ElisionStats {
  imagesElided: number;
  payloadsDeleted: number;
  bytesFreed: number;
  /** A job is waiting (scheduled, or cut short by a crash). */
  pending: boolean;
}

/** What one batch did. */
export interface ElisionBatch {
  rows: number;
  images: number;
  payloadsDeleted: number;
  bytesFreed: number;
  /** The job is finished (nothing pending for the session any more). */
  done: boolean;
}

function prepare(db: Db) {
  return {
    schedule: db.prepare<[number, number]>(
      `INSERT INTO image_elision (sid, pending_below) VALUES (?, ?)
       ON CONFLICT (sid) DO UPDATE SET pending_below = max(coalesce(pending_below, 0), excluded.pending_below)
        WHERE excluded.pending_below > image_elision.done_below`,
    ),
    job: db.prepare<[number], { pending_below: number | null; done_below: number }>(
      'SELECT pending_below, done_below FROM image_elision WHERE sid = ?',
    ),
    pendingSessions: db.prepare<[], { sid: number; name: string }>(
      `SELECT e.sid, s.name FROM image_elision e INDEXED BY image_elision_pending JOIN sessions s ON s.sid = e.sid
        WHERE e.pending_below IS NOT NULL ORDER BY e.sid`,
    ),
    stats: db.prepare<[number], { images_elided: number; payloads_deleted: number; bytes_freed: number; pending_below: number | null }>(
      'SELECT images_elided, payloads_deleted, bytes_freed, pending_below FROM image_elision WHERE sid = ?',
    ),
    // The next rows to look at: tool results of the session with a payload reference, from the
    // reference index's seq range (references of other sessions' rows in it are joined away).
    // CROSS JOIN keeps the references the outer loop: left to itself the planner walked the
    // session's rows of the range instead, all of them in one batch even when none has an image.
    nextRows: db.prepare<[number, number, number, number], number>(
      `SELECT DISTINCT r.seq FROM payload_refs r INDEXED BY payload_refs_seq CROSS JOIN transcript t ON t.seq = r.seq
        WHERE r.seq >= ? AND r.seq < ? AND t.sid = ? AND t.kind = 'tool_result'
        ORDER BY r.seq LIMIT ?`,
    ).pluck(),
    body: db.prepare<[number], string>(`SELECT ${bodySql()} FROM transcript WHERE seq = ?`).pluck(),
    rowRefs: db.prepare<[number], string>('DELETE FROM payload_refs WHERE seq = ? RETURNING hash').pluck(),
    rewrite: db.prepare<[string, Buffer | null, number, number]>('UPDATE transcript SET body = ?, packed = ?, legacy_text = NULL, graphemes = ? WHERE seq = ?'),
    progress: db.prepare<[number, number, number, number, number, number]>(
      `UPDATE image_elision SET done_below = ?, images_elided = images_elided + ?, payloads_deleted = payloads_deleted + ?,
         bytes_freed = bytes_freed + ?, pending_below = CASE WHEN ? THEN NULL ELSE pending_below END WHERE sid = ?`,
    ),
    bumpRewrites: db.prepare<[number]>('UPDATE sessions SET rewrites = rewrites + 1 WHERE sid = ?'),
    fitRows: db.prepare<[number], { seq: number; body: string }>(
      `SELECT seq, ${bodySql()} AS body FROM transcript INDEXED BY transcript_class WHERE sid = ? AND row_class = 'image_fit' AND ${OPENS_UNIT} ORDER BY seq`,
    ),
  };
}

const stmts = perDb(prepare);

/**
 * Records that the session's tool-output images in rows below `belowSeq` are no longer in its
 * request. Call it inside the transaction that commits the compaction, so the job is durable
 * exactly when the compaction is. A range already handled is not scheduled again.
 */
export function scheduleElision(db: Db, sid: number, belowSeq: number): void {
  stmts(db).schedule.run(sid, belowSeq);
}

/** Sessions with an elision job waiting (after a crash, or scheduled and not yet run). */
export function pendingElisions(db: Db): { sid: number; name: string }[] {
  return stmts(db).pendingSessions.all();
}

export function elisionStats(db: Db, sid: number): ElisionStats {
  const s = stmts(db).stats.get(sid);
  if (s === undefined) return { imagesElided: 0, payloadsDeleted: 0, bytesFreed: 0, pending: false };
  return { imagesElided: s.images_elided, payloadsDeleted: s.payloads_deleted, bytesFreed: s.bytes_freed, pending: s.pending_below !== null };
}

/** Just enough of a stored body to find its image parts; the rest is kept as it is. */
const LooseBody = z.looseObject({ kind: z.string(), content: z.array(z.looseObject({ type: z.string() })) });

/** Rows per batch at most: each is a parse, a rewrite and a reference delete. */
export const ELISION_BATCH_ROWS = 64;
/** Milliseconds of row work per batch at most, so that a batch and its commit stay well inside 50 ms. */
export const ELISION_SLICE_MS = 10;

/**
 * Elides the next batch of the session's pending job, in one transaction. Rows are rewritten
 * from their stored JSON with only the `elided` mark added, so nothing else about them
 * changes; their text and rendered size follow. Returns what it did; `done` once the job is
 * finished (also when there was none).
 */
export function elideBatch(db: Db, sid: number, maxRows = ELISION_BATCH_ROWS): ElisionBatch {
  const st = stmts(db);
  // The batch's fsync is owed (finishElision pays it off the event loop before it resolves).
  return commitOwed(db, (): ElisionBatch => {
    const job = st.job.get(sid);
    const none: ElisionBatch = { rows: 0, images: 0, payloadsDeleted: 0, bytesFreed: 0, done: true };
    if (job?.pending_below == null) return none;
    const rows = st.nextRows.all(job.done_below, job.pending_below, sid, maxRows);
    const out: ElisionBatch = { rows: 0, images: 0, payloadsDeleted: 0, bytesFreed: 0, done: rows.length < maxRows };
    const hashes = new Set<string>();
    const started = performance.now();
    for (const seq of rows) {
      // A slice of work per batch (the commit's fsync comes on top): the rest waits for the next.
      if (out.rows > 0 && performance.now() - started >= ELISION_SLICE_MS) {
        out.done = false;
        break;
      }
      const marked = markImages(seq, st.body.get(seq)!);
      if (marked !== null) {
        const stored = packBody(marked.json);
        st.rewrite.run(stored.body, stored.packed, marked.graphemes, seq);
        out.images += marked.images;
      }
      for (const h of st.rowRefs.all(seq)) hashes.add(h);
      out.rows++;
    }
    let freed = releasePayloads(db, hashes);
    out.payloadsDeleted = freed.count;
    out.bytesFreed = freed.bytes;
    // A fitted copy of an image that just went is named only by its image-fit notice, which no
    // row can read any more (every row naming the original is gone or elided): drop the
    // notice's reference too, and so on along a chain of fits.
    let fits: FitNotice[] | undefined;
    while (freed.deleted.length > 0) {
      fits ??= fitNotices(st, sid);
      const dead = new Set(freed.deleted);
      const released: string[] = [];
      for (const f of fits) {
        if (!dead.has(f.from)) continue;
        for (const h of st.rowRefs.all(f.seq)) released.push(h);
      }
      freed = releasePayloads(db, released);
      out.payloadsDeleted += freed.count;
      out.bytesFreed += freed.bytes;
    }
    const doneBelow = out.done ? job.pending_below : rows[out.rows - 1]! + 1;
    st.progress.run(doneBelow, out.images, out.payloadsDeleted, out.bytesFreed, out.done ? 1 : 0, sid);
    // The rows changed in place: caches of rows and rendered sizes key on this counter.
    if (out.rows > 0) st.bumpRewrites.run(sid);
    return out;
  });
}

interface FitNotice {
  seq: number;
  from: string;
}

const FitBody = z.object({ kind: z.literal('notice'), body: z.object({ notice: z.literal('image_fit'), from_hash: z.string() }) });

/** The session's image-fit notices: where each is and which original it replaced. */
function fitNotices(st: ReturnType<typeof prepare>, sid: number): FitNotice[] {
  return st.fitRows.all(sid).map((r) => {
    const parsed = FitBody.safeParse(JSON.parse(r.body));
    if (!parsed.success) throw new Error(`transcript row ${r.seq} is corrupt: row_class image_fit without an image_fit notice`);
    return { seq: r.seq, from: parsed.data.body.from_hash };
  });
}

/** A row's body with every image part marked elided, its new text and size; null if it had none unmarked. */
function markImages(seq: number, json: string): { json: string; text: string; graphemes: number; images: number } | null {
  const raw = parseRowJson(seq, json);
  const loose = LooseBody.safeParse(raw);
  if (!loose.success) throw new Error(`transcript row ${seq} is corrupt: a tool result without content`);
  // The parsed JSON itself is edited, not zod's copy of it, so the stored key order stays.
  const next = raw as { content: Record<string, unknown>[] };
  let images = 0;
  next.content = next.content.map((p) => {
    if (p.type !== 'image' || p.elided === true) return p;
    images++;
    return { ...p, elided: true };
  });
  if (images === 0) return null;
  const body = StoredBody.safeParse(next);
  if (!body.success) throw new Error(`transcript row ${seq} is corrupt: ${z.prettifyError(body.error).replaceAll('\n', '; ')}`);
  const text = rowText(body.data);
  return { json: JSON.stringify(next), text, graphemes: renderedGraphemesWithoutSeq(body.data, text), images };
}
