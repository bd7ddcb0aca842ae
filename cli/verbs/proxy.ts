// Verbs for agents that speak their provider's HTTP API: `env` prints where the daemon's proxy
// is (base URLs carrying the home's secret token), `run` starts an agent with them in its
// environment only, never on a command line another local user could read.
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { CliError, EXIT_USAGE, UsageError } from '../io.ts';
import type { DaemonLink } from '../daemon-link.ts';
import type { VerbModule } from '../program.ts';

const osSignals: Readonly<Record<string, number>> = constants.signals;

/** The agents `env` and `run` know, and the wire each speaks. */
const AGENTS = { claude: 'anthropic', pi: 'anthropic', codex: 'openai', openai: 'openai' } as const;
type Agent = keyof typeof AGENTS;

function agentOf(name: string | undefined): Agent | undefined {
  if (name === undefined) return undefined;
  if (name in AGENTS) return name as Agent;
  throw new UsageError(`unknown agent "${name}" (known: ${Object.keys(AGENTS).join(', ')})`);
}

interface ProxyUrls {
  anthropic_base_url: string;
  openai_base_url: string;
}

/** The variables an agent reads its provider's base URL from. */
function exportsFor(agent: Agent | undefined, urls: ProxyUrls): Record<string, string> {
  const anthropic = { ANTHROPIC_BASE_URL: urls.anthropic_base_url };
  const openai = { OPENAI_BASE_URL: urls.openai_base_url };
  if (agent === undefined) return { ...anthropic, ...openai };
  return AGENTS[agent] === 'anthropic' ? anthropic : openai;
}

export const proxyVerbs: VerbModule = (program, run) => {
  const urls = async (link: DaemonLink): Promise<ProxyUrls> => {
    const { proxy } = await link.call('daemon.status', { storage_parts: false });
    if (!proxy.listening || proxy.anthropic_base_url === null || proxy.openai_base_url === null) {
      throw new CliError(`the daemon's proxy is not listening: ${proxy.error ?? 'unknown reason'}`, undefined, 'set ALBEDO_PROXY_PORT (or proxy.port in extensions.json) and restart the daemon');
    }
    return { anthropic_base_url: proxy.anthropic_base_url, openai_base_url: proxy.openai_base_url };
  };

  program
    .command('env')
    .description("print the exports that point an agent at the daemon's proxy (claude, pi: ANTHROPIC_BASE_URL; codex, openai: OPENAI_BASE_URL)")
    .argument('[agent]', `one of ${Object.keys(AGENTS).join(', ')}; all of them when omitted`)
    .action(
      run(async ({ link }, name?: string) => {
        const agent = agentOf(name);
        const u = await urls(link);
        const text = Object.entries(exportsFor(agent, u))
          .map(([k, v]) => `export ${k}=${v}`)
          .join('\n');
        return { json: u, text };
      }),
    );

  program
    .command('run')
    .description("run an agent with its provider's base URL pointed at the daemon's proxy; its arguments go to it unchanged (put -- before them if they look like albedo's own --json or --session)")
    .argument('<agent>', `one of ${Object.keys(AGENTS).join(', ')}`)
    .argument('[args...]', 'the agent\'s own arguments')
    .option('--bin <path>', 'the agent program (default: the agent\'s name, from PATH)')
    .allowUnknownOption()
    .action(
      run(async ({ link }, name: string, args: string[], opts: { bin?: string }) => {
        const agent = agentOf(name);
        if (agent === undefined) throw new UsageError('name the agent to run');
        const env = { ...process.env, ...exportsFor(agent, await urls(link)) };
        await link.close();
        const bin = opts.bin ?? agent;
        return await new Promise<number>((resolve, reject) => {
          const child = spawn(bin, args, { stdio: 'inherit', env });
          // The terminal's signals reach the agent (same process group); albedo only waits.
          const ignore = (): void => undefined;
          process.on('SIGINT', ignore);
          child.on('error', (err: NodeJS.ErrnoException) => {
            process.off('SIGINT', ignore);
            reject(err.code === 'ENOENT' ? new CliError(`${bin} was not found`, EXIT_USAGE, `install it, or pass --bin /path/to/${agent}`) : err);
          });
          child.on('exit', (code, signal) => {
            process.off('SIGINT', ignore);
            resolve(code ?? (signal === null ? 1 : 128 + (osSignals[signal] ?? 0)));
          });
        });
      }),
    );
};
