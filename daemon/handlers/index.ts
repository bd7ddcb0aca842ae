// The handler table: every method of protocol/methods.ts bound to its implementation.
// The type makes a missing method a compile error.
import type { HandlerTable } from '../context.ts';
import { daemonShutdown, daemonStatus, initialize, payloadGet } from './daemon-methods.ts';
import { command } from './command.ts';
import { compact, context, frames, prepare, usageReport } from './compaction.ts';
import { extensionsList, extensionsSelect, reload } from './extensions.ts';
import { lcmDescribe, lcmExpand, lcmGrep, lcmList } from './lcm.ts';
import { sessionDelete, sessionFork, sessionList, sessionOpen, sessionReturn } from './sessions.ts';
import { toolsCall, toolsList } from './tools.ts';
import { transcriptAppend, transcriptGrep, transcriptRead, transcriptRows } from './transcript.ts';

export const handlers: HandlerTable = {
  initialize,
  'session.open': sessionOpen,
  'session.list': sessionList,
  'session.delete': sessionDelete,
  'session.fork': sessionFork,
  'session.return': sessionReturn,
  'transcript.append': transcriptAppend,
  'transcript.rows': transcriptRows,
  transcript_read: transcriptRead,
  transcript_grep: transcriptGrep,
  lcm_list: lcmList,
  lcm_grep: lcmGrep,
  lcm_describe: lcmDescribe,
  lcm_expand: lcmExpand,
  'tools.list': toolsList,
  'tools.call': toolsCall,
  'payload.get': payloadGet,
  'daemon.status': daemonStatus,
  'daemon.shutdown': daemonShutdown,
  prepare,
  'usage.report': usageReport,
  compact,
  context,
  frames,
  'extensions.list': extensionsList,
  'extensions.select': extensionsSelect,
  reload,
  command,
};
