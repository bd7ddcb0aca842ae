// Verbs about the prepared request and its compaction: context, compact, extensions, and the
// slash forms agent UIs type (/compact, /context, /extensions, /reload), which go to the
// daemon's `command` method as typed. Whatever shows an observation shows it as the inspector.
import { methods, type Result } from '../../protocol/methods.ts';
import { Observation } from '../../protocol/prepared.ts';
import { renderContext } from '../context-view.ts';
import { EXIT_OK, EXIT_REFUSED, n, UsageError, type Output, type Report } from '../io.ts';
import type { VerbContext, VerbModule } from '../program.ts';

function inspector(out: Output, o: Observation): string {
  return renderContext(o, { style: out.style, columns: out.columns });
}

function compactReport(out: Output, r: Result<'compact'>): Report {
  const st = out.style;
  let head: string;
  if (r.plan !== null) {
    const p = r.plan;
    const range = p.evict_from_seq === null ? 'nothing' : `rows #${p.evict_from_seq}-#${p.evict_to_seq} (${n(p.evict_rows)} rows)`;
    head = `${st.bold('dry run')}: would evict ${range}, keep ${n(p.tail_rows)} tail rows · ~${n(p.estimated_tokens_before)} -> ~${n(p.estimated_tokens_after)} tokens`;
  } else if (r.compacted) head = st.green(`compacted with ${r.strategy ?? "the session's strategy"}`);
  else head = st.yellow(`not compacted: ${r.reason ?? 'nothing to do'}`);
  // A compaction that did nothing is a refusal for scripts; a dry run is not.
  return { json: r, text: `${head}\n\n${inspector(out, r.observation)}`, exitCode: r.compacted || r.plan !== null ? EXIT_OK : EXIT_REFUSED };
}

function extensionsText(out: Output, r: Result<'extensions.list'>): string {
  const st = out.style;
  const width = Math.max(9, ...r.extensions.map((e) => e.name.length));
  const lines = [`strategy ${r.strategy === null ? st.yellow('none') : st.bold(r.strategy)}`];
  for (const e of r.extensions) {
    const mark = e.enabled ? st.green('[x]') : '[ ]';
    const flags = [e.available ? '' : st.yellow('not in this build'), e.chosen_by === 'default' ? '' : st.dim(`by ${e.chosen_by}`)].filter((x) => x !== '').join(' ');
    lines.push(`${mark} ${e.name.padEnd(width)}  ${e.kind.padEnd(8)}  ${e.description}${flags === '' ? '' : `  ${flags}`}`);
  }
  return lines.join('\n');
}

/** `enable a b disable c` -> the two lists; a name before either word is a usage error. */
export function parseSelection(words: readonly string[]): { enable: string[]; disable: string[] } {
  const sel = { enable: [] as string[], disable: [] as string[] };
  let into: string[] | undefined;
  for (const w of words) {
    if (w === 'enable' || w === 'disable') into = sel[w];
    else if (w === 'list' && into === undefined) continue;
    else if (into === undefined) throw new UsageError(`"${w}": say enable or disable before extension names`, 'e.g. albedo extensions enable lcm disable rolling');
    else into.push(w);
  }
  return sel;
}

async function extensions(ctx: VerbContext, words: readonly string[]): Promise<Report> {
  const session = ctx.maybeSession();
  const sel = parseSelection(words);
  if (sel.enable.length === 0 && sel.disable.length === 0) {
    const r = await ctx.link.call('extensions.list', { session });
    return { json: r, text: extensionsText(ctx.out, r) };
  }
  const r = await ctx.link.call('extensions.select', { session, enable: sel.enable, disable: sel.disable });
  const list = await ctx.link.call('extensions.list', { session });
  const scope = session === undefined ? 'globally (written to extensions.json)' : `for session ${session}`;
  return { json: r, text: `${ctx.out.style.dim(`selected ${scope}`)}\n${extensionsText(ctx.out, list)}` };
}

/** A slash command as typed, sent to `command`; what comes back is rendered like the verb it maps to. */
async function slash(ctx: VerbContext, name: string, words: readonly string[]): Promise<Report> {
  const r = await ctx.link.call('command', { session: ctx.maybeSession(), line: [name, ...words].join(' ') });
  if (r.command === 'context') {
    const o = Observation.safeParse(r.result);
    if (o.success) return { json: r.result, text: inspector(ctx.out, o.data) };
  }
  if (r.command === 'compact') {
    const c = methods.compact.result.safeParse(r.result);
    if (c.success) return { ...compactReport(ctx.out, c.data), json: r.result };
  }
  return { json: r.result, text: r.text };
}

const SLASH = {
  '/compact': 'compact the session now: /compact [strategy] [focus…]',
  '/context': 'the prepared request and its compaction status',
  '/extensions': 'list or select extensions: /extensions [enable X…] [disable Y…]',
  '/reload': 're-read the configuration files',
} as const;

export const compactionVerbs: VerbModule = (program, run) => {
  program
    .command('context')
    .description("inspect the session's prepared request: the window by section, the estimate beside the provider's count, the last compaction, failures")
    .argument('[session]', 'the session (default --session or ALBEDO_SESSION)')
    .action(
      run(async (ctx, given: string | undefined) => {
        const r = await ctx.link.call('context', { session: ctx.session(given) });
        return { json: r.observation, text: inspector(ctx.out, r.observation) };
      }),
    );

  program
    .command('compact')
    .description('compact the session now, with its strategy or the one named first; the other words focus the summary')
    .argument('<session>', 'the session')
    .argument('[words...]', '[strategy] [focus…]: a first word that names a strategy picks it')
    .option('--strategy <name>', 'the strategy, without guessing from the first word')
    .option('--dry-run', 'say what would be evicted, writing nothing')
    .action(
      run(async (ctx, session: string, words: string[], opts: { strategy?: string; dryRun?: boolean }) => {
        let strategy = opts.strategy;
        let focusWords = words;
        if (strategy === undefined && words.length > 0) {
          const known = await ctx.link.call('extensions.list', { session });
          if (known.extensions.some((e) => e.kind === 'strategy' && e.name === words[0])) {
            strategy = words[0];
            focusWords = words.slice(1);
          }
        }
        const focus = focusWords.join(' ').trim();
        const r = await ctx.link.call('compact', { session, strategy, focus: focus === '' ? undefined : focus, dry_run: opts.dryRun === true });
        return compactReport(ctx.out, r);
      }),
    );

  program
    .command('extensions')
    .description('list the extensions, or enable and disable them (for --session S, else globally)')
    .argument('[words...]', '[enable X…] [disable Y…]')
    .action(run(async (ctx, words: string[]) => extensions(ctx, words)));

  for (const [name, description] of Object.entries(SLASH)) {
    program
      .command(name)
      .description(description)
      .argument('[words...]', 'the rest of the command line, as typed')
      .action(run(async (ctx, words: string[]) => slash(ctx, name, words)));
  }
  // Slash commands this CLI does not know yet go to the daemon as typed: it may know them.
  program.on('command:*', (operands: string[]) => {
    const [name = '', ...words] = operands;
    if (!name.startsWith('/')) return program.error(`error: unknown command '${name}'`, { code: 'commander.unknownCommand', exitCode: 2 });
    // Not awaited here: runCli awaits every started action (see buildProgram's settled()).
    void run(async (ctx) => slash(ctx, name, words))(program);
  });
};
