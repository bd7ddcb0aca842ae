// tools.list and tools.call: the memory tools the session's enabled extensions provide, as JSON
// schemas for the model and invoked with the session bound. Each tool, and how it runs, is
// defined in its extension's folder (strategies/*/extension.ts); each is also an RPC method of
// its own (lcm.ts, transcript.ts), which calls the same storage function.
import { z } from 'zod';
import { AlbedoError } from '../../protocol/errors.ts';
import { requireSession } from '../../storage/transcript/sessions.ts';
import { enabledMemoryTools, toolSpec } from '../../strategies/extensions/tools.ts';
import type { MemoryTool } from '../../strategies/index.ts';
import type { CallContext, Handler } from '../context.ts';
import { resolveExtensions } from '../engine-setup.ts';

function sessionTools(ctx: CallContext, session: string | undefined): MemoryTool[] {
  const sid = session === undefined ? undefined : requireSession(ctx.daemon.db, session).sid;
  const config = ctx.daemon.config();
  return enabledMemoryTools(config.modules, resolveExtensions(ctx.daemon.db, config, sid).enabled);
}

export const toolsList: Handler<'tools.list'> = (params, ctx) => ({
  tools: sessionTools(ctx, params.session).map(toolSpec),
});

export const toolsCall: Handler<'tools.call'> = async (params, ctx) => {
  const tool = sessionTools(ctx, params.session).find((t) => t.name === params.name);
  if (tool === undefined) {
    throw new AlbedoError('unknown_tool', `no enabled tool "${params.name}" in this session`, { tool: params.name });
  }
  const args = tool.args.safeParse(params.arguments);
  if (!args.success) {
    throw new AlbedoError('invalid_tool_arguments', `invalid arguments for ${tool.name}: ${z.prettifyError(args.error).replaceAll('\n', '; ')}`, {
      tool: tool.name,
    });
  }
  // In the session's transcript lane, as the RPC methods of the same names run: a page never
  // mixes the states before and after a settle, and none waits behind a prepare's model call.
  const { daemon } = ctx;
  const result = await daemon.kernels.run(
    params.session,
    () => tool.run(args.data, { db: daemon.db, session: params.session, search: daemon.search.searches }),
    'transcript',
  );
  return { name: tool.name, result };
};
