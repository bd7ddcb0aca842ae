// The snapcompact extensions: the strategy, and snapcompact-memory, which keeps the frame archive
// readable as folds after a switch and gives the model the transcript tools over the whole
// stored history.
import { TranscriptGrepParams, TranscriptReadParams } from '../../protocol/methods.ts';
import { grep } from '../../storage/search/grep.ts';
import { readTranscript } from '../../storage/transcript/read.ts';
import { memoryTool, type ExtensionModule } from '../extensions/module.ts';
import { snapcompactMemory } from './memory.ts';
import { snapcompact } from './snapcompact.ts';

export const snapcompactExtension = {
  name: 'snapcompact',
  kind: 'strategy',
  defaultEnabled: false,
  requires: ['snapcompact-memory'],
  description: 'evicted history archived as rendered text frames a vision model reads, then the verbatim tail',
  settings: snapcompact.settings,
  strategy: snapcompact,
  tables: ['snapcompact_archive', 'snapcompact_text', 'snapcompact_frames'],
} as const satisfies ExtensionModule;

export const snapcompactMemoryExtension = {
  name: 'snapcompact-memory',
  kind: 'memory',
  defaultEnabled: true,
  requires: [],
  description: 'keeps the snapcompact archive readable after a switch and provides transcript_grep and transcript_read',
  fold: snapcompactMemory,
  tools: [
    memoryTool({
      name: 'transcript_read',
      description: "Read this session's full transcript, including history that compaction summarized or dropped. " +
        'Rows render as "#<seq> <kind>" headers followed by their text. offset and limit count graphemes; ' +
        'continue from next_offset until it is null.',
      args: TranscriptReadParams.omit({ session: true }),
      run: (args, cx) => readTranscript(cx.db, { ...args, session: cx.session }),
    }),
    memoryTool({
      name: 'transcript_grep',
      description: "Search this session's full transcript, including history that compaction summarized or dropped, " +
        'for literal text (case-insensitive). Returns the number of ' +
        'matching rows and one page of matches with their seq and a preview; read around a match with ' +
        'transcript_read from_seq/to_seq.',
      args: TranscriptGrepParams.omit({ session: true, workspace: true }),
      run: (args, cx) => grep(cx.db, { ...args, session: cx.session }, cx.search),
    }),
  ],
} as const satisfies ExtensionModule;
