// The read-only memory tools enabled extensions give the model: names, descriptions and input
// schemas (derived from the RPC param schemas, minus the session the daemon binds). Invoking
// them is the daemon's job (daemon/handlers/tools.ts).
import { z } from 'zod';
import { LcmDescribeParams, LcmExpandParams, LcmGrepParams, LcmListParams, TranscriptGrepParams, TranscriptReadParams } from '../../protocol/methods.ts';
import type { ToolSpec } from '../../protocol/prepared.ts';

export interface MemoryTool {
  /** The extension that provides the tool. */
  extension: string;
  name: string;
  description: string;
  args: z.ZodType<Record<string, unknown>>;
}

export const TRANSCRIPT_READ_ARGS = TranscriptReadParams.omit({ session: true });
export const TRANSCRIPT_GREP_ARGS = TranscriptGrepParams.omit({ session: true, workspace: true });
export const LCM_LIST_ARGS = LcmListParams.omit({ session: true });
export const LCM_GREP_ARGS = LcmGrepParams.omit({ session: true });
export const LCM_DESCRIBE_ARGS = LcmDescribeParams.omit({ session: true });
export const LCM_EXPAND_ARGS = LcmExpandParams.omit({ session: true });

export const MEMORY_TOOLS: readonly MemoryTool[] = [
  // lcm-memory: the summary tree. A compacted request shows nodes as
  // "[lcm node N · rows #a-#b · depth d · ...]"; these tools reach every stored node and the
  // original rows under it, also after a switch to another strategy.
  {
    extension: 'lcm-memory',
    name: 'lcm_list',
    description: "List this session's stored summary nodes, including ones no longer shown in your context. " +
      'Each node has its id, depth (0 = leaf over transcript rows), the inclusive row range first_seq..last_seq, ' +
      'its child node ids, frontier (true when it has no parent), estimated_tokens and a preview of its summary. ' +
      'Nodes come in row order (children before their parent); total counts all of them. ' +
      'Page with offset and limit; continue from next_offset until it is null.',
    args: LCM_LIST_ARGS,
  },
  {
    extension: 'lcm-memory',
    name: 'lcm_grep',
    description: 'Search for literal text (case-insensitive) in both the original transcript rows and the summaries of stored nodes. ' +
      'Returns two lists with their own total and next_offset: source (rows: seq, the leaf node covering that row or null ' +
      "when the row is not summarized, preview) and summaries (node, preview). Give node to search only that node's rows " +
      'and the summaries below it. offset applies to both lists; request the next page with the larger next_offset ' +
      'until both are null. Use it to find a detail a summary left out, then read it with lcm_expand or transcript_read.',
    args: LCM_GREP_ARGS,
  },
  {
    extension: 'lcm-memory',
    name: 'lcm_describe',
    description: 'Show one summary node in full: its depth, row range first_seq..last_seq, parent (null for a frontier node), ' +
      'ordered children and the whole summary text. Use it to walk the tree up or down from a node seen in ' +
      'your context, in lcm_list or in lcm_grep results.',
    args: LCM_DESCRIBE_ARGS,
  },
  {
    extension: 'lcm-memory',
    name: 'lcm_expand',
    description: 'Read the original transcript rows a node summarizes, rendered as "#<seq> <kind>" headers followed by their text. ' +
      'offset and limit count graphemes; continue from next_offset until it is null. Prefer expanding a leaf ' +
      '(depth 0, as lcm_grep names for each row) over a large parent.',
    args: LCM_EXPAND_ARGS,
  },
  {
    extension: 'snapcompact-memory',
    name: 'transcript_read',
    description: "Read this session's full transcript, including history that compaction summarized or dropped. " +
      'Rows render as "#<seq> <kind>" headers followed by their text. offset and limit count graphemes; ' +
      'continue from next_offset until it is null.',
    args: TRANSCRIPT_READ_ARGS,
  },
  {
    extension: 'snapcompact-memory',
    name: 'transcript_grep',
    description: "Search this session's full transcript, including history that compaction summarized or dropped, " +
      'for literal text (case-insensitive). Returns the number of ' +
      'matching rows and one page of matches with their seq and a preview; read around a match with ' +
      'transcript_read from_seq/to_seq.',
    args: TRANSCRIPT_GREP_ARGS,
  },
];

export function enabledMemoryTools(enabled: readonly string[]): MemoryTool[] {
  return MEMORY_TOOLS.filter((t) => enabled.includes(t.extension));
}

const specs = new Map<MemoryTool, ToolSpec>();

/** The tool as the model sees it. Built once per tool: the schemas never change at run time. */
export function toolSpec(t: MemoryTool): ToolSpec {
  let spec = specs.get(t);
  if (spec === undefined) {
    spec = { name: t.name, description: t.description, input_schema: z.toJSONSchema(t.args, { io: 'input' }) };
    specs.set(t, spec);
  }
  return spec;
}
