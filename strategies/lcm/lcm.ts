// lcm: older history becomes a tree of summaries kept in SQLite (storage/state/lcm-tree.ts) whose
// source rows stay readable through the lcm-memory tools. A request is the frontier of the tree
// (the nodes without a parent, oldest first), then the verbatim tail after the covered cursor.
// A compaction writes leaves over what the shared cut module evicts (whole units, or older
// exchanges of an oversized newest unit), then joins frontier nodes under parents, level by
// level, until the request fits under the trigger. Nothing is written until every summary of the
// pass came back; the engine commits the pass in its own transaction.
import type { PlainInput, Section } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { runSteps, runStepsSliced, type Steps, giveWay } from '../../protocol/time-slice.ts';
import { forkTree, frontierNodes, loadLcmState, writeTreePass, type LcmNode, type LcmState, type NodeDraft, type NodeRef } from '../../storage/state/lcm-tree.ts';
import { firstSeqAfter, openerAtOrBefore, userRowsBeforeCount } from '../../storage/transcript/user-rows.ts';
import { nothingCompacted, type CompactOptions, type CompactOutcome, type DryRun, type Projection, type Strategy, type StrategyInput } from '../contract.ts';
import { EMPTY_FINGERPRINT, planCutSteps, startCut, type CutPlan, type LocatedCut } from '../harness/cut.ts';
import { tailRows, warmTailRows } from '../harness/history-rows.ts';
import { cacheSlot } from '../harness/kernel-cache.ts';
import { projectTail, rowMemo, warmTail } from '../harness/row-memo.ts';
import { summaryPrompt, SUMMARIZER_SYSTEM } from '../harness/summarizer-prompt.ts';
import { summaryText } from '../harness/summary-text.ts';
import { isDue, overWindow, roomUnderTrigger, roomUnderWindow, tailBudget } from '../harness/window.ts';
import { tokenCounterSteps } from '../projection.ts';
import { LcmSettings } from './settings.ts';
import { condenseRun, condenseSpare, leafChunks, leafChunksSteps, MAX_CONDENSE_ROUNDS, MIN_NODE_TOKENS, nodeCap, nodeHeader, nodeInput, nodeTokens, pointerSummary, shrink } from './tree.ts';

/** The saved tree as a request reads it: the cursor, the frontier, and where the tail starts. */
interface TreeView {
  state: LcmState | undefined;
  frontier: LcmNode[];
  located: LocatedCut;
}

const VIEW = cacheSlot<{ key: string; view: TreeView }>('lcm.view');

/**
 * Where the tail starts after the cursor. When the cursor lies inside a unit (a leaf took the
 * older exchanges of a long autonomous turn), the unit's opener is repeated verbatim at the
 * head of the tail, as every strategy's exchange-level cut does (harness/cut.ts).
 */
function locateCursor(input: StrategyInput, coveredSeq: number): LocatedCut {
  const { db } = input;
  const sid = input.session.sid;
  const next = firstSeqAfter(db, sid, coveredSeq) ?? input.head + 1;
  const opener = openerAtOrBefore(db, sid, next);
  const withinUnit = opener !== undefined && opener.seq < next;
  const openerSeq = withinUnit ? opener.seq : next;
  return {
    cut: { format: 2, users: userRowsBeforeCount(db, sid, openerSeq), fingerprint: EMPTY_FINGERPRINT },
    openerSeq,
    resumeSeq: next,
    withinUnit,
    notes: [],
  };
}

/**
 * What the tree view is cached under: the state's version (bumped by every write to the tree)
 * and the time of the pass that wrote it, so that a view seeded by a commit whose transaction
 * then rolled back (seedView) never matches a later pass that reached the same version.
 */
function viewKey(state: LcmState | undefined): string {
  return state === undefined ? 'none' : `${state.version}:${state.coveredSeq}:${state.updatedAt}`;
}

/** The tree view, re-read only when the tree was written or rows moved. */
function treeView(input: StrategyInput): TreeView {
  const state = loadLcmState(input.db, input.session.sid);
  const key = viewKey(state);
  const cached = input.cache.get(VIEW);
  if (cached?.key === key) return cached.view;
  const view: TreeView = state === undefined
    ? { state, frontier: [], located: startCut() }
    : { state, frontier: frontierNodes(input.db, input.session.sid), located: locateCursor(input, state.coveredSeq) };
  input.cache.set(VIEW, { key, view });
  return view;
}

/**
 * Caches the view of a tree a pass has just written, from the frontier the pass computed: the
 * projection that follows the commit would otherwise read it back node by node inside the
 * commit's stretch, and a long history's first pass leaves thousands. Called in the commit's
 * transaction, after the write; the frontier is in source order, as frontierNodes reads it.
 */
function seedView(input: StrategyInput, frontier: LcmNode[]): void {
  const state = loadLcmState(input.db, input.session.sid);
  if (state === undefined) return;
  input.cache.set(VIEW, { key: viewKey(state), view: { state, frontier, located: locateCursor(input, state.coveredSeq) } });
}

/** A frontier node as a request (or a plan) holds it: stored, or drafted by this compaction. */
interface FrontierItem {
  ref: NodeRef;
  node: number | undefined;
  depth: number;
  firstSeq: number;
  lastSeq: number;
  summary: string;
  tokens: number;
}

function storedItem(n: LcmNode): FrontierItem {
  return { ref: { stored: n.node }, node: n.node, depth: n.depth, firstSeq: n.firstSeq, lastSeq: n.lastSeq, summary: n.summary, tokens: n.estimatedTokens };
}

function describeFrontier(items: readonly FrontierItem[], coveredSeq: number): string {
  const listed = items.map((n) => `${n.node === undefined ? 'new node' : `node ${n.node}`} #${n.firstSeq}-#${n.lastSeq} depth ${n.depth}`);
  return `lcm frontier: ${listed.join('; ')}; covered through #${coveredSeq}`;
}

function build(input: StrategyInput, frontier: readonly FrontierItem[], coveredSeq: number, located: LocatedCut, rows: readonly StoredRow[], notes: string[]): Projection {
  const inputs: PlainInput[] = [];
  const sections: Section[] = [];
  if (frontier.length > 0) {
    const nodes = frontier.map((n) => nodeInput({ ...n, node: n.node ?? 0 }));
    inputs.push(...nodes);
    sections.push({ name: 'summary', source: describeFrontier(frontier, coveredSeq), estimated_tokens: frontier.reduce((t, n) => t + n.tokens, 0) });
  }
  // The tail and its estimate come from the kernel's projection of it, which `warm` builds in
  // slices for a long tail and a request only extends.
  const { inputs: tail, tokens: tailTokens } = projectTail(input, rows);
  inputs.push(...tail);
  if (rows.length > 0) {
    const range = located.withinUnit && rows.length > 1 ? `row #${rows[0]!.seq}, then rows #${rows[1]!.seq}-#${rows[rows.length - 1]!.seq}` : `rows #${rows[0]!.seq}-#${rows[rows.length - 1]!.seq}`;
    sections.push({ name: 'tail', source: `${range} (${rows.length} rows, verbatim)`, estimated_tokens: tailTokens });
  }
  const estimate = input.pinnedTokens + frontier.reduce((t, n) => t + n.tokens, 0) + tailTokens;
  return { inputs, sections, estimate, due: isDue(estimate, input.window), notes };
}

// lcm reads its own tree and ignores other extensions' folds (`prior`): switching back to lcm
// continues from its nodes and the transcript, never from another strategy's summary.
function project(input: StrategyInput): Projection {
  const view = treeView(input);
  return build(input, view.frontier.map(storedItem), view.state?.coveredSeq ?? 0, view.located, tailRows(input, view.located), []);
}

/**
 * Decodes and sizes the tail with yields, so that neither `project` nor a compaction decodes or
 * sizes a long uncovered history in one stretch of the event loop.
 */
function warm(input: StrategyInput): Promise<void> | undefined {
  const located = treeView(input).located;
  return warmTail(input, warmTailRows(input, located), () => tailRows(input, located));
}

/** Where the rows the tree does not cover yet begin. */
function tailFrom(input: StrategyInput): number {
  return treeView(input).located.openerSeq;
}

const NOTHING_TO_COVER = 'nothing to summarize: the tail holds only the newest exchange and the frontier is a single node';

interface Choice {
  view: TreeView;
  coveredSeq: number;
  /** Rows the next leaves cover (after the cursor, in order). */
  leafRows: StoredRow[];
  /** The opener of a unit the pass covers only in part (its exchanges are chunked apart). */
  partialOpener: number | undefined;
  plan: CutPlan | undefined;
  tail: readonly StoredRow[];
  tailTokens: number;
  tokens: (row: StoredRow) => number;
  cap: number;
}

/**
 * What the next pass covers: the cut module's eviction over the rows after the cursor, with
 * the tail kept to tailPercent of the window and never more than half the room the trigger
 * leaves after the pinned prompt and one node.
 */
function* choose(input: StrategyInput, forced: boolean): Steps<Choice> {
  const view = treeView(input);
  const coveredSeq = view.state?.coveredSeq ?? 0;
  const rows = tailRows(input, view.located);
  const memo = rowMemo(input);
  const tokens = yield* tokenCounterSteps(rows, input.target, memo.sizes, memo.inputs);
  let historyTokens = 0;
  for (const r of rows) historyTokens += tokens(r);
  const frontierTokens = view.frontier.reduce((n, f) => n + f.estimatedTokens, 0);
  const cap = nodeCap(input.window.window ?? historyTokens + frontierTokens + input.pinnedTokens, input.pinnedTokens);
  const fixed = input.pinnedTokens + cap;
  let budget = tailBudget(input.window, historyTokens, forced);
  // The layers' share (the notes at their cap) lands in the request after the compaction too.
  const room = roomUnderTrigger(input.window, fixed + (input.window.reserved ?? 0));
  if (room !== null) budget = Math.min(budget, Math.max(0, Math.floor(room / 2)));
  const plan = yield* planCutSteps(input, view.located, rows, {
    tokens,
    budget,
    settles: (tail) => input.window.window === null || !isDue(fixed + tail, input.window),
    // Beside the pinned prompt and one node at its cap (the frontier once condensed).
    fits: (tail) => tail <= (roomUnderWindow(input.window, fixed) ?? Infinity),
  });
  const leafRows = plan === undefined ? [] : plan.evicted.filter((r) => r.seq > coveredSeq);
  // The first exchange-level eviction inside a unit takes its opener into the leaf as well, so
  // that every covered row belongs to a node; the opener still heads the tail verbatim.
  const opener = plan?.withinUnit === true ? plan.tail[0] : undefined;
  if (opener !== undefined && opener.seq > coveredSeq && leafRows.length > 0) {
    leafRows.push(opener);
    leafRows.sort((a, b) => a.seq - b.seq);
  }
  const tail = plan === undefined || leafRows.length === 0 ? rows : plan.tail;
  const tailTokens = plan === undefined || leafRows.length === 0 ? historyTokens : plan.tailTokens;
  const partialOpener = plan?.withinUnit === true ? plan.hints.openerSeq : undefined;
  return { view, coveredSeq, leafRows, partialOpener, plan: leafRows.length === 0 ? undefined : plan, tail, tailTokens, tokens, cap };
}

function tailLocated(choice: Choice): LocatedCut {
  const p = choice.plan;
  if (p === undefined) return choice.view.located;
  return { cut: p.cut, openerSeq: p.hints.openerSeq, resumeSeq: p.hints.resumeSeq, withinUnit: p.withinUnit, notes: [] };
}

function plan(input: StrategyInput, projection: Projection, forced: boolean): DryRun {
  const c = runSteps(choose(input, forced));
  const leaves = leafChunks(c.leafRows, c.tokens, c.partialOpener);
  const frontier = [...c.view.frontier.map(storedItem), ...leaves.map((rows) => draftItem(rows, 'x'.repeat(c.cap * 4), 0, { draft: 0 }))];
  const covered = c.leafRows[c.leafRows.length - 1]?.seq ?? c.coveredSeq;
  const after = build(input, frontier, covered, tailLocated(c), c.tail, []);
  const nothing = c.leafRows.length === 0 && condenseRun(c.view.frontier.map((n) => n.depth)) === undefined;
  return {
    plan: {
      evict_rows: c.leafRows.length,
      evict_from_seq: c.leafRows[0]?.seq ?? null,
      evict_to_seq: c.leafRows[c.leafRows.length - 1]?.seq ?? null,
      tail_rows: c.tail.length,
      estimated_tokens_before: projection.estimate,
      estimated_tokens_after: after.estimate,
    },
    reason: nothing ? NOTHING_TO_COVER : after.estimate >= projection.estimate && c.leafRows.length > 0 ? `the request would not get smaller (~${projection.estimate} -> ~${after.estimate} tokens)` : null,
  };
}

function draftItem(rows: readonly StoredRow[], summary: string, depth: number, ref: NodeRef): FrontierItem {
  const firstSeq = rows[0]!.seq;
  const lastSeq = rows[rows.length - 1]!.seq;
  return { ref, node: undefined, depth, firstSeq, lastSeq, summary, tokens: nodeTokens({ firstSeq, lastSeq, depth, summary }) };
}

/** What a parent's summarizer reads: its children's summaries in order, each under its header. */
function childrenText(children: readonly FrontierItem[]): string {
  return children.map((c) => `${nodeHeader({ ...c, node: c.node ?? 0 })}\n${c.summary}`).join('\n\n');
}

async function compact(input: StrategyInput, projection: Projection, opts: CompactOptions): Promise<CompactOutcome> {
  // Choosing and chunking read the whole uncovered history: in slices, so a long one stalls nothing.
  const stop = (): void => opts.signal?.throwIfAborted();
  const c = await runStepsSliced(choose(input, opts.forced), stop);
  if (c.leafRows.length === 0 && condenseRun(c.view.frontier.map((n) => n.depth)) === undefined) return nothingCompacted(NOTHING_TO_COVER);

  const drafts: NodeDraft[] = [];
  let backend: string | null = null;
  const ask = async (what: string, transcript: string, limit: number) => {
    await giveWay();
    const prompt = summaryPrompt({ previousSummary: '', transcript, focus: opts.focus, maxOutputTokens: limit, what });
    // lcm's own retry (shrink) replaces the output cap's: the second call asks for a third.
    return opts.summarizer.summarize({ session: input.session.name, purpose: 'lcm', system: SUMMARIZER_SYSTEM, prompt, maxOutputTokens: limit, signal: opts.signal, overCap: 'cut' });
  };

  // Leaves, oldest first.
  const frontier: FrontierItem[] = c.view.frontier.map(storedItem);
  for (const rows of await runStepsSliced(leafChunksSteps(c.leafRows, c.tokens, c.partialOpener), stop)) {
    const sourceTokens = rows.reduce((n, r) => n + c.tokens(r), 0);
    const first = rows[0]!.seq;
    const last = rows[rows.length - 1]!.seq;
    const transcript = summaryText(rows);
    const s = await shrink(sourceTokens, c.cap, (limit) => ask('a summary of this part of the conversation', transcript, limit), () => pointerSummary(first, last, `these ${rows.length} rows`));
    backend = s.backend ?? backend;
    const item = draftItem(rows, s.summary, 0, { draft: drafts.length });
    drafts.push({ depth: 0, firstSeq: first, lastSeq: last, summary: s.summary, estimatedTokens: item.tokens, sourceTokens, pointer: s.pointer, backend: s.backend, children: [] });
    frontier.push(item);
  }

  // Condensation: a run of frontier nodes under one parent, level by level (condenseRun),
  // until the request fits under the trigger with a tenth of the window (at least a node's
  // cap) to spare (condenseSpare); a forced compaction with nothing new to cover condenses
  // once. With less, a pass left the request just under the trigger and the next turns
  // compacted again: the eval measured lcm compacting (and missing the prompt cache) far more
  // often than rolling on the same sessions. Past MAX_CONDENSE_ROUNDS only a request
  // over the whole window is condensed further, so a long history met for the first time (a
  // switch to lcm) never goes out over the window while nodes can still be joined.
  const sizeOf = (items: readonly FrontierItem[]) => input.pinnedTokens + items.reduce((t, n) => t + n.tokens, 0) + c.tailTokens;
  const overWhole = (items: readonly FrontierItem[]) => overWindow(sizeOf(items) + (input.window.reserved ?? 0), input.window);
  const notes: string[] = [];
  let rounds = 0;
  // The layers (the notes at their cap) go out beside the frontier: the spare is above them.
  const spare = condenseSpare(input.window, c.cap);
  const wantsRound = () => (drafts.length === 0 && rounds === 0) || isDue(sizeOf(frontier) + (input.window.reserved ?? 0) + spare, input.window);
  for (let run = condenseRun(frontier.map((n) => n.depth)); run !== undefined && wantsRound(); run = condenseRun(frontier.map((n) => n.depth))) {
    if (rounds >= MAX_CONDENSE_ROUNDS && !overWhole(frontier)) {
      const frontierTokens = frontier.reduce((t, n) => t + n.tokens, 0);
      notes.push(
        `lcm stopped condensing after ${rounds} rounds with the request within the window but above the trigger: the frontier holds ${frontier.length} nodes (~${frontierTokens} tokens) and the tail ~${c.tailTokens}; the next compaction joins more`,
      );
      break;
    }
    const children = frontier.slice(run.start, run.start + run.count);
    const sourceTokens = children.reduce((t, n) => t + n.tokens, 0);
    const first = children[0]!.firstSeq;
    const last = children[children.length - 1]!.lastSeq;
    const depth = Math.max(...children.map((n) => n.depth)) + 1;
    // A newest exchange too large to leave the parent its usual cap under the whole window
    // gets a shorter parent instead, down to the minimum.
    const others = sizeOf(frontier) - input.pinnedTokens - c.tailTokens - sourceTokens;
    const left = roomUnderWindow(input.window, input.pinnedTokens + c.tailTokens + others + nodeTokens({ firstSeq: first, lastSeq: last, depth, summary: '' }));
    const limit = left === null ? c.cap : Math.max(MIN_NODE_TOKENS, Math.min(c.cap, left));
    const s = await shrink(
      sourceTokens,
      limit,
      (limit) => ask('one summary that replaces these summaries of consecutive parts of the conversation', childrenText(children), limit),
      () => pointerSummary(first, last, `its ${children.length} child summaries`),
    );
    backend = s.backend ?? backend;
    const item: FrontierItem = { ref: { draft: drafts.length }, node: undefined, depth, firstSeq: first, lastSeq: last, summary: s.summary, tokens: nodeTokens({ firstSeq: first, lastSeq: last, depth, summary: s.summary }) };
    drafts.push({ depth, firstSeq: first, lastSeq: last, summary: s.summary, estimatedTokens: item.tokens, sourceTokens, pointer: s.pointer, backend: s.backend, children: children.map((n) => n.ref) });
    frontier.splice(run.start, run.count, item);
    rounds += 1;
  }
  if (drafts.length === 0) return nothingCompacted(NOTHING_TO_COVER);
  const pointers = drafts.filter((d) => d.pointer).length;
  if (pointers > 0) notes.push(`${pointers} of ${drafts.length} new nodes are pointers: no summary came out smaller than its source within its limit, even asked again at a third of it; lcm_expand reads their rows`);

  const covered = Math.max(c.coveredSeq, c.leafRows[c.leafRows.length - 1]?.seq ?? 0);
  const commit = (): void => {
    const ids = writeTreePass(input.db, input.session.sid, { drafts, coveredSeq: covered });
    const stored = new Map(c.view.frontier.map((n) => [n.node, n]));
    const nodeOf = (ref: NodeRef): LcmNode => {
      if ('stored' in ref) return stored.get(ref.stored)!;
      const { children: _children, ...fields } = drafts[ref.draft]!;
      return { node: ids[ref.draft]!, ...fields };
    };
    seedView(input, frontier.map((item) => nodeOf(item.ref)));
  };
  return { compacted: true, commit, reason: null, backend, evictedRows: c.leafRows.length, notes };
}

export const lcm: Strategy = {
  name: 'lcm',
  settings: LcmSettings,
  project,
  plan,
  compact,
  warm,
  tailFrom,
  fork: (db, from, to, seqs) => forkTree(db, from, to, seqs),
};
