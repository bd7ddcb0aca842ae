// lcm's summary tree in SQLite (migration 8): nodes with their source ranges, ordered child
// links, and the covered cursor. This module is the tree's only writer; readers for the
// lcm-memory tools live beside it. Node ranges are transcript seqs, so they follow rows that
// settling moves (`followSettle`, called from the settle transaction itself), and a fork copies
// the nodes whose whole range it copied (`forkTree`).
import { z } from 'zod';
import { type Db, perDb, withoutFsync } from '../db.ts';

/** What every node holds, stored or about to be. */
export interface NodeFields {
  depth: number;
  firstSeq: number;
  lastSeq: number;
  summary: string;
  /** Estimated tokens of the summary as a request input. */
  estimatedTokens: number;
  /** Estimated tokens of what the node stands for. */
  sourceTokens: number;
  /** The summary is a pointer to the rows: the summarizer could not make them smaller. */
  pointer: boolean;
  backend: string | null;
}

export interface LcmNode extends NodeFields {
  node: number;
}

export interface LcmState {
  /** Last seq a leaf covers (inclusive); rows after it are the verbatim tail. */
  coveredSeq: number;
  /** Bumped by every write to the session's tree: derived views are keyed on it. */
  version: number;
  /** When a pass last wrote the tree (ms since the epoch): `writeTreePass`'s `now`. */
  updatedAt: number;
}

/** A node a compaction pass is about to write; children refer to stored nodes or earlier drafts. */
export interface NodeDraft extends NodeFields {
  /** Ordered children: a stored node id, or the index of an earlier draft of the same pass. */
  children: readonly NodeRef[];
}

export type NodeRef = { stored: number } | { draft: number };

/** One compaction's writes: the new nodes (children before parents) and the cursor after them. */
export interface TreePass {
  drafts: readonly NodeDraft[];
  coveredSeq: number;
}

const NodeRow = z.object({
  node: z.number().int(),
  depth: z.number().int(),
  first_seq: z.number().int(),
  last_seq: z.number().int(),
  summary: z.string(),
  estimated_tokens: z.number().int(),
  source_tokens: z.number().int(),
  pointer: z.number().int(),
  backend: z.string().nullable(),
});
type NodeRow = z.infer<typeof NodeRow>;

const NODE_COLUMNS = 'node, depth, first_seq, last_seq, summary, estimated_tokens, source_tokens, pointer, backend';

function toNode(r: NodeRow): LcmNode {
  return {
    node: r.node,
    depth: r.depth,
    firstSeq: r.first_seq,
    lastSeq: r.last_seq,
    summary: r.summary,
    estimatedTokens: r.estimated_tokens,
    sourceTokens: r.source_tokens,
    pointer: r.pointer === 1,
    backend: r.backend,
  };
}

function prepare(db: Db) {
  return {
    state: db.prepare<[number], { covered_seq: number; version: number; updated_at: number }>('SELECT covered_seq, version, updated_at FROM lcm_state WHERE sid = ?'),
    upsertState: db.prepare<[number, number, number]>(
      `INSERT INTO lcm_state (sid, covered_seq, version, updated_at) VALUES (?, ?, 1, ?)
       ON CONFLICT (sid) DO UPDATE SET covered_seq = excluded.covered_seq, version = version + 1, updated_at = excluded.updated_at`,
    ),
    bump: db.prepare<[number, number]>('UPDATE lcm_state SET covered_seq = ?, version = version + 1 WHERE sid = ?'),
    frontier: db.prepare<[number], NodeRow>(
      `SELECT ${NODE_COLUMNS} FROM lcm_nodes n WHERE n.sid = ? AND NOT EXISTS (SELECT 1 FROM lcm_edges e WHERE e.child = n.node) ORDER BY n.first_seq`,
    ),
    all: db.prepare<[number], NodeRow>(`SELECT ${NODE_COLUMNS} FROM lcm_nodes WHERE sid = ? ORDER BY node`),
    byId: db.prepare<[number, number], NodeRow>(`SELECT ${NODE_COLUMNS} FROM lcm_nodes WHERE node = ? AND sid = ?`),
    children: db.prepare<[number], number>('SELECT child FROM lcm_edges WHERE parent = ? ORDER BY position').pluck(),
    parent: db.prepare<[number], number>('SELECT parent FROM lcm_edges WHERE child = ?').pluck(),
    edges: db.prepare<[number], { child: number; parent: number; position: number }>(
      'SELECT e.child, e.parent, e.position FROM lcm_edges e JOIN lcm_nodes n ON n.node = e.child WHERE n.sid = ?',
    ),
    insert: db.prepare<[number, number, number, number, string, number, number, number, string | null, number]>(
      `INSERT INTO lcm_nodes (sid, depth, first_seq, last_seq, summary, estimated_tokens, source_tokens, pointer, backend, created_at, indexed)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)`,
    ),
    // Both read the partial index lcm_nodes_waiting (migration 25), which holds only waiting nodes.
    waiting: db.prepare<[number, number], { node: number; chars: number }>(
      'SELECT node, length(summary) AS chars FROM lcm_nodes WHERE sid = ? AND indexed = 0 ORDER BY node LIMIT ?',
    ),
    waitingAny: db.prepare<[number], { node: number; chars: number }>(
      'SELECT node, length(summary) AS chars FROM lcm_nodes INDEXED BY lcm_nodes_waiting WHERE indexed = 0 ORDER BY sid, node LIMIT ?',
    ),
    mergeSummaries: db.prepare<[number]>("INSERT INTO lcm_summary_fts (lcm_summary_fts, rank) VALUES ('merge', ?)"),
    totalChanges: db.prepare<[], number>('SELECT total_changes()').pluck(),
    indexSummary: db.prepare<[number]>('INSERT INTO lcm_summary_fts(rowid, summary) SELECT node, albedo_fold(summary) FROM lcm_nodes WHERE node = ?'),
    markIndexed: db.prepare<[number]>('UPDATE lcm_nodes SET indexed = 1 WHERE node = ?'),
    link: db.prepare<[number, number, number]>('INSERT INTO lcm_edges (child, parent, position) VALUES (?, ?, ?)'),
    // Settling: nodes at or after the first moved position, and the one holding the call.
    touched: db.prepare<[number, number], { node: number; first_seq: number; last_seq: number }>(
      'SELECT node, first_seq, last_seq FROM lcm_nodes WHERE sid = ? AND last_seq >= ?',
    ),
    setRange: db.prepare<[number, number, number]>('UPDATE lcm_nodes SET first_seq = ?, last_seq = ? WHERE node = ?'),
  };
}

const stmts = perDb(prepare);

export function loadLcmState(db: Db, sid: number): LcmState | undefined {
  const r = stmts(db).state.get(sid);
  return r === undefined ? undefined : { coveredSeq: r.covered_seq, version: r.version, updatedAt: r.updated_at };
}

/** The nodes without a parent, in source order: what a request shows of the tree. */
export function frontierNodes(db: Db, sid: number): LcmNode[] {
  return stmts(db).frontier.all(sid).map((r) => toNode(NodeRow.parse(r)));
}

/** A node of this session, or undefined (a node of another session is as unknown as none). */
export function lcmNode(db: Db, sid: number, node: number): LcmNode | undefined {
  const r = stmts(db).byId.get(node, sid);
  return r === undefined ? undefined : toNode(NodeRow.parse(r));
}

/** A node's children, in order (empty for a leaf). */
export function childNodes(db: Db, node: number): number[] {
  return stmts(db).children.all(node);
}

export function parentNode(db: Db, node: number): number | null {
  return stmts(db).parent.get(node) ?? null;
}

/**
 * Writes one compaction's nodes and links and moves the cursor; call it inside the engine's
 * commit transaction. The nodes' summaries wait for the trigram index (indexWaitingSummaries).
 * Returns the stored ids of the drafts, in draft order.
 */
export function writeTreePass(db: Db, sid: number, pass: TreePass, now: number = Date.now()): number[] {
  const st = stmts(db);
  const ids: number[] = [];
  const idOf = (ref: NodeRef): number => {
    if ('stored' in ref) return ref.stored;
    const id = ids[ref.draft];
    if (id === undefined) throw new Error(`lcm draft ${ref.draft} refers to a later draft`);
    return id;
  };
  for (const d of pass.drafts) {
    const id = Number(st.insert.run(sid, d.depth, d.firstSeq, d.lastSeq, d.summary, d.estimatedTokens, d.sourceTokens, d.pointer ? 1 : 0, d.backend, now).lastInsertRowid);
    ids.push(id);
    d.children.forEach((c, position) => st.link.run(idOf(c), id, position));
  }
  st.upsertState.run(sid, pass.coveredSeq, now);
  return ids;
}

/**
 * Summary characters one call of indexWaitingSummaries indexes at most (always at least one
 * node): the trigram insert's cost goes with the characters, so this keeps a unit short. A
 * count of nodes did not bound it; summaries run from a line to pages.
 */
export const SUMMARY_INDEX_CHARS = 24_000;
/** Waiting nodes one unit looks at; the character budget usually stops it first. */
const SUMMARY_INDEX_NODES = 256;

/**
 * Puts summaries that wait for the trigram index (migration 25: a pass's commit does not) into
 * it, oldest first, up to `maxChars` characters of them, in one transaction: the session's when
 * `sid` is given (lcm_grep, before it searches them), any session's otherwise (idle work).
 * Returns how many it indexed; 0 means none waits. The commit skips the fsync: a node and its
 * `indexed` mark commit together, so a power loss leaves it waiting, to be indexed again.
 * Segments are merged by mergeSummaryIndex, not in the commit (migration 26).
 */
export function indexWaitingSummaries(db: Db, sid: number | null, maxChars: number = SUMMARY_INDEX_CHARS): number {
  const st = stmts(db);
  return withoutFsync(db, () =>
    db.transaction(() => {
      const waiting = sid === null ? st.waitingAny.all(SUMMARY_INDEX_NODES) : st.waiting.all(sid, SUMMARY_INDEX_NODES);
      let chars = 0;
      let indexed = 0;
      for (const { node, chars: length } of waiting) {
        if (indexed > 0 && chars + length > maxChars) break;
        st.indexSummary.run(node);
        st.markIndexed.run(node);
        chars += length;
        indexed++;
      }
      return indexed;
    })());
}

/**
 * One bounded step of merging the summaries' index segments (about `pages` pages written; see
 * storage/search/indexer.ts mergeSearchIndex, which does the same for the rows' index). Returns
 * whether there was anything to merge. Without an fsync: merging changes no answer.
 */
export function mergeSummaryIndex(db: Db, pages: number): boolean {
  const st = stmts(db);
  return withoutFsync(db, () => {
    const before = st.totalChanges.get() ?? 0;
    st.mergeSummaries.run(Math.max(1, Math.round(pages)));
    return (st.totalChanges.get() ?? 0) - before >= 2;
  });
}

/**
 * Pages per merge step of a catch-up: with the inserts' new segments merged as they come, no
 * commit reaches FTS5's crisis merge, which folds sixteen segments in one go.
 */
const CATCH_UP_MERGE_PAGES = 64;

/**
 * Indexes every summary of the session that waits, a unit at a time with a merge step after
 * each, and `pause` (a turn of the event loop) between them; what idle time does over many
 * quiet turns (daemon/idle-work.ts), in one go, for a search that needs them now.
 */
export async function catchUpSummaries(db: Db, sid: number, pause: () => Promise<void>): Promise<void> {
  while (indexWaitingSummaries(db, sid) > 0) {
    await pause();
    mergeSummaryIndex(db, CATCH_UP_MERGE_PAGES);
    await pause();
  }
}

/**
 * Keeps node ranges and the cursor naming the same contents after a settle moved rows
 * (storage/transcript/write.ts, in the same transaction). `dest` maps each moved seq to where its
 * contents went; `slot` took the late result's contents, which belong with their call at
 * `callSeq`: a node (and the cursor) that already held the call grows to hold the result.
 */
export function followSettle(db: Db, sid: number, callSeq: number, slot: number, dest: ReadonlyMap<number, number>): void {
  const st = stmts(db);
  const state = st.state.get(sid);
  if (state === undefined) return;
  const to = (seq: number): number => dest.get(seq) ?? seq;
  for (const n of st.touched.all(sid, callSeq)) {
    const holdsCall = n.first_seq <= callSeq && callSeq <= n.last_seq;
    const last = holdsCall ? Math.max(to(n.last_seq), slot) : to(n.last_seq);
    const first = holdsCall ? n.first_seq : to(n.first_seq);
    if (first !== n.first_seq || last !== n.last_seq) st.setRange.run(first, last, n.node);
  }
  const covered = state.covered_seq >= callSeq ? Math.max(to(state.covered_seq), slot) : state.covered_seq;
  st.bump.run(covered, sid);
}

/**
 * Copies into a branch the nodes whose whole source range the fork copied, with their links
 * among themselves, remapping seqs through `seqs` (parent seq -> branch seq). A node that
 * crosses the fork point is left out; its complete children come along and become frontier
 * nodes of the branch. The branch's cursor is the end of the copied leaves' coverage, so
 * everything after it is the branch's verbatim tail.
 */
export function forkTree(db: Db, from: { sid: number }, to: { sid: number }, seqs: ReadonlyMap<number, number>): void {
  const st = stmts(db);
  const state = st.state.get(from.sid);
  if (state === undefined) return;
  const nodes = st.all.all(from.sid).map((r) => toNode(NodeRow.parse(r)));
  const kept = nodes.filter((n) => seqs.has(n.firstSeq) && seqs.has(n.lastSeq) && n.firstSeq <= state.covered_seq);
  if (kept.length === 0) return;
  const keptIds = new Set(kept.map((n) => n.node));
  const childrenOf = new Map<number, { child: number; position: number }[]>();
  for (const e of st.edges.all(from.sid)) {
    if (!keptIds.has(e.child) || !keptIds.has(e.parent)) continue;
    const list = childrenOf.get(e.parent) ?? [];
    list.push({ child: e.child, position: e.position });
    childrenOf.set(e.parent, list);
  }
  // A parent is kept only when all its children are (its range implies that, but links decide).
  const drafts: NodeDraft[] = [];
  const draftOf = new Map<number, number>();
  // Children before parents: by depth, then source order.
  for (const n of [...kept].sort((a, b) => a.depth - b.depth || a.firstSeq - b.firstSeq)) {
    const children = (childrenOf.get(n.node) ?? []).sort((a, b) => a.position - b.position);
    if (children.some((c) => !draftOf.has(c.child))) continue;
    draftOf.set(n.node, drafts.length);
    drafts.push({
      depth: n.depth,
      firstSeq: seqs.get(n.firstSeq)!,
      lastSeq: seqs.get(n.lastSeq)!,
      summary: n.summary,
      estimatedTokens: n.estimatedTokens,
      sourceTokens: n.sourceTokens,
      pointer: n.pointer,
      backend: n.backend,
      children: children.map((c) => ({ draft: draftOf.get(c.child)! })),
    });
  }
  const covered = Math.max(...drafts.map((d) => d.lastSeq));
  writeTreePass(db, to.sid, { drafts, coveredSeq: covered });
}
