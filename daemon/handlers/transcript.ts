// Transcript methods: append, row pages, literal grep and grapheme-paged reads. They run in the
// session's transcript lane: reads queue behind its appends so a page never mixes two states
// of a settle, and none of them waits behind a prepare's model call.
import { rowsAfter } from '../../storage/transcript/history.ts';
import { grep } from '../../storage/search/grep.ts';
import { readTranscript } from '../../storage/transcript/read.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import type { Handler } from '../context.ts';

export const transcriptAppend: Handler<'transcript.append'> = (params, { daemon }) =>
  daemon.kernels.run(params.session, async () => {
    const appended = await appendRows(daemon.db, params.session, params.rows, {
      maxImageBytes: daemon.settings.maxImageBytes,
    });
    daemon.rowsAdded();
    return { seqs: appended.seqs, head: appended.head };
  }, 'transcript');

export const transcriptRows: Handler<'transcript.rows'> = (params, { daemon }) => daemon.kernels.run(params.session, () => rowsAfter(daemon.db, params.session, params.after, params.limit), 'transcript');

export const transcriptRead: Handler<'transcript_read'> = (params, { daemon }) => daemon.kernels.run(params.session, () => readTranscript(daemon.db, params), 'transcript');

/** A session-scoped search queues on its session; a cross-session one runs on its own. */
export const transcriptGrep: Handler<'transcript_grep'> = (params, { daemon }) => {
  const run = () => grep(daemon.db, params, daemon.search.searches);
  return params.session === undefined ? run() : daemon.kernels.run(params.session, run, 'transcript');
};
