// tools.list and tools.call: the memory tools the session's enabled extensions provide, as JSON
// schemas for the model and invoked with the session bound. Definitions live with the
// extensions (strategies/extensions/tools.ts); each tool is also an RPC method of its own.
import { z } from 'zod';
import { AlbedoError } from '../../protocol/errors.ts';
import { LcmDescribeParams, LcmExpandParams, LcmGrepParams, LcmListParams, TranscriptGrepParams, TranscriptReadParams } from '../../protocol/methods.ts';
import { requireSession } from '../../storage/sessions.ts';
import { enabledMemoryTools, toolSpec, type MemoryTool } from '../../strategies/extensions/tools.ts';
import type { CallContext, Handler } from '../context.ts';
import { resolveExtensions } from '../engine.ts';
import { lcmDescribe, lcmExpand, lcmGrep, lcmList } from './lcm.ts';
import { transcriptGrep, transcriptRead } from './transcript.ts';

/** How each tool runs: the RPC handler of the same name, with the session bound. */
const runners: Record<string, (args: Record<string, unknown>, session: string, ctx: CallContext) => Promise<unknown>> = {
  transcript_read: async (args, session, ctx) => transcriptRead(TranscriptReadParams.parse({ ...args, session }), ctx),
  transcript_grep: async (args, session, ctx) => transcriptGrep(TranscriptGrepParams.parse({ ...args, session }), ctx),
  lcm_list: async (args, session, ctx) => lcmList(LcmListParams.parse({ ...args, session }), ctx),
  lcm_grep: async (args, session, ctx) => lcmGrep(LcmGrepParams.parse({ ...args, session }), ctx),
  lcm_describe: async (args, session, ctx) => lcmDescribe(LcmDescribeParams.parse({ ...args, session }), ctx),
  lcm_expand: async (args, session, ctx) => lcmExpand(LcmExpandParams.parse({ ...args, session }), ctx),
};

function sessionTools(ctx: CallContext, session: string | undefined): MemoryTool[] {
  const sid = session === undefined ? undefined : requireSession(ctx.daemon.db, session).sid;
  return enabledMemoryTools(resolveExtensions(ctx.daemon.db, ctx.daemon.config(), sid).enabled);
}

export const toolsList: Handler<'tools.list'> = (params, ctx) => ({
  tools: sessionTools(ctx, params.session).map(toolSpec),
});

export const toolsCall: Handler<'tools.call'> = async (params, ctx) => {
  const tool = sessionTools(ctx, params.session).find((t) => t.name === params.name);
  const run = runners[params.name];
  if (tool === undefined || run === undefined) {
    throw new AlbedoError('unknown_tool', `no enabled tool "${params.name}" in this session`, { tool: params.name });
  }
  const args = tool.args.safeParse(params.arguments);
  if (!args.success) {
    throw new AlbedoError('invalid_tool_arguments', `invalid arguments for ${tool.name}: ${z.prettifyError(args.error).replaceAll('\n', '; ')}`, {
      tool: tool.name,
    });
  }
  return { name: tool.name, result: await run(args.data, params.session, ctx) };
};
