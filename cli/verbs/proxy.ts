// Verbs for agents that speak their provider's HTTP API: `env` prints where the daemon's proxy
// is (base URLs carrying the home's secret token; for Codex a model provider whose header
// carries it), `run` starts an agent with them in its environment only, never on a command
// line another local user could read.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
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

/** The base URLs with `/run/<id>` after the token: requests of that run are bound to it. */
function inRun(urls: ProxyUrls, run: string): ProxyUrls {
  const put = (url: string): string => {
    const u = new URL(url);
    const [, token, ...rest] = u.pathname.split('/');
    u.pathname = `/${token ?? ''}/run/${run}/${rest.join('/')}`;
    return u.toString().replace(/\/$/, '');
  };
  return { anthropic_base_url: put(urls.anthropic_base_url), openai_base_url: put(urls.openai_base_url) };
}

/** The variable Codex reads the proxy's token from (its `env_http_headers` sends it as `x-albedo-token`). */
const TOKEN_ENV = 'ALBEDO_PROXY_TOKEN';
/** The name of the model provider albedo adds to Codex's configuration. */
const CODEX_PROVIDER = 'albedo';

/** Codex's view of the proxy: the OpenAI base URL without the token, and the token for a header. */
interface CodexTarget {
  base_url: string;
  token: string;
  /** An API key in OPENAI_API_KEY; else Codex's own sign-in (ChatGPT) is used. */
  auth: 'api-key' | 'chatgpt';
}

function codexTarget(urls: ProxyUrls, env: NodeJS.ProcessEnv): CodexTarget {
  const u = new URL(urls.openai_base_url);
  const [, token, ...rest] = u.pathname.split('/');
  if (token === undefined || token === '') throw new CliError(`the proxy's OpenAI base URL has no token: ${urls.openai_base_url}`);
  u.pathname = `/${rest.join('/')}`;
  return { base_url: u.toString().replace(/\/$/, ''), token, auth: env.OPENAI_API_KEY !== undefined && env.OPENAI_API_KEY !== '' ? 'api-key' : 'chatgpt' };
}

/** The `model_providers` entry, as `key = TOML value` pairs (config.toml lines, or `-c` overrides). */
function codexProvider(t: CodexTarget): Array<[string, string]> {
  return [
    ['name', JSON.stringify(CODEX_PROVIDER)],
    ['base_url', JSON.stringify(t.base_url)],
    ['wire_api', '"responses"'],
    // An API key is read from the environment; a ChatGPT sign-in is Codex's own login.
    t.auth === 'api-key' ? ['env_key', '"OPENAI_API_KEY"'] : ['requires_openai_auth', 'true'],
    ['env_http_headers', `{ "x-albedo-token" = ${JSON.stringify(TOKEN_ENV)} }`],
  ];
}

/** What `albedo env codex` prints: the token's export, then the config.toml entry as comments (so `eval` is safe). */
function codexText(t: CodexTarget, raw: boolean): string {
  const toml = [`model_provider = ${JSON.stringify(CODEX_PROVIDER)}`, '', `[model_providers.${CODEX_PROVIDER}]`, ...codexProvider(t).map(([k, v]) => `${k} = ${v}`)];
  if (raw) return toml.join('\n');
  return [
    `export ${TOKEN_ENV}=${t.token}`,
    `# add to ~/.codex/config.toml (or run: albedo run codex [ARGS...], which changes no file);`,
    `# ${t.auth === 'api-key' ? 'OPENAI_API_KEY is set: the key goes upstream' : 'no OPENAI_API_KEY: Codex signs in as it does now (ChatGPT); see docs/proxy.md for the upstream'}`,
    ...toml.map((l) => (l === '' ? '#' : `#   ${l}`)),
  ].join('\n');
}

/** `-c` overrides that make Codex use the proxy for this run only. */
function codexOverrides(t: CodexTarget): string[] {
  return [`model_provider=${JSON.stringify(CODEX_PROVIDER)}`, ...codexProvider(t).map(([k, v]) => `model_providers.${CODEX_PROVIDER}.${k}=${v}`)].flatMap((o) => ['-c', o]);
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
    .description("print what points an agent at the daemon's proxy (claude, pi: ANTHROPIC_BASE_URL; openai: OPENAI_BASE_URL; codex: a model provider for ~/.codex/config.toml and the token it sends)")
    .argument('[agent]', `one of ${Object.keys(AGENTS).join(', ')}; all of them when omitted`)
    .option('--toml', 'codex only: print just the config.toml entry, uncommented (the token stays in $ALBEDO_PROXY_TOKEN)')
    .action(
      run(async ({ link, io }, name: string | undefined, opts: { toml?: boolean }) => {
        const agent = agentOf(name);
        if (opts.toml === true && agent !== 'codex') throw new UsageError('--toml is for `albedo env codex`');
        const u = await urls(link);
        if (agent === 'codex') {
          const t = codexTarget(u, io.env);
          return { json: { ...u, codex: { ...t, token_env: TOKEN_ENV, provider: CODEX_PROVIDER, config_toml: codexText(t, true) } }, text: codexText(t, opts.toml === true) };
        }
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
    .argument('[args...]', "the agent's own arguments")
    .option('--bin <path>', "the agent program (default: the agent's name, from PATH)")
    .allowUnknownOption()
    .action(
      run(async ({ link, io }, name: string, args: string[], opts: { bin?: string }) => {
        const agent = agentOf(name);
        if (agent === undefined) throw new UsageError('name the agent to run');
        // The run's id goes in the agent's base URLs and its environment: `albedo mcp`, started by
        // the agent with that environment, finds the run's session by it.
        const runId = randomBytes(6).toString('hex');
        const u = inRun(await urls(link), runId);
        let env: NodeJS.ProcessEnv = { ...io.env, ALBEDO_RUN: runId, ...exportsFor(agent, u) };
        let argv = args;
        if (agent === 'codex') {
          // Codex takes its provider from config.toml; overrides for this run leave the file as it is.
          const t = codexTarget(u, io.env);
          env = { ...io.env, ALBEDO_RUN: runId, [TOKEN_ENV]: t.token };
          argv = [...codexOverrides(t), ...args];
        }
        await link.close();
        const bin = opts.bin ?? agent;
        return await new Promise<number>((resolve, reject) => {
          const child = spawn(bin, argv, { stdio: 'inherit', env });
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
