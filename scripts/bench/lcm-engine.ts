// Section `lcm`, the strategy's own costs: one forced compaction of a long never-compacted
// history (instant summarizer, so only lcm's work is timed) with the longest event-loop stall
// while it runs, and prepare with nothing due on a session whose tree holds 10k nodes against
// one whose tree holds 10 (the frontier is read once per tree version, so size must not show).
import fs from 'node:fs';
import path from 'node:path';
import { ExtensionsFile, type ConfigSnapshot } from '../../daemon/config.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';
import { engineSetup } from '../../daemon/engine-setup.ts';
import { openDb } from '../../storage/db.ts';
import { writeTreePass, type NodeDraft } from '../../storage/state/lcm-tree.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { loadCatalog } from '../../strategies/catalog/models.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { prepareRequest, type EngineSetup, type PrepareArgs } from '../../strategies/prepare.ts';
import type { Summarizer, SummaryResult } from '../../strategies/summarizer/types.ts';
import type { Dataset } from './dataset.ts';
import { clearTree } from './lcm.ts';
import { agentPrompt, MODEL_ID, TAIL_PERCENT, WINDOW_TOKENS } from './prepare.ts';
import { nowMs, stats, type Stats, withLoopMonitor } from './timing.ts';

export const STALL_TARGET_MS = 50;
export const FLAT_TARGET = 1.2;

function lcmConfig(): ConfigSnapshot {
  return {
    modules: BUILTIN_SET,
    extensions: ExtensionsFile.parse({ lcm: { contextWindowTokens: WINDOW_TOKENS, tailPercent: TAIL_PERCENT }, extensions: { enable: ['lcm'] } }),
    models: loadCatalog(),
    version: 1,
  };
}

const instant: Summarizer = {
  backend: 'client',
  model: null,
  async summarize(): Promise<SummaryResult> {
    return { text: 'Work on the codebase; details are in the source rows.', backend: 'client', model: null, outputTokens: 14 };
  },
};

function setup(db: Dataset['db'], sid: number): EngineSetup {
  const s = engineSetup({ db, config: lcmConfig(), configErrors: [], sid, modelId: MODEL_ID, conn: undefined, env: {} });
  if (s.strategy?.name !== 'lcm') throw new Error(`expected the lcm strategy, got ${s.strategy?.name ?? 'none'}`);
  return { ...s, summarizer: instant };
}

function args(db: Dataset['db'], session: { sid: number; name: string }, head: number, cache: KernelCache, force: boolean): PrepareArgs {
  const { instructions, tools } = agentPrompt();
  return { db, session, head, instructions, tools, force, focus: undefined, cache, signal: undefined };
}

export interface LcmCompaction {
  history_rows: number;
  ms: number;
  max_stall_ms: number;
  nodes: number;
  compacted: boolean;
}

/** One forced lcm compaction of the dataset's whole main session; its tree is removed after. */
export async function benchLcmCompaction(ds: Dataset, log: (s: string) => void): Promise<LcmCompaction> {
  const clear = () => clearTree(ds);
  clear();
  const cache = new KernelCache();
  // Set up outside the timed stretch, as the rolling case is: the first setup of a process
  // converts the memory tools' schemas once (~25 ms), which is no part of a compaction.
  const engine = setup(ds.db, ds.main.sid);
  const run = await withLoopMonitor(() => prepareRequest(engine, args(ds.db, { sid: ds.main.sid, name: ds.main.name }, ds.main.head, cache, true)));
  const nodes = ds.db.prepare<[number], number>('SELECT count(*) FROM lcm_nodes WHERE sid = ?').pluck().get(ds.main.sid) ?? 0;
  clear();
  const out = { history_rows: ds.main.rows, ms: run.ms, max_stall_ms: run.maxStallMs, nodes, compacted: run.value.compacted };
  log(`  lcm compaction of ${ds.main.rows} rows: ${out.ms.toFixed(0)} ms, ${nodes} nodes, longest stall ${out.max_stall_ms.toFixed(1)} ms`);
  return out;
}

export interface LcmPrepare {
  small_nodes: number;
  large_nodes: number;
  small: Stats;
  large: Stats;
  ratio: number;
}

/**
 * A tree of `leaves` leaves (two rows each) condensed four into one until at most four
 * frontier nodes are left, as a long lcm session ends up.
 */
function plantTree(db: Dataset['db'], sid: number, leaves: number): number {
  const drafts: NodeDraft[] = [];
  let level = Array.from({ length: leaves }, (_, i) => {
    drafts.push({ depth: 0, firstSeq: i * 2 + 1, lastSeq: i * 2 + 2, summary: `leaf ${i}: what rows ${i * 2 + 1}-${i * 2 + 2} did`, estimatedTokens: 30, sourceTokens: 60, pointer: false, backend: 'client', children: [] });
    return { draft: drafts.length - 1, depth: 0, first: i * 2 + 1, last: i * 2 + 2 };
  });
  while (level.length > 4) {
    const next: typeof level = [];
    for (let i = 0; i < level.length; i += 4) {
      const group = level.slice(i, i + 4);
      if (group.length === 1) {
        next.push(group[0]!);
        continue;
      }
      const depth = Math.max(...group.map((g) => g.depth)) + 1;
      drafts.push({
        depth,
        firstSeq: group[0]!.first,
        lastSeq: group[group.length - 1]!.last,
        summary: `parent of ${group.length}`,
        estimatedTokens: 30,
        sourceTokens: 120,
        pointer: false,
        backend: 'client',
        children: group.map((g) => ({ draft: g.draft })),
      });
      next.push({ draft: drafts.length - 1, depth, first: group[0]!.first, last: group[group.length - 1]!.last });
    }
    level = next;
  }
  writeTreePass(db, sid, { drafts, coveredSeq: leaves * 2 });
  return drafts.length;
}

/** prepare with nothing due: a 10k-node tree against a 10-node one, same tail, alternating. */
export async function benchLcmPrepare(tmp: string, log: (s: string) => void, runs = 41): Promise<LcmPrepare> {
  const dir = fs.mkdtempSync(path.join(tmp, 'lcm-prepare-'));
  const db = openDb(path.join(dir, 'albedo.db'));
  try {
    const make = async (name: string, leaves: number) => {
      const s = openSession(db, { session: name });
      const rows = [];
      for (let i = 0; i < leaves; i++) {
        rows.push({ kind: 'user' as const, origin: 'user' as const, content: [{ type: 'text' as const, text: `request ${i}` }] }, { kind: 'assistant' as const, content: [{ type: 'text' as const, text: `answer ${i}` }] });
      }
      // The same verbatim tail after either tree.
      for (let i = 0; i < 20; i++) {
        rows.push({ kind: 'user' as const, origin: 'user' as const, content: [{ type: 'text' as const, text: `tail request ${i} ${'context '.repeat(40)}` }] }, {
          kind: 'assistant' as const,
          content: [{ type: 'text' as const, text: `tail answer ${i}` }],
        });
      }
      let head = 0;
      for (let i = 0; i < rows.length; i += 1000) head = (await appendRows(db, name, rows.slice(i, i + 1000))).head;
      const first = db.prepare<[number], number>('SELECT min(seq) FROM transcript WHERE sid = ?').pluck().get(s.sid)!;
      // Seqs are global: shift the planted ranges to this session's rows.
      const nodes = plantTree(db, s.sid, leaves);
      db.prepare('UPDATE lcm_nodes SET first_seq = first_seq + ?, last_seq = last_seq + ? WHERE sid = ?').run(first - 1, first - 1, s.sid);
      db.prepare('UPDATE lcm_state SET covered_seq = covered_seq + ? WHERE sid = ?').run(first - 1, s.sid);
      return { session: { sid: s.sid, name }, head, nodes, cache: new KernelCache() };
    };
    const small = await make('small', 8);
    const large = await make('large', 7500);
    const time = async (x: typeof small) => {
      const t0 = nowMs();
      const p = await prepareRequest(setup(db, x.session.sid), args(db, x.session, x.head, x.cache, false));
      if (p.compacted) throw new Error('the lcm prepare bench expects nothing due');
      return nowMs() - t0;
    };
    await time(small);
    await time(large);
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < runs; i++) {
      a.push(await time(large));
      b.push(await time(small));
    }
    const out = { small_nodes: small.nodes, large_nodes: large.nodes, small: stats(b), large: stats(a), ratio: stats(a).median_ms / stats(b).median_ms };
    log(`  lcm prepare, nothing due: ${out.large_nodes} nodes ${out.large.median_ms.toFixed(3)} ms vs ${out.small_nodes} nodes ${out.small.median_ms.toFixed(3)} ms = ${out.ratio.toFixed(2)}x`);
    return out;
  } finally {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function judgeLcmEngine(compaction: LcmCompaction | undefined, prepare: LcmPrepare | undefined): Array<{ target: string; measured: string; pass: boolean }> {
  const out: Array<{ target: string; measured: string; pass: boolean }> = [];
  if (compaction !== undefined) {
    out.push({
      target: `lcm: event-loop stall < ${STALL_TARGET_MS} ms during a forced compaction of ${compaction.history_rows} uncovered rows`,
      measured: `${compaction.max_stall_ms.toFixed(1)} ms (compaction ${compaction.ms.toFixed(0)} ms, ${compaction.nodes} nodes)`,
      pass: compaction.compacted && compaction.max_stall_ms < STALL_TARGET_MS,
    });
  }
  if (prepare !== undefined) {
    out.push({
      target: `lcm: prepare with nothing due at ${prepare.large_nodes} nodes within ${FLAT_TARGET}x of ${prepare.small_nodes} nodes`,
      measured: `${prepare.ratio.toFixed(2)}x (${prepare.large.median_ms.toFixed(3)} / ${prepare.small.median_ms.toFixed(3)} ms)`,
      pass: prepare.ratio <= FLAT_TARGET,
    });
  }
  return out;
}
