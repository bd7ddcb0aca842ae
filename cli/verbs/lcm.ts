// lcm's summary tree, for an operator: `albedo lcm list|describe|expand|grep`, the lcm-memory
// tools' own methods with the session filled in.
import { n } from '../io.ts';
import { nonNegativeInt, positiveInt } from '../arguments.ts';
import type { VerbModule } from '../program.ts';

export const lcmVerbs: VerbModule = (program, run) => {
  const lcm = program.command('lcm').description("lcm's summary tree: list, describe, expand or search its nodes");

  lcm
    .command('list')
    .description('every stored node of the session, frontier or not, in source order')
    .argument('[session]', 'the session (default --session or ALBEDO_SESSION)')
    .option('--offset <n>', 'nodes to skip', nonNegativeInt)
    .option('--limit <n>', 'nodes to show', positiveInt)
    .action(
      run(async (ctx, given: string | undefined, opts: { offset?: number; limit?: number }) => {
        const r = await ctx.link.call('lcm_list', { session: ctx.session(given), offset: opts.offset, limit: opts.limit });
        const st = ctx.out.style;
        if (r.total === 0) return { json: r, text: st.dim('no lcm nodes in this session') };
        const lines = [st.dim(`${n(r.total)} node(s)`)];
        for (const x of r.nodes) {
          const mark = x.frontier ? st.green('frontier') : st.dim('below');
          lines.push(`${st.bold(`node ${x.node}`)}  #${x.first_seq}-#${x.last_seq}  depth ${x.depth}  ${mark}  ~${n(x.estimated_tokens)} tokens  ${x.preview}`);
        }
        if (r.next_offset !== null) lines.push(st.dim(`[… more with --offset ${r.next_offset}]`));
        return { json: r, text: lines.join('\n') };
      }),
    );

  lcm
    .command('describe')
    .description("a node's rows, depth, parent, children and whole summary")
    .argument('<node>', 'the node id', positiveInt)
    .argument('[session]', 'the session (default --session or ALBEDO_SESSION)')
    .action(
      run(async (ctx, node: number, given: string | undefined) => {
        const r = await ctx.link.call('lcm_describe', { session: ctx.session(given), node });
        const head = `node ${r.node} · rows #${r.first_seq}-#${r.last_seq} · depth ${r.depth} · ${r.frontier ? 'frontier' : `parent ${r.parent ?? '-'}`} · children ${r.children.length === 0 ? 'none' : r.children.join(', ')} · by ${
          r.backend ?? 'unknown'
        }`;
        return { json: r, text: `${ctx.out.style.bold(head)}\n\n${r.summary}` };
      }),
    );

  lcm
    .command('expand')
    .description('the original rows a node stands for, as transcript_read renders them, paged in graphemes')
    .argument('<node>', 'the node id', positiveInt)
    .argument('[session]', 'the session (default --session or ALBEDO_SESSION)')
    .option('--offset <n>', 'first grapheme to print', nonNegativeInt)
    .option('--limit <n>', 'graphemes to print at most', positiveInt)
    .action(
      run(async (ctx, node: number, given: string | undefined, opts: { offset?: number; limit?: number }) => {
        const session = ctx.session(given);
        const r = await ctx.link.call('lcm_expand', { session, node, offset: opts.offset, limit: opts.limit });
        const more = r.next_offset === null ? '' : `\n${ctx.out.style.dim(`[… continue with: albedo lcm expand ${node} ${session} --offset ${r.next_offset}]`)}`;
        return { json: r, text: `${r.text}${more}` };
      }),
    );

  lcm
    .command('grep')
    .description('literal text in the rows and the summaries of the tree (Unicode case-insensitive)')
    .argument('<pattern>', 'the text to find')
    .argument('[session]', 'the session (default --session or ALBEDO_SESSION)')
    .option('--node <id>', "only that node's rows and subtree", positiveInt)
    .action(
      run(async (ctx, pattern: string, given: string | undefined, opts: { node?: number }) => {
        const r = await ctx.link.call('lcm_grep', { session: ctx.session(given), pattern, node: opts.node });
        const st = ctx.out.style;
        const lines = [`${n(r.source.total)} matching row(s), ${n(r.summaries.total)} matching summar${r.summaries.total === 1 ? 'y' : 'ies'}`];
        for (const m of r.source.matches) lines.push(`${st.dim(`#${m.seq}`)} ${m.node === null ? st.dim('(uncovered)') : st.cyan(`node ${m.node}`)}  ${m.preview}`);
        for (const m of r.summaries.matches) lines.push(`${st.cyan(`node ${m.node}`)} ${st.dim('summary')}  ${m.preview}`);
        return { json: r, text: lines.join('\n') };
      }),
    );
};
