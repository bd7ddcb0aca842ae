// Installs the pinned real agent CLIs (Claude Code, pi, Codex) into the git-ignored `.agents/`
// folder at the repo root and runs them non-interactively against a given base URL, each in a
// scratch HOME. What answers them (a scripted upstream, the proxy) is the caller's.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Where the agents are installed: `<repo>/.agents` (git-ignored). */
export const agentsDir = path.join(root, '.agents');

/** The pinned packages, name -> exact version. */
export const pinnedAgents = {
  '@anthropic-ai/claude-code': '2.1.332',
  '@mariozechner/pi-coding-agent': '0.73.1',
  '@openai/codex': '0.171.0',
} as const;

export interface AgentBinaries {
  /** The `claude` executable (Claude Code ships a native binary). */
  claude: string;
  /** pi's `dist/cli.js`, runnable as an executable (it has a node shebang). */
  pi: string;
  /** Codex's `bin/codex.js` launcher (it runs the native binary its platform package ships). */
  codex: string;
}

export interface EnsureAgentsResult extends AgentBinaries {
  /** False when the pinned versions were already installed and nothing ran. */
  installed: boolean;
  /** Wall time of the npm install in ms (0 when cached). */
  installMs: number;
}

function installedVersion(name: string): string | null {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(agentsDir, 'node_modules', name, 'package.json'), 'utf8')) as {
      version?: unknown;
    };
    return typeof pkg.version === 'string' ? pkg.version : null;
  } catch {
    return null;
  }
}

function binaries(): AgentBinaries {
  return {
    claude: path.join(agentsDir, 'node_modules', '@anthropic-ai', 'claude-code', 'bin', 'claude.exe'),
    pi: path.join(agentsDir, 'node_modules', '@mariozechner', 'pi-coding-agent', 'dist', 'cli.js'),
    codex: path.join(agentsDir, 'node_modules', '@openai', 'codex', 'bin', 'codex.js'),
  };
}

/** True when both pinned versions are installed and the claude binary is the real one (runs). */
function cached(): boolean {
  for (const [name, version] of Object.entries(pinnedAgents)) {
    if (installedVersion(name) !== version) return false;
  }
  const bins = binaries();
  if (!fs.existsSync(bins.pi) || !fs.existsSync(bins.codex)) return false;
  const probe = spawnSync(bins.claude, ['--version'], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, DISABLE_TELEMETRY: '1' } });
  return probe.status === 0 && probe.stdout.includes(pinnedAgents['@anthropic-ai/claude-code']);
}

/** A cross-process lock (mkdir is atomic) so that two test processes do not install at once. */
async function withLock<T>(fn: () => Promise<T>): Promise<T> {
  fs.mkdirSync(agentsDir, { recursive: true });
  const lock = path.join(agentsDir, '.install-lock');
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // A lock older than an install can take is a crashed installer's.
      const made = fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs;
      if (made !== undefined && Date.now() - made > 15 * 60_000) fs.rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock}`);
      await sleep(500);
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

/**
 * Installs the pinned agents into `.agents/` unless they are there already, and returns the
 * binaries. `log` receives npm's output lines (default: discarded).
 */
export async function ensureAgents(opts: { log?: (line: string) => void } = {}): Promise<EnsureAgentsResult> {
  if (cached()) return { ...binaries(), installed: false, installMs: 0 };
  return withLock(async () => {
    if (cached()) return { ...binaries(), installed: false, installMs: 0 };
    const manifest = {
      name: 'albedo-test-agents',
      private: true,
      description: 'Real agent CLIs for the e2e tests; written by test/support/agents.ts',
      dependencies: { ...pinnedAgents },
      // Claude Code's postinstall puts the platform's native binary in place of bin/claude.exe.
      // pi's dependencies' scripts are not needed (koffi ships prebuilt binaries).
      allowScripts: { '@anthropic-ai/claude-code': true, '@google/genai': false, protobufjs: false, koffi: false },
    };
    fs.writeFileSync(path.join(agentsDir, 'package.json'), JSON.stringify(manifest, null, 2) + '\n');
    const start = Date.now();
    // Asynchronous, so a test process keeps serving its other tests meanwhile.
    const res = await run('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--loglevel=warn'], {
      cwd: agentsDir,
      env: { ...(process.env as Record<string, string>) },
      timeoutMs: 10 * 60_000,
    });
    const installMs = Date.now() - start;
    for (const line of `${res.stdout}${res.stderr}`.split('\n')) if (line) opts.log?.(line);
    if (res.code !== 0 || !cached()) {
      throw new Error(
        `npm install in ${agentsDir} failed (exit ${res.code}${res.timedOut ? ', timed out' : ''}):\n${res.stderr.slice(-4000)}`,
      );
    }
    return { ...binaries(), installed: true, installMs };
  });
}

export interface AgentRun {
  /** Exit code; null when killed (see timedOut). */
  code: number | null;
  stdout: string;
  stderr: string;
  /** Wall time in ms. */
  ms: number;
  timedOut: boolean;
}

interface SpawnOpts {
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
}

/** The few variables a CLI needs from the caller's environment; nothing of a parent agent's. */
function baseEnv(home: string): Record<string, string> {
  // The agent's temp directory inside its scratch HOME, which the test removes: Claude Code
  // keeps a folder per working directory under $TMPDIR/claude-<uid>, and with the system's
  // /tmp every run of the suite left its folders there.
  const tmp = path.join(home, 'tmp');
  fs.mkdirSync(tmp, { recursive: true });
  return { HOME: home, PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', TERM: 'dumb', TMPDIR: tmp };
}

/** Runs a command in its own process group; on timeout kills the whole group. */
function run(command: string, args: string[], opts: SpawnOpts): Promise<AgentRun> {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const killGroup = (): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, opts.timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      // Tool subprocesses the agent left behind go with it.
      killGroup();
      resolve({ code, stdout, stderr, ms: Date.now() - start, timedOut });
    });
  });
}

export interface RunClaudeOptions {
  /** ANTHROPIC_BASE_URL: the upstream's or the proxy's URL (a path prefix is kept). */
  baseUrl: string;
  apiKey: string;
  /** A scratch HOME (Claude Code writes ~/.claude there). */
  home: string;
  cwd: string;
  prompt: string;
  /** `--model`; default: Claude Code's own (claude-opus-5-5 in 2.1.332). */
  model?: string;
  /** Extra environment, applied last. */
  env?: Record<string, string>;
  /** Default 5 minutes. */
  timeoutMs?: number;
}

/** `claude -p PROMPT --dangerously-skip-permissions --output-format json` against baseUrl. */
export async function runClaude(opts: RunClaudeOptions): Promise<AgentRun> {
  const { claude } = await ensureAgents();
  fs.mkdirSync(opts.home, { recursive: true });
  const args = ['-p', opts.prompt, '--dangerously-skip-permissions', '--output-format', 'json'];
  if (opts.model) args.push('--model', opts.model);
  return run(claude, args, {
    cwd: opts.cwd,
    timeoutMs: opts.timeoutMs ?? 5 * 60_000,
    env: {
      ...baseEnv(opts.home),
      ANTHROPIC_BASE_URL: opts.baseUrl,
      ANTHROPIC_API_KEY: opts.apiKey,
      IS_SANDBOX: '1',
      DISABLE_TELEMETRY: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      ...opts.env,
    },
  });
}

export interface RunPiOptions {
  /** The provider's baseUrl in models.json (a path prefix is kept). */
  baseUrl: string;
  apiKey: string;
  /** A scratch HOME; `$HOME/.pi/agent/models.json` is written there. */
  home: string;
  cwd: string;
  prompt: string;
  /** The model id the provider lists (e.g. claude-sonnet-4-5). */
  model: string;
  /** The model's contextWindow in models.json (default 200000); pi compacts by it. */
  contextWindow?: number;
  /** The model's maxTokens (default 8192). */
  maxTokens?: number;
  /** The provider's wire (default anthropic-messages). */
  api?: 'anthropic-messages' | 'openai-completions' | 'openai-responses';
  env?: Record<string, string>;
  /** Default 5 minutes. */
  timeoutMs?: number;
}

/** `pi --provider up --model M -p PROMPT` with an `up` provider of api `opts.api`. */
export async function runPi(opts: RunPiOptions): Promise<AgentRun> {
  const { pi } = await ensureAgents();
  const agentDir = path.join(opts.home, '.pi', 'agent');
  fs.mkdirSync(agentDir, { recursive: true });
  const models = {
    providers: {
      up: {
        baseUrl: opts.baseUrl,
        api: opts.api ?? 'anthropic-messages',
        apiKey: opts.apiKey,
        models: [{ id: opts.model, contextWindow: opts.contextWindow ?? 200_000, maxTokens: opts.maxTokens ?? 8192 }],
      },
    },
  };
  fs.writeFileSync(path.join(agentDir, 'models.json'), JSON.stringify(models, null, 2) + '\n');
  // pi runs on the Node running the tests (it supports >=20.6), not whichever `node` PATH has.
  return run(process.execPath, [pi, '--provider', 'up', '--model', opts.model, '-p', opts.prompt], {
    cwd: opts.cwd,
    timeoutMs: opts.timeoutMs ?? 5 * 60_000,
    env: { ...baseEnv(opts.home), PI_OFFLINE: '1', PI_SKIP_VERSION_CHECK: '1', PI_TELEMETRY: '0', ...opts.env },
  });
}

export interface RunCodexOptions {
  /** The provider's `base_url` in config.toml, ending in /v1 (a path prefix is kept). */
  baseUrl: string;
  apiKey: string;
  /** A scratch HOME; `$HOME/.codex/config.toml` is written there. */
  home: string;
  cwd: string;
  prompt: string;
  /** Default gpt-5.5. */
  model?: string;
  /** Extra `-c key=value` overrides, after the config file. */
  overrides?: string[];
  env?: Record<string, string>;
  /** Default 5 minutes. */
  timeoutMs?: number;
}

/**
 * `codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox PROMPT` with a
 * `model_providers.up` entry of `wire_api = "responses"` pointing at baseUrl.
 */
export async function runCodex(opts: RunCodexOptions): Promise<AgentRun> {
  const { codex } = await ensureAgents();
  const codexHome = path.join(opts.home, '.codex');
  fs.mkdirSync(codexHome, { recursive: true });
  const model = opts.model ?? 'gpt-5.5';
  const toml = [
    `model = ${JSON.stringify(model)}`,
    'model_provider = "up"',
    '[model_providers.up]',
    'name = "up"',
    `base_url = ${JSON.stringify(opts.baseUrl)}`,
    'wire_api = "responses"',
    'env_key = "OPENAI_API_KEY"',
    '',
  ].join('\n');
  fs.writeFileSync(path.join(codexHome, 'config.toml'), toml);
  const args = [codex, 'exec', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox', ...(opts.overrides ?? []).flatMap((o) => ['-c', o]), opts.prompt];
  return run(process.execPath, args, {
    cwd: opts.cwd,
    timeoutMs: opts.timeoutMs ?? 5 * 60_000,
    env: { ...baseEnv(opts.home), CODEX_HOME: codexHome, OPENAI_API_KEY: opts.apiKey, ...opts.env },
  });
}
