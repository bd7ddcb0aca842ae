// The `albedo` command line on commander: global options, the verbs (each module in
// cli/verbs/ adds its own), and one way from a verb's outcome to output and an exit code.
// Usage mistakes exit 2, a daemon's refusal 1, success 0; help and --version exit 0.
import { Command, CommanderError, Option } from 'commander';
import { packageVersion } from '../protocol/version.ts';
import { DaemonLink } from './daemon-link.ts';
import { CliError, EXIT_OK, EXIT_USAGE, Output, UsageError, type Io, type Report } from './io.ts';
import { verbModules } from './verbs/index.ts';

/** What a verb's action is handed. */
export interface VerbContext {
  out: Output;
  link: DaemonLink;
  io: Io;
  /** The session named on the command line, else --session, else ALBEDO_SESSION; usage error without one. */
  session(given?: string): string;
  /** The same, but optional (verbs that also work across sessions). */
  maybeSession(given?: string): string | undefined;
}

export type Action<A extends unknown[]> = (ctx: VerbContext, ...args: A) => Promise<Report | number>;

/** A module of verbs: adds its commands to the program, wrapping each action with `run`. */
export type VerbModule = (program: Command, run: <A extends unknown[]>(action: Action<A>) => (...args: unknown[]) => Promise<void>) => void;

interface GlobalOptions {
  json?: boolean;
  session?: string;
}

/**
 * The program, and `settled()`: every action started, awaited. Commander awaits the actions it
 * dispatches, but not the ones a listener starts (unknown slash commands, see verbs/compaction.ts).
 */
export function buildProgram(io: Io, setExit: (code: number) => void): { program: Command; settled: () => Promise<unknown> } {
  const started: Array<Promise<void>> = [];
  const program = new Command('albedo')
    .description('Operate albedod: inspect sessions and their context, compact, search, import and export transcripts.')
    .version(packageVersion(), '-V, --version')
    .addOption(new Option('--json', 'print the result as JSON (every verb)'))
    .addOption(new Option('-s, --session <id>', 'the session, for verbs that take one (default $ALBEDO_SESSION)'))
    .showHelpAfterError('(run albedo --help, or albedo <verb> --help)')
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    // Every verb's --help lists --json and --session too; verbs inherit this from the program.
    .configureHelp({ showGlobalOptions: true })
    .exitOverride()
    .addHelpText(
      'after',
      `
The socket is $ALBEDO_SOCKET, else albedod.sock in $ALBEDO_HOME (default ~/.albedo).
albedo never starts a daemon: run albedod (or npm start in a checkout).
Exit status: 0 done, 1 the daemon said no (or is not running), 2 usage.
Slash forms work as agent UIs type them: albedo --session S /compact [strategy] [focus…],
/context, /extensions [enable X…|disable Y…], /reload.`,
    );

  const run = <A extends unknown[]>(action: Action<A>) => (...args: unknown[]): Promise<void> => {
    const p = perform(action, args);
    started.push(p);
    return p;
  };
  const perform = async <A extends unknown[]>(action: Action<A>, args: unknown[]): Promise<void> => {
    // commander passes the positional arguments, then the verb's options, then the command.
    const command = args[args.length - 1] as Command;
    const globals = command.optsWithGlobals<GlobalOptions>();
    const out = new Output(io, globals.json === true);
    const link = new DaemonLink(io.env);
    // The environment comes from `io`, not commander's Option.env (which reads process.env).
    const maybeSession = (given?: string) => given ?? globals.session ?? (io.env.ALBEDO_SESSION || undefined);
    const ctx: VerbContext = {
      out,
      link,
      io,
      maybeSession,
      session(given) {
        const s = maybeSession(given);
        if (s === undefined || s === '') throw new UsageError(`${command.name()} needs a session`, 'name it as an argument, with --session, or in ALBEDO_SESSION; list them with: albedo sessions');
        return s;
      },
    };
    try {
      const r = await action(ctx, ...(args.slice(0, -1) as A));
      setExit(typeof r === 'number' ? r : out.report(r));
    } catch (err) {
      if (err instanceof CliError) setExit(out.error(err));
      else throw err;
    } finally {
      await link.close();
    }
  };

  for (const add of verbModules) add(program, run);
  return { program, settled: () => Promise.all(started) };
}

/** Runs the CLI on `argv` (without node and the script); resolves with the exit code. */
export async function runCli(argv: string[], io: Io): Promise<number> {
  let code = EXIT_OK;
  const { program, settled } = buildProgram(io, (c) => (code = c));
  if (argv.length === 0) {
    program.outputHelp({ error: true });
    return EXIT_USAGE;
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
    await settled();
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and --version are not failures; every other commander error is about the command line.
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return EXIT_OK;
      return err.code === 'commander.help' && err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    }
    const out = new Output(io, argv.includes('--json'));
    return out.error(new CliError(`unexpected failure: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`));
  }
  return code;
}
