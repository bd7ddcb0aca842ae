// The lcm extensions: the strategy, and lcm-memory, which keeps the stored summary tree readable
// (as folds for any strategy and through the lcm_* tools) after a switch to another strategy.
import { LcmDescribeParams, LcmExpandParams, LcmGrepParams, LcmListParams } from '../../protocol/methods.ts';
import { describeNode, expandNode, grepTree, listNodes } from '../../storage/state/lcm-read.ts';
import { memoryTool, type ExtensionModule } from '../extensions/module.ts';
import { lcm } from './lcm.ts';
import { lcmMemory } from './memory.ts';

export const lcmExtension = {
  name: 'lcm',
  kind: 'strategy',
  defaultEnabled: false,
  requires: [],
  description: 'a tree of source-backed summaries stored in SQLite, then the verbatim tail',
  settings: lcm.settings,
  strategy: lcm,
  tables: ['lcm_state', 'lcm_nodes', 'lcm_edges', 'lcm_summary_fts'],
} as const satisfies ExtensionModule;

// A compacted request shows nodes as "[lcm node N · rows #a-#b · depth d · ...]"; these tools
// reach every stored node and the original rows under it, also after a switch to another strategy.
export const lcmMemoryExtension = {
  name: 'lcm-memory',
  kind: 'memory',
  defaultEnabled: true,
  requires: [],
  description: "keeps LCM's stored summaries readable after a switch and provides the lcm_* tools",
  fold: lcmMemory,
  tools: [
    memoryTool({
      name: 'lcm_list',
      description: "List this session's stored summary nodes, including ones no longer shown in your context. " +
        'Each node has its id, depth (0 = leaf over transcript rows), the inclusive row range first_seq..last_seq, ' +
        'its child node ids, frontier (true when it has no parent), estimated_tokens and a preview of its summary. ' +
        'Nodes come in row order (children before their parent); total counts all of them. ' +
        'Page with offset and limit; continue from next_offset until it is null.',
      args: LcmListParams.omit({ session: true }),
      run: (args, cx) => listNodes(cx.db, { ...args, session: cx.session }),
    }),
    memoryTool({
      name: 'lcm_grep',
      description: 'Search for literal text (case-insensitive) in both the original transcript rows and the summaries of stored nodes. ' +
        'Returns two lists with their own total and next_offset: source (rows: seq, the leaf node covering that row or null ' +
        "when the row is not summarized, preview) and summaries (node, preview). Give node to search only that node's rows " +
        'and the summaries below it. offset applies to both lists; request the next page with the larger next_offset ' +
        'until both are null. Use it to find a detail a summary left out, then read it with lcm_expand or transcript_read.',
      args: LcmGrepParams.omit({ session: true }),
      run: (args, cx) => grepTree(cx.db, { ...args, session: cx.session }, cx.search),
    }),
    memoryTool({
      name: 'lcm_describe',
      description: 'Show one summary node in full: its depth, row range first_seq..last_seq, parent (null for a frontier node), ' +
        'ordered children and the whole summary text. Use it to walk the tree up or down from a node seen in ' +
        'your context, in lcm_list or in lcm_grep results.',
      args: LcmDescribeParams.omit({ session: true }),
      run: (args, cx) => describeNode(cx.db, { ...args, session: cx.session }),
    }),
    memoryTool({
      name: 'lcm_expand',
      description: 'Read the original transcript rows a node summarizes, rendered as "#<seq> <kind>" headers followed by their text. ' +
        'offset and limit count graphemes; continue from next_offset until it is null. Prefer expanding a leaf ' +
        '(depth 0, as lcm_grep names for each row) over a large parent.',
      args: LcmExpandParams.omit({ session: true }),
      run: (args, cx) => expandNode(cx.db, { ...args, session: cx.session }),
    }),
  ],
} as const satisfies ExtensionModule;
