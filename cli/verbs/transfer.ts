// Transcripts in and out: `albedo export` and `albedo import`. The work lives in
// cli/transcript-files.ts and loads when one of these verbs runs: the importers are most of the
// CLI's code, and `albedo status` should not pay for parsing them.
import { FORMATS, IMPORT_FORMATS } from '../import/formats.ts';
import type { VerbModule } from '../program.ts';

export const transferVerbs: VerbModule = (program, run) => {
  program
    .command('export')
    .description('write a session as JSON lines of rows that transcript.append (and albedo import) take back; the rows go to stdout, or to --out with a summary (JSON with --json)')
    .argument('[session]', 'the session (default --session or ALBEDO_SESSION)')
    .option('-o, --out <file>', 'write to this file instead of stdout')
    .option('--image-refs', "keep images as hashes of this daemon's payloads instead of inlining their bytes")
    .action(
      run(async (ctx, given: string | undefined, opts: { out?: string; imageRefs?: boolean }) => {
        const files = await import('../transcript-files.ts');
        return files.exportSession(ctx, given, opts);
      }),
    );

  program
    .command('import')
    .description(`store a transcript file as a session: albedo export's rows, or ${FORMATS.join(', ')} (detected from the content); a Claude Code session's subagent files (<id>/subagents/agent-*.jsonl) come along as child sessions`)
    .argument('<file>', 'the transcript file')
    .option('--format <format>', `force the format (${IMPORT_FORMATS.join(', ')})`)
    .option('--dry-run', 'parse and check the whole file, store nothing')
    .action(
      run(async (ctx, file: string, opts: { format?: string; dryRun?: boolean }) => {
        const files = await import('../transcript-files.ts');
        return files.importFile(ctx, file, opts);
      }),
    );
};
