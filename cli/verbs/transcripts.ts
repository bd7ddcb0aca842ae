// Verbs that read stored transcripts: sessions, read, grep.
import { ago, n } from '../io.ts';
import { nonNegativeInt, positiveInt } from '../arguments.ts';
import type { VerbModule } from '../program.ts';

export const transcriptVerbs: VerbModule = (program, run) => {
  program
    .command('sessions')
    .description('list the stored sessions: rows, head seq, parent (for forks and imported subagents), workspace, age')
    .action(
      run(async ({ link, out }) => {
        const r = await link.call('session.list', {});
        const st = out.style;
        if (r.sessions.length === 0) return { json: r, text: st.dim('no sessions yet') };
        const width = Math.max(7, ...r.sessions.map((s) => s.session.length));
        const lines = [st.dim(`${'session'.padEnd(width)}  ${'rows'.padStart(8)}  ${'head'.padStart(9)}  created`)];
        for (const s of r.sessions) {
          const extra = [s.parent === null ? '' : `child of ${s.parent}`, s.workspace ?? '', s.agent === null ? '' : `via proxy: ${s.agent}`].filter((x) => x !== '').join(' · ');
          lines.push(`${st.bold(s.session.padEnd(width))}  ${n(s.rows).padStart(8)}  ${`#${s.head}`.padStart(9)}  ${ago(s.created_at)}${extra === '' ? '' : `  ${st.dim(extra)}`}`);
        }
        return { json: r, text: lines.join('\n') };
      }),
    );

  program
    .command('read')
    .description("print a session's transcript as the transcript_read tool renders it, paged in graphemes")
    .argument('[session]', 'the session (default --session or ALBEDO_SESSION)')
    .option('--offset <n>', 'first grapheme to print', nonNegativeInt)
    .option('--limit <n>', 'graphemes to print at most (default 20000)', positiveInt)
    .action(
      run(async (ctx, given: string | undefined, opts: { offset?: number; limit?: number }) => {
        const session = ctx.session(given);
        const r = await ctx.link.call('transcript_read', { session, offset: opts.offset, limit: opts.limit });
        const more = r.next_offset === null ? '' : `\n${ctx.out.style.dim(`[… continue with: albedo read ${session} --offset ${r.next_offset}]`)}`;
        return { json: r, text: `${r.text}${more}` };
      }),
    );

  program
    .command('grep')
    .description('search transcripts for literal text (Unicode case-insensitive): one session, else every session')
    .argument('<pattern...>', 'the text to find (several words are one pattern)')
    .option('--workspace <dir>', 'only sessions opened with this workspace')
    .option('--offset <n>', 'matching rows to skip', nonNegativeInt)
    .option('--limit <n>', 'matching rows to show (at most 500, default 50)', positiveInt)
    .action(
      run(async (ctx, words: string[], opts: { workspace?: string; offset?: number; limit?: number }) => {
        const pattern = words.join(' ');
        const r = await ctx.link.call('transcript_grep', { pattern, session: ctx.maybeSession(), workspace: opts.workspace, offset: opts.offset, limit: opts.limit });
        const st = ctx.out.style;
        const lines = [`${n(r.total)} matching row(s)`];
        for (const m of r.matches) lines.push(`${st.cyan(m.session)} ${st.dim(`#${m.seq}`)}  ${m.preview}`);
        if (r.next_offset !== null) lines.push(st.dim(`[… more with --offset ${r.next_offset}]`));
        return { json: r, text: lines.join('\n') };
      }),
    );
};
