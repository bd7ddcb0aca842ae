// The CLI's line to a running albedod: connects to the socket the environment names, and turns
// every way a call can fail into a CliError that says what happened and what to do. It never
// starts a daemon: a CLI that quietly started one would pick a home and settings the user did
// not choose.
import { AlbedoClient } from '../protocol/client.ts';
import { resolvePaths } from '../protocol/home-paths.ts';
import type { MethodName, ParamsIn, Result } from '../protocol/methods.ts';
import { RpcRemoteError } from '../protocol/rpc-message.ts';
import { packageVersion } from '../protocol/version.ts';
import { CliError, EXIT_USAGE } from './io.ts';

/** What to try next, by the daemon's stable error code. */
const HINTS: Record<string, string> = {
  unknown_session: 'list the sessions with: albedo sessions',
  unknown_strategy: 'list the strategies with: albedo extensions',
  unknown_extension: 'list the extensions with: albedo extensions',
  unknown_command: 'the slash commands are /compact, /context, /extensions and /reload',
  invalid_params: "see the verb's --help",
  busy: 'the daemon is at its limit of requests in flight; try again shortly',
  shutting_down: 'the daemon is stopping; start it again with: albedod',
  summarizer_failed: 'see albedo context <session> and the daemon log ($ALBEDO_HOME/albedod.log)',
  invalid_config: 'fix the file named above; albedo status lists configuration errors',
};

/** Daemon refusals that are about how the command was typed, so exit as usage errors. */
const USAGE_CODES = new Set(['invalid_params', 'unknown_command']);

export class DaemonLink {
  private client: AlbedoClient | undefined;
  readonly socket: string;
  readonly home: string;

  constructor(env: NodeJS.ProcessEnv) {
    const paths = resolvePaths(env);
    this.socket = paths.socket;
    this.home = paths.home;
  }

  private async connect(): Promise<AlbedoClient> {
    if (this.client !== undefined) return this.client;
    try {
      this.client = await AlbedoClient.connect(this.socket, { client: { name: 'albedo-cli', version: packageVersion() } });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ECONNREFUSED') {
        throw new CliError(
          `no albedod is running for home ${this.home} (nothing answers at ${this.socket})`,
          undefined,
          'start it with: albedod (in a checkout: npm start); set ALBEDO_HOME or ALBEDO_SOCKET if it runs elsewhere',
        );
      }
      if (code === 'EACCES') throw new CliError(`permission denied on ${this.socket}`, undefined, "the socket belongs to another user; run albedo as the daemon's user");
      throw new CliError(`cannot reach albedod at ${this.socket}: ${errorText(err)}`);
    }
    return this.client;
  }

  async call<M extends MethodName>(method: M, params: ParamsIn<M>): Promise<Result<M>> {
    const client = await this.connect();
    try {
      return await client.call(method, params);
    } catch (err) {
      throw asCliError(err, method);
    }
  }

  /** Runs `fn` with the connected client, for the client's own helpers (allRows); failures as CliErrors. */
  async with<T>(what: string, fn: (client: AlbedoClient) => Promise<T>): Promise<T> {
    const client = await this.connect();
    try {
      return await fn(client);
    } catch (err) {
      throw asCliError(err, what);
    }
  }

  async close(): Promise<void> {
    await this.client?.close();
    this.client = undefined;
  }
}

/** The daemon's refusal as a CliError: its message, its code in brackets, and a hint. */
export function asCliError(err: unknown, method: string): CliError {
  if (err instanceof CliError) return err;
  if (err instanceof RpcRemoteError) {
    const data = (err.data ?? {}) as { code?: unknown; issues?: unknown };
    const code = typeof data.code === 'string' ? data.code : undefined;
    const issues = Array.isArray(data.issues)
      ? (data.issues as Array<{ path?: unknown; message?: unknown }>).map((i) => `${Array.isArray(i.path) ? i.path.join('.') : ''}: ${String(i.message)}`)
      : [];
    const message = `${err.message}${issues.length === 0 ? '' : ` (${issues.join('; ')})`}${code === undefined ? '' : ` [${code}]`}`;
    return new CliError(message, code !== undefined && USAGE_CODES.has(code) ? EXIT_USAGE : undefined, code === undefined ? undefined : HINTS[code]);
  }
  return new CliError(`${method} failed: ${errorText(err)}`);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
