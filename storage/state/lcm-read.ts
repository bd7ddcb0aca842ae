// The read side of lcm's summary tree, behind the lcm-memory tools (lcm_list, lcm_grep,
// lcm_describe, lcm_expand). storage/state/lcm-tree.ts writes the tree; raw rows are searched by the
// transcript search (storage/search/grep.ts) and rendered by the transcript reader
// (storage/transcript/read.ts), so this file only adds what is about nodes: pages of them,
// searching their summaries, and which leaf covers a row.
import { z } from 'zod';
import { AlbedoError } from '../../protocol/errors.ts';
import type { Params, Result } from '../../protocol/methods.ts';
import { type Db, perDb } from '../db.ts';
import { timeSlicer, giveWay } from '../../protocol/time-slice.ts';
import { catchUpSummaries, childNodes, lcmNode, parentNode, type LcmNode } from './lcm-tree.ts';
import { excerpt, grep, GREP_BATCH_ROWS, MatchPage, packHits, SUMMARY_HITS_SQL, trigramQuery, type GrepOptions } from '../search/grep.ts';
import { requireSession } from '../transcript/sessions.ts';
import { readTranscript, type ReadOptions } from '../transcript/read.ts';

/** Code points of a summary read for a list preview: more than a preview shows, so the excerpt knows it cut. */
const PREVIEW_HEAD = 400;

/** A list row as SQLite returns it; `children` is a JSON array built in SQL. */
const ListRow = z.object({
  node: z.number().int(),
  depth: z.number().int(),
  first_seq: z.number().int(),
  last_seq: z.number().int(),
  estimated_tokens: z.number().int(),
  head: z.string(),
  frontier: z.number().int(),
  children: z.string(),
});
const ChildIds = z.array(z.number().int().positive());

function prepare(db: Db) {
  return {
    count: db.prepare<[number], number>('SELECT count(*) FROM lcm_nodes WHERE sid = ?').pluck(),
    // List order is the (sid, first_seq) index's own order (its last column is the node id), so
    // a page is an index walk with no sort. A child is always written before its parent, so
    // among nodes starting at the same row the child comes first.
    page: db.prepare<[number, number, number, number], unknown>(
      `SELECT n.node, n.depth, n.first_seq, n.last_seq, n.estimated_tokens, substr(n.summary, 1, ?) AS head,
              NOT EXISTS (SELECT 1 FROM lcm_edges p WHERE p.child = n.node) AS frontier,
              (SELECT json_group_array(c.child ORDER BY c.position) FROM lcm_edges c WHERE c.parent = n.node) AS children
         FROM lcm_nodes n WHERE n.sid = ? ORDER BY n.first_seq, n.node LIMIT ? OFFSET ?`,
    ),
    // Leaves tile the covered rows, so the leaf starting last at or before a row is the only
    // one that can hold it; parents are skipped by the depth test, not by a sort.
    leafAt: db.prepare<[number, number], { node: number; last_seq: number }>(
      'SELECT node, last_seq FROM lcm_nodes WHERE sid = ? AND first_seq <= ? AND depth = 0 ORDER BY first_seq DESC LIMIT 1',
    ),
    subtree: db
      .prepare<[number], number>(
        `WITH RECURSIVE sub(node) AS (SELECT ? UNION ALL SELECT e.child FROM lcm_edges e JOIN sub ON e.parent = sub.node)
         SELECT node FROM sub`,
      )
      .pluck(),
    summaryHits: db.prepare<[string, number], unknown[]>(SUMMARY_HITS_SQL).raw(),
    // Keyset over the same index, for patterns the trigram index cannot answer.
    summaryScan: db.prepare<[number, number, number, number], { id: number; sid: number; text: string; first_seq: number }>(
      `SELECT node AS id, sid, summary AS text, first_seq FROM lcm_nodes
        WHERE sid = ? AND (first_seq, node) > (?, ?) ORDER BY first_seq, node LIMIT ?`,
    ),
    summaries: db.prepare<[string], { id: number; text: string }>(
      'SELECT node AS id, summary AS text FROM lcm_nodes WHERE node IN (SELECT value FROM json_each(?))',
    ),
  };
}

const stmts = perDb(prepare);

/** The session's node, or `unknown_node`; the error names only what the caller asked for. */
export function requireNode(db: Db, sid: number, session: string, node: number): LcmNode {
  const n = lcmNode(db, sid, node);
  if (n === undefined) throw new AlbedoError('unknown_node', `session "${session}" has no lcm node ${node}`, { node });
  return n;
}

/** `lcm_list`: one page of every stored node of the session, counted and chosen in SQL. */
export function listNodes(db: Db, params: Params<'lcm_list'>): Result<'lcm_list'> {
  const s = requireSession(db, params.session);
  const st = stmts(db);
  const total = st.count.get(s.sid) ?? 0;
  const nodes = st.page.all(PREVIEW_HEAD, s.sid, params.limit, params.offset).map((raw) => {
    const r = ListRow.parse(raw);
    return {
      node: r.node,
      depth: r.depth,
      first_seq: r.first_seq,
      last_seq: r.last_seq,
      children: ChildIds.parse(JSON.parse(r.children)),
      frontier: r.frontier === 1,
      estimated_tokens: r.estimated_tokens,
      preview: excerpt(r.head, 0),
    };
  });
  const next = params.offset + nodes.length;
  return { total, offset: params.offset, next_offset: next < total ? next : null, nodes };
}

/** `lcm_describe`: one node with its links and whole summary. */
export function describeNode(db: Db, params: Params<'lcm_describe'>): Result<'lcm_describe'> {
  const s = requireSession(db, params.session);
  const n = requireNode(db, s.sid, s.name, params.node);
  const parent = parentNode(db, n.node);
  return {
    node: n.node,
    depth: n.depth,
    first_seq: n.firstSeq,
    last_seq: n.lastSeq,
    parent,
    children: childNodes(db, n.node),
    frontier: parent === null,
    summary: n.summary,
    backend: n.backend,
  };
}

/**
 * `lcm_expand`: the node's source rows exactly as transcript_read renders them (same headers,
 * separators and grapheme offsets), by asking the reader for the node's seq range.
 */
export async function expandNode(db: Db, params: Params<'lcm_expand'>, opts: ReadOptions = {}): Promise<Result<'lcm_expand'>> {
  const s = requireSession(db, params.session);
  const n = requireNode(db, s.sid, s.name, params.node);
  return readTranscript(db, { session: s.name, offset: params.offset, limit: params.limit, from_seq: n.firstSeq, to_seq: n.lastSeq }, opts);
}

/** The leaf whose source range holds `seq`, or null when no leaf covers it (the verbatim tail). */
export function leafCovering(db: Db, sid: number, seq: number): number | null {
  const r = stmts(db).leafAt.get(sid, seq);
  return r !== undefined && r.last_seq >= seq ? r.node : null;
}

export interface LcmGrepOptions extends Omit<GrepOptions, 'range'> {
  /** Runs SUMMARY_HITS_SQL (the daemon passes its search worker's); by default inline on `db`. */
  summaryHits?: (query: string, sid: number) => Promise<Float64Array>;
}

/**
 * `lcm_grep`: the same literal, Unicode case-insensitive match over the session's raw rows
 * (transcript_grep's own search, limited to the node's seq range when `node` is given) and
 * over its node summaries (the summary trigram index, or a scan for patterns under three
 * characters; limited to the node's subtree). The two lists are counted and paged separately
 * at the same offset. Each source match names the leaf covering its row.
 */
export async function grepTree(db: Db, params: Params<'lcm_grep'>, opts: LcmGrepOptions = {}): Promise<Result<'lcm_grep'>> {
  const s = requireSession(db, params.session);
  const st = stmts(db);
  const scope = params.node === undefined ? null : requireNode(db, s.sid, s.name, params.node);
  const { summaryHits, ...grepOpts } = opts;

  const rows = await grep(
    db,
    { pattern: params.pattern, session: s.name, offset: params.offset, limit: params.limit },
    scope === null ? grepOpts : { ...grepOpts, range: { from: scope.firstSeq, to: scope.lastSeq } },
  );

  const yieldNow = opts.yieldEvery ?? giveWay;
  const slice = timeSlicer(yieldNow);
  const inTree = scope === null ? null : new Set(st.subtree.all(scope.node));
  const matches = new MatchPage(params.pattern, params.offset, params.limit, (node, sid) => sid === s.sid && (inTree === null || inTree.has(node)));
  const query = trigramQuery(params.pattern);
  if (query !== null) {
    // Summaries a compaction wrote that idle time has not indexed yet join the index first, in slices.
    await catchUpSummaries(db, s.sid, yieldNow);
    await matches.hits(summaryHits === undefined ? packHits(st.summaryHits.all(query, s.sid)) : await summaryHits(query, s.sid), slice);
  } else {
    let after = { firstSeq: 0, node: 0 };
    for (;;) {
      await yieldNow();
      const batch = st.summaryScan.all(s.sid, after.firstSeq, after.node, GREP_BATCH_ROWS);
      await matches.scan(batch, slice);
      if (batch.length < GREP_BATCH_ROWS) break;
      const last = batch[batch.length - 1]!;
      after = { firstSeq: last.first_seq, node: last.id };
    }
  }
  const summaries = await matches.previews((id) => st.summaries.all(JSON.stringify([id]))[0]?.text ?? '', slice);

  const nextOf = (total: number, shown: number): number | null => (params.offset + shown < total ? params.offset + shown : null);
  return {
    source: {
      total: rows.total,
      next_offset: rows.next_offset,
      matches: rows.matches.map((m) => ({ seq: m.seq, node: leafCovering(db, s.sid, m.seq), preview: m.preview })),
    },
    summaries: {
      total: matches.total,
      next_offset: nextOf(matches.total, summaries.length),
      matches: summaries.map((m) => ({ node: m.id, preview: m.preview })),
    },
  };
}
