// The read-only memory tools enabled extensions give the model: names, descriptions and input
// schemas (derived from the RPC param schemas, minus the session the daemon binds). Invoking
// them is the daemon's job (daemon/handlers/tools.ts).
import { z } from 'zod';
import { TranscriptGrepParams, TranscriptReadParams } from '../../protocol/methods.ts';
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

export const MEMORY_TOOLS: readonly MemoryTool[] = [
  {
    extension: 'snapcompact-memory',
    name: 'transcript_read',
    description:
      "Read this session's full transcript, including history that compaction summarized or dropped. " +
      'Rows render as "#<seq> <kind>" headers followed by their text. offset and limit count graphemes; ' +
      'continue from next_offset until it is null.',
    args: TRANSCRIPT_READ_ARGS,
  },
  {
    extension: 'snapcompact-memory',
    name: 'transcript_grep',
    description:
      "Search this session's full transcript for literal text (case-insensitive). Returns the number of " +
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
