// Section `lcm`: the lcm-memory tools on a main session with a stored summary tree. Two
// datasets (the usual main + side sessions, built by buildDataset; the large one is a run
// size's own when --lcm-rows is one of the sizes), each given the same number
// of nodes written straight through the tree's writer: lcm_grep of a rare and a common literal
// over the large one against GNU grep over the same rows and summaries dumped to a file, and
// the first page of lcm_list / lcm_describe / lcm_expand at the large size against the small
// one, timed in alternating blocks.
import { DEFAULT_NODES_LIMIT, DEFAULT_READ_LIMIT } from '../../protocol/methods.ts';
import { describeNode, expandNode, grepTree, listNodes } from '../../storage/state/lcm-read.ts';
import { writeTreePass, type NodeDraft } from '../../storage/state/lcm-tree.ts';
import { indexBatchAndMerge, mergeSearchIndexFully } from '../../storage/search/indexer.ts';
import { SearchWorker } from '../../storage/search/worker.ts';
import { prng } from './corpus.ts';
import { checkpoint, dumpTexts, RARE_NEEDLE, type Dataset } from './dataset.ts';
import { PATTERNS } from './grep-anchor.ts';
import { versusGnu, type VersusGnu } from './grep.ts';
import { alternateTimed, nowMs, turn, type Stats } from './timing.ts';

/** Children per parent, as lcm condenses the first four frontier nodes. */
const FANOUT = 4;
/** Share of the main session the leaves cover; the rest is the verbatim tail. */
const COVERED_SHARE = 0.99;
/** Summaries that carry the rare needle. */
const RARE_SUMMARIES = 3;
/** Drafts written per transaction. */
const WRITE_CHUNK = 2000;
/** Rows moved into the search index per transaction. */
const INDEX_BATCH = 20_000;

export interface Tree {
  nodes: number;
  leaves: number;
  depth: number;
  /** The first frontier node in list order: it covers the oldest rows (what describe and expand read). */
  top: number;
  ms: number;
}

export interface LcmGrepCase extends VersusGnu {
  source_matches: number;
  summary_matches: number;
}

export interface LcmPage {
  op: 'lcm_list' | 'lcm_describe' | 'lcm_expand';
  large: Stats;
  small: Stats;
  /** large / small medians. */
  ratio: number;
}

export interface LcmResult {
  large: { rows: number; tree: Tree };
  small: { rows: number; tree: Tree };
  /**
   * Whether the large dataset is a run size's own (indexed by the grep section when that ran,
   * so `index_ms` is then only what was still pending) or was built for this section.
   */
  large_dataset: 'size' | 'own';
  /** Time to index the rows the large dataset's index had not reached yet. */
  index_ms: number;
  dump_bytes: number;
  grep: LcmGrepCase[];
  pages: LcmPage[];
}

const VOCABULARY = (
  'the agent read edited tested fixed the build error in module config session cache index query page ' +
  'summary window token request handler schema migration timeout retry socket daemon function type ' +
  'import export promise value row column transaction commit user asked for a change to tests and docs'
).split(' ');

function summaryText(rnd: () => number, label: string, words: number): string {
  const out = [label];
  for (let i = 0; i < words; i++) out.push(VOCABULARY[Math.floor(rnd() * VOCABULARY.length)]!);
  return `${out.join(' ')}.`;
}

/**
 * Writes a tree of about `nodes` nodes over the main session: leaves over equal runs of its
 * rows (the first COVERED_SHARE of them), then parents over FANOUT consecutive nodes, level by
 * level, until a level has at most FANOUT nodes (those are the frontier).
 */
export function plantTree(ds: Dataset, nodes: number): Tree {
  const t0 = nowMs();
  const seqs = ds.db.prepare<[number], number>('SELECT seq FROM transcript WHERE sid = ? ORDER BY seq').pluck().all(ds.main.sid);
  const covered = Math.max(1, Math.floor(seqs.length * COVERED_SHARE));
  const leafCount = Math.max(1, Math.min(covered, Math.round((nodes * (FANOUT - 1)) / FANOUT)));
  const rnd = prng(7);
  const rare = new Set(Array.from({ length: RARE_SUMMARIES }, (_, j) => Math.floor(((j + 0.5) * leafCount) / RARE_SUMMARIES)));
  const draft = (depth: number, firstSeq: number, lastSeq: number, summary: string, children: number[]): NodeDraft => ({
    depth,
    firstSeq,
    lastSeq,
    summary,
    estimatedTokens: Math.ceil(summary.length / 4),
    sourceTokens: (lastSeq - firstSeq + 1) * 50,
    pointer: false,
    backend: 'bench',
    children: children.map((stored) => ({ stored })),
  });
  const write = (drafts: NodeDraft[], coveredSeq: number): number[] => {
    const ids: number[] = [];
    for (let i = 0; i < drafts.length; i += WRITE_CHUNK) {
      ids.push(...ds.db.transaction(() => writeTreePass(ds.db, ds.main.sid, { drafts: drafts.slice(i, i + WRITE_CHUNK), coveredSeq }))());
    }
    return ids;
  };

  const leaves: NodeDraft[] = [];
  for (let i = 0; i < leafCount; i++) {
    const first = seqs[Math.floor((i * covered) / leafCount)]!;
    const last = seqs[Math.floor(((i + 1) * covered) / leafCount) - 1]!;
    const text = summaryText(rnd, `Rows #${first}-#${last}:`, 60 + Math.floor(rnd() * 60));
    leaves.push(draft(0, first, last, rare.has(i) ? `${text} ${RARE_NEEDLE}.` : text, []));
  }
  const coveredSeq = seqs[covered - 1]!;
  let level = write(leaves, coveredSeq).map((id, i) => ({ id, d: leaves[i]! }));
  let total = level.length;
  let depth = 0;
  while (level.length > FANOUT) {
    depth++;
    const parents: NodeDraft[] = [];
    for (let i = 0; i < level.length; i += FANOUT) {
      const group = level.slice(i, i + FANOUT);
      const text = summaryText(rnd, `Depth ${depth} over rows #${group[0]!.d.firstSeq}-#${group[group.length - 1]!.d.lastSeq}:`, 80);
      parents.push(draft(depth, group[0]!.d.firstSeq, group[group.length - 1]!.d.lastSeq, text, group.map((g) => g.id)));
    }
    level = write(parents, coveredSeq).map((id, i) => ({ id, d: parents[i]! }));
    total += level.length;
  }
  return { nodes: total, leaves: leafCount, depth, top: level[0]!.id, ms: nowMs() - t0 };
}

function firstPages(ds: Dataset, tree: Tree): Record<LcmPage['op'], () => Promise<unknown>> {
  const session = ds.main.name;
  return {
    lcm_list: async () => listNodes(ds.db, { session, offset: 0, limit: DEFAULT_NODES_LIMIT }),
    lcm_describe: async () => describeNode(ds.db, { session, node: tree.top }),
    lcm_expand: () => expandNode(ds.db, { session, node: tree.top, offset: 0, limit: DEFAULT_READ_LIMIT }),
  };
}

/** Times lcm_grep (as the daemon runs it, on the search worker) and GNU grep over the large dataset. */
async function grepCases(ds: Dataset, dumpFile: string, log: (s: string) => void): Promise<LcmGrepCase[]> {
  const worker = new SearchWorker(ds.file);
  try {
    const cases: LcmGrepCase[] = [];
    for (const p of PATTERNS.filter((x) => x.name === 'rare' || x.name === 'common')) {
      const once = () =>
        grepTree(
          ds.db,
          { session: ds.main.name, pattern: p.pattern, offset: 0, limit: 50 },
          { hits: (ask) => worker.hits(ask), summaryHits: (q, sid) => worker.summaryHits(q, sid) },
        );
      const { value, timing } = await versusGnu(p, dumpFile, once);
      const c: LcmGrepCase = { ...timing, source_matches: value.source.total, summary_matches: value.summaries.total };
      cases.push(c);
      log(
        `  lcm_grep ${p.name}: ours ${c.ours_best_ms.toFixed(1)} ms vs GNU ${c.gnu_best_ms.toFixed(1)} ms (${c.ratio.toFixed(2)}x), ${c.source_matches}+${c.summary_matches}/${c.gnu_matches} matches, stall ${c.max_stall_ms.toFixed(1)} ms`,
      );
    }
    return cases;
  } finally {
    await worker.close();
  }
}

/** Removes the main session's lcm tree and state, so the dataset can serve other sections again. */
export function clearTree(ds: Dataset): void {
  ds.db.prepare('DELETE FROM lcm_nodes WHERE sid = ?').run(ds.main.sid);
  ds.db.prepare('DELETE FROM lcm_state WHERE sid = ?').run(ds.main.sid);
}

/**
 * Runs the section on two datasets the caller built (and deletes): `small` first gets its
 * tree, then `large` gets the same number of nodes, the rest of its search index filled, and
 * the greps. `large` may be a run size's dataset that the grep section already indexed
 * (`largeDataset: 'size'`); the caller then removes the tree (clearTree) before reusing it.
 */
export async function benchLcm(small: Dataset, large: Dataset, opts: { nodes: number; largeDataset: LcmResult['large_dataset'] }, log: (s: string) => void): Promise<LcmResult> {
  const smallTree = plantTree(small, opts.nodes);
  const largeTree = plantTree(large, opts.nodes);
  log(`  lcm trees: ${smallTree.nodes} nodes over ${small.main.rows} rows, ${largeTree.nodes} over ${large.main.rows} (${largeTree.ms.toFixed(0)} ms)`);

  // Large batches (the daemon's indexer uses small ones to keep its loop free; nothing else runs
  // here), with a turn between them so Ctrl-C can still clean up.
  const t0 = nowMs();
  let indexed = 0;
  for (let n = indexBatchAndMerge(large.db, INDEX_BATCH); n > 0; n = indexBatchAndMerge(large.db, INDEX_BATCH)) {
    indexed += n;
    if (indexed % (INDEX_BATCH * 10) < n) log(`  indexing: ${indexed}/${large.totalRows} rows`);
    await turn();
  }
  mergeSearchIndexFully(large.db);
  const indexMs = nowMs() - t0;
  log(`  indexed ${indexed} of ${large.totalRows} rows in ${(indexMs / 1000).toFixed(1)} s (the rest were indexed already)`);
  const summaries = large.db.prepare<[number], string>('SELECT summary FROM lcm_nodes WHERE sid = ? ORDER BY first_seq, node').pluck().all(large.main.sid);
  const dump = dumpTexts(large, { mainExtra: summaries });
  checkpoint(large.db);
  const grep = await grepCases(large, dump.main, log);

  const pages: LcmPage[] = [];
  const atLarge = firstPages(large, largeTree);
  const atSmall = firstPages(small, smallTree);
  for (const op of ['lcm_list', 'lcm_describe', 'lcm_expand'] as const) {
    const alt = await alternateTimed(atLarge[op], atSmall[op], { blocks: 10, perBlock: 40 });
    pages.push({ op, large: alt.a, small: alt.b, ratio: alt.ratio });
    log(`  ${op} first page @${large.main.rows} vs @${small.main.rows}: ${alt.a.median_ms.toFixed(3)} / ${alt.b.median_ms.toFixed(3)} ms = ${alt.ratio.toFixed(2)}x`);
  }
  return {
    large: { rows: large.main.rows, tree: largeTree },
    small: { rows: small.main.rows, tree: smallTree },
    large_dataset: opts.largeDataset,
    index_ms: indexMs,
    dump_bytes: dump.mainBytes,
    grep,
    pages,
  };
}
