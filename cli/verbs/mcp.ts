// `albedo mcp`: the session's memory tools as a stdio MCP server, for agents that load MCP
// servers (`claude mcp add albedo -- albedo mcp`, Codex's `[mcp_servers.albedo]`). The tools
// are the daemon's (tools.list, tools.call over the socket); this verb only finds the session
// and speaks MCP. Under `albedo run` the agent's environment names the run (ALBEDO_RUN), and
// the session is the run's newest proxy session, looked up at each call: the agent starts its
// MCP servers before its first request, when the session does not exist yet.
import { packageVersion } from '../../protocol/version.ts';
import { CliError, EXIT_OK } from '../io.ts';
import type { DaemonLink } from '../daemon-link.ts';
import type { VerbModule } from '../program.ts';

/** How `albedo mcp` finds its session: a run's newest proxy session, or one named. */
type Target = { run: string } | { session: string };

/** The newest session of the run, if the proxy has seen one. */
async function runSession(link: DaemonLink, run: string): Promise<string | undefined> {
  const { sessions } = await link.call('session.list', {});
  return sessions.filter((s) => s.run === run).at(-1)?.session;
}

async function noSessionError(link: DaemonLink): Promise<CliError> {
  const { sessions } = await link.call('session.list', {});
  const recent = sessions
    .filter((s) => s.agent !== null)
    .slice(-5)
    .reverse()
    .map((s) => `${s.session} (${s.agent ?? ''})`);
  const listed = recent.length === 0 ? 'the proxy has no sessions yet' : `recent proxy sessions: ${recent.join(', ')}`;
  return new CliError(`albedo mcp needs a session: ${listed}`, undefined, 'run the agent with `albedo run`, or pass --session NAME (or set ALBEDO_SESSION)');
}

export const mcpVerbs: VerbModule = (program, run) => {
  program
    .command('mcp')
    .description("serve the session's memory tools (transcript_grep, lcm_expand, ...) as a stdio MCP server; under `albedo run` the session is the run's, else --session or ALBEDO_SESSION")
    .action(
      run(async (ctx) => {
        const { link, io } = ctx;
        const named = ctx.maybeSession();
        const runId = io.env.ALBEDO_RUN !== undefined && io.env.ALBEDO_RUN !== '' ? io.env.ALBEDO_RUN : undefined;
        const target: Target | undefined = runId !== undefined ? { run: runId } : named !== undefined ? { session: named } : undefined;
        if (target === undefined) throw await noSessionError(link);
        const session = async (): Promise<string | undefined> => ('session' in target ? target.session : runSession(link, target.run));
        if ('session' in target) await link.call('tools.list', { session: target.session });

        // Loaded here: the other verbs do not pay for the SDK at start.
        const [{ Server }, { StdioServerTransport }, { CallToolRequestSchema, ListToolsRequestSchema }] = await Promise.all([
          import('@modelcontextprotocol/sdk/server/index.js'),
          import('@modelcontextprotocol/sdk/server/stdio.js'),
          import('@modelcontextprotocol/sdk/types.js'),
        ]);
        // Requests still being answered when the client closes stdin finish first.
        const pending = new Set<Promise<unknown>>();
        const track = <T>(p: Promise<T>): Promise<T> => {
          pending.add(p);
          // The SDK answers p's own rejection; this branch only forgets it.
          void p.then(() => pending.delete(p), () => pending.delete(p));
          return p;
        };
        const server = new Server({ name: 'albedo', version: packageVersion() }, { capabilities: { tools: {} } });
        server.setRequestHandler(ListToolsRequestSchema, () => track(listTools()));
        server.setRequestHandler(CallToolRequestSchema, (req) => track(callTool(req.params.name, req.params.arguments)));
        async function listTools() {
          const s = await session();
          // Before the run's first request the global selection's tools stand in.
          const { tools } = await link.call('tools.list', s === undefined ? {} : { session: s });
          return { tools: tools.map((t) => ({ name: t.name, description: t.description, inputSchema: { type: 'object' as const, ...t.input_schema } })) };
        }
        const waitingFor = 'run' in target ? `run ${target.run}` : `session ${target.session}`;
        async function callTool(name: string, args: Record<string, unknown> | undefined) {
          const s = await session();
          if (s === undefined) return { content: [{ type: 'text' as const, text: `no session yet for ${waitingFor}: the agent has sent no request through the proxy` }], isError: true };
          try {
            const { result } = await link.call('tools.call', { session: s, name, arguments: args ?? {} });
            return { content: [{ type: 'text' as const, text: JSON.stringify(result) }] };
          } catch (err) {
            return { content: [{ type: 'text' as const, text: (err as Error).message }], isError: true };
          }
        }
        const transport = new StdioServerTransport();
        const closed = new Promise<void>((resolve) => {
          transport.onclose = () => resolve();
          process.stdin.on('end', () => resolve());
        });
        await server.connect(transport);
        await closed;
        while (pending.size > 0) await Promise.allSettled([...pending]);
        // The answers are written by the transport after the handlers settle.
        await new Promise((resolve) => setImmediate(resolve));
        await server.close();
        return EXIT_OK;
      }),
    );
};
