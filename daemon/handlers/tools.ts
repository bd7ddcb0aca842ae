// The memory tools a model may call, described as JSON schemas for `tools.list` and invoked
// through `tools.call`. Each tool is the RPC method of the same name with the session bound.
import { z } from 'zod';
import { AlbedoError } from '../../protocol/errors.ts';
import { TranscriptGrepParams, TranscriptReadParams } from '../../protocol/methods.ts';
import { requireSession } from '../../storage/sessions.ts';
import type { CallContext, Handler } from '../context.ts';
import { transcriptGrep, transcriptRead } from './transcript.ts';

interface ToolDef {
  name: string;
  description: string;
  args: z.ZodType<Record<string, unknown>>;
  run(args: Record<string, unknown>, session: string, ctx: CallContext): Promise<unknown>;
}

const readArgs = TranscriptReadParams.omit({ session: true });
const grepArgs = TranscriptGrepParams.omit({ session: true, workspace: true });

const tools: readonly ToolDef[] = [
  {
    name: 'transcript_read',
    description:
      'Read this session\'s full transcript, including history that compaction summarized or dropped. ' +
      'Rows render as "#<seq> <kind>" headers followed by their text. offset and limit count graphemes; ' +
      'continue from next_offset until it is null.',
    args: readArgs,
    run: async (args, session, ctx) =>
      transcriptRead(TranscriptReadParams.parse({ ...args, session }), ctx),
  },
  {
    name: 'transcript_grep',
    description:
      'Search this session\'s full transcript for literal text (case-insensitive). Returns the total number ' +
      'of matching rows and one page of matches with their seq and a preview; read around a match with ' +
      'transcript_read from_seq/to_seq.',
    args: grepArgs,
    run: async (args, session, ctx) =>
      transcriptGrep(TranscriptGrepParams.parse({ ...args, session }), ctx),
  },
];

export const toolsList: Handler<'tools.list'> = (params, { daemon }) => {
  requireSession(daemon.db, params.session);
  return {
    tools: tools.map((t) => ({
      name: t.name,
      description: t.description,
      input_schema: z.toJSONSchema(t.args, { io: 'input' }) as Record<string, unknown>,
    })),
  };
};

export const toolsCall: Handler<'tools.call'> = async (params, ctx) => {
  const tool = tools.find((t) => t.name === params.name);
  if (!tool) throw new AlbedoError('unknown_tool', `unknown tool "${params.name}"`, { tool: params.name });
  const args = tool.args.safeParse(params.arguments);
  if (!args.success) {
    throw new AlbedoError('invalid_tool_arguments', `invalid arguments for ${tool.name}: ${z.prettifyError(args.error)}`, {
      tool: tool.name,
    });
  }
  return { name: tool.name, result: await tool.run(args.data, params.session, ctx) };
};
