// The memory tools a session's extensions offer the model, for an operator: `tools` lists them
// (tools.list) and `tool <name> key=value…` runs one as the model would (tools.call). The list is
// read off the daemon, so every extension's tools are here without a verb of their own; lcm's
// also have friendlier renderings in verbs/lcm.ts.
import { UsageError } from '../io.ts';
import type { VerbModule } from '../program.ts';

/**
 * A tool's arguments from `key=value` words: a value that reads as JSON (a number, true, null,
 * a quoted string, an array or object) is that value, anything else is the text itself, so
 * `pattern=TODO limit=5` gives {"pattern":"TODO","limit":5}. The daemon checks them against the
 * tool's schema.
 */
function argumentsFromWords(words: readonly string[]): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const word of words) {
    const eq = word.indexOf('=');
    if (eq <= 0) throw new UsageError(`"${word}" is not key=value`, 'give each argument as name=value; albedo tools lists each tool with its argument names');
    const key = word.slice(0, eq);
    if (Object.hasOwn(args, key)) throw new UsageError(`argument "${key}" is given twice`);
    const raw = word.slice(eq + 1);
    let value: unknown = raw;
    try {
      value = JSON.parse(raw);
    } catch {
      // Not JSON: the text as typed.
    }
    args[key] = value;
  }
  return args;
}

/** The argument names a tool's JSON schema declares, optional ones marked with `?`. */
function argumentNames(schema: Record<string, unknown>): string[] {
  const properties = typeof schema.properties === 'object' && schema.properties !== null ? Object.keys(schema.properties) : [];
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  return properties.map((p) => (required.has(p) ? p : `${p}?`));
}

export const toolVerbs: VerbModule = (program, run) => {
  program
    .command('tools')
    .description("list the memory tools the session's extensions give the model (without a session: the global selection's)")
    .argument('[session]', 'the session (default --session or ALBEDO_SESSION)')
    .action(
      run(async (ctx, given: string | undefined) => {
        const r = await ctx.link.call('tools.list', { session: ctx.maybeSession(given) });
        const st = ctx.out.style;
        if (r.tools.length === 0) return { json: r, text: st.dim('no memory tools: no enabled extension offers one') };
        // The first sentence of each description: the whole one is in --json.
        const lines = r.tools.map((t) => `${st.bold(t.name)}(${argumentNames(t.input_schema).join(', ')})\n  ${st.dim(t.description.split(/(?<=\.)\s/)[0] ?? '')}`);
        return { json: r, text: lines.join('\n') };
      }),
    );

  program
    .command('tool')
    .description('run one memory tool on a session as the model would, and print its JSON result')
    .argument('<name>', 'the tool (albedo tools lists them)')
    .argument('[arguments...]', 'its arguments as name=value (a value that reads as JSON is taken as JSON)')
    .action(
      run(async (ctx, name: string, words: string[]) => {
        const args = argumentsFromWords(words);
        const r = await ctx.link.call('tools.call', { session: ctx.session(), name, arguments: args });
        return { json: r, text: JSON.stringify(r.result, null, 2) };
      }),
    );
};
