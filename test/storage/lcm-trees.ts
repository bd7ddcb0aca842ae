// Writes small lcm summary trees for tests through the tree's own writer (writeTreePass), so
// the reads under test see exactly what a compaction would have stored. Shared by the storage
// tests and the e2e tests, which open a second connection to the daemon's file.
import type { Db } from '../../storage/db.ts';
import { writeTreePass, type NodeDraft } from '../../storage/state/lcm-tree.ts';

export interface TreeSpec {
  /** Leaves over inclusive seq ranges, in source order. */
  leaves: ReadonlyArray<{ first: number; last: number; summary: string }>;
  /** Parents over earlier drafts: indices into leaves, then parents, in draft order. */
  parents?: ReadonlyArray<{ children: readonly number[]; summary: string }>;
}

/** Stores the tree in one pass and returns the node ids in draft order (leaves, then parents). */
export function writeTree(db: Db, sid: number, spec: TreeSpec): number[] {
  const drafts: NodeDraft[] = spec.leaves.map((l) => ({
    depth: 0,
    firstSeq: l.first,
    lastSeq: l.last,
    summary: l.summary,
    estimatedTokens: Math.ceil(l.summary.length / 4),
    sourceTokens: 100,
    pointer: false,
    backend: 'test',
    children: [],
  }));
  for (const p of spec.parents ?? []) {
    const kids = p.children.map((i) => {
      const d = drafts[i];
      if (d === undefined) throw new Error(`parent refers to draft ${i}, which is not written before it`);
      return d;
    });
    drafts.push({
      depth: Math.max(...kids.map((k) => k.depth)) + 1,
      firstSeq: Math.min(...kids.map((k) => k.firstSeq)),
      lastSeq: Math.max(...kids.map((k) => k.lastSeq)),
      summary: p.summary,
      estimatedTokens: Math.ceil(p.summary.length / 4),
      sourceTokens: kids.reduce((n, k) => n + k.sourceTokens, 0),
      pointer: false,
      backend: 'test',
      children: p.children.map((draft) => ({ draft })),
    });
  }
  const covered = Math.max(0, ...spec.leaves.map((l) => l.last));
  return db.transaction(() => writeTreePass(db, sid, { drafts, coveredSeq: covered }))();
}
