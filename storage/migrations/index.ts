// The ordered list of schema migrations. Append only: a released migration never changes.
import { sql as m001 } from './001-transcript.ts';
import { sql as m002 } from './002-engine.ts';
import { sql as m003 } from './003-folded-search-index.ts';
import { sql as m004 } from './004-rolling-rewrites.ts';
import { sql as m005 } from './005-row-graphemes.ts';
import { sql as m006 } from './006-reused-tool-call-ids.ts';
import { sql as m007 } from './007-cut-hints-and-token-ratios.ts';
import { sql as m008 } from './008-lcm-tree.ts';
import { sql as m009 } from './009-notes.ts';
import { sql as m010 } from './010-snapcompact.ts';
import { sql as m011 } from './011-session-prompts.ts';
import { sql as m012 } from './012-known-told.ts';
import { sql as m013 } from './013-image-fits.ts';
import { sql as m014 } from './014-image-elision.ts';
import { sql as m015 } from './015-full-fold-search.ts';
import { sql as m016 } from './016-row-text-once.ts';
import { sql as m017 } from './017-append-indexes.ts';
import { sql as m018 } from './018-search-tail-index.ts';
import { sql as m019 } from './019-read-blocks.ts';
import { sql as m020 } from './020-search-merge-in-idle-time.ts';
import { sql as m021 } from './021-snapcompact-archive-stamp.ts';
import { sql as m022 } from './022-packed-bodies.ts';
import { sql as m023 } from './023-idle-packing.ts';
import { sql as m024 } from './024-state-stamp.ts';
import { sql as m025 } from './025-summaries-indexed-after-commit.ts';
import { sql as m026 } from './026-summary-merge-in-idle-time.ts';
import { sql as m027 } from './027-known-told-instructions.ts';
import { sql as m028 } from './028-proxy-sessions.ts';
import { sql as m029 } from './029-proxy-accounting.ts';
import { sql as m030 } from './030-proxy-chain-stamp.ts';
import { sql as m031 } from './031-notes-ledger.ts';
import { sql as m032 } from './032-snapcompact-archive-parts.ts';
import { sql as m033 } from './033-snapcompact-part-lengths.ts';
import { sql as m034 } from './034-extension-schema.ts';
import { sql as m035 } from './035-snapcompact-part-marks.ts';

export interface Migration {
  /** Version number; migrations run in increasing order, each exactly once. */
  version: number;
  name: string;
  sql: string;
}

export const migrations: readonly Migration[] = [
  { version: 1, name: 'transcript', sql: m001 },
  { version: 2, name: 'engine', sql: m002 },
  { version: 3, name: 'folded-search-index', sql: m003 },
  { version: 4, name: 'rolling-rewrites', sql: m004 },
  { version: 5, name: 'row-graphemes', sql: m005 },
  { version: 6, name: 'reused-tool-call-ids', sql: m006 },
  { version: 7, name: 'cut-hints-and-token-ratios', sql: m007 },
  { version: 8, name: 'lcm-tree', sql: m008 },
  { version: 9, name: 'notes', sql: m009 },
  { version: 10, name: 'snapcompact', sql: m010 },
  { version: 11, name: 'session-prompts', sql: m011 },
  { version: 12, name: 'known-told', sql: m012 },
  { version: 13, name: 'image-fits', sql: m013 },
  { version: 14, name: 'image-elision', sql: m014 },
  { version: 15, name: 'full-fold-search', sql: m015 },
  { version: 16, name: 'row-text-once', sql: m016 },
  { version: 17, name: 'append-indexes', sql: m017 },
  { version: 18, name: 'search-tail-index', sql: m018 },
  { version: 19, name: 'read-blocks', sql: m019 },
  { version: 20, name: 'search-merge-in-idle-time', sql: m020 },
  { version: 21, name: 'snapcompact-archive-stamp', sql: m021 },
  { version: 22, name: 'packed-bodies', sql: m022 },
  { version: 23, name: 'idle-packing', sql: m023 },
  { version: 24, name: 'state-stamp', sql: m024 },
  { version: 25, name: 'summaries-indexed-after-commit', sql: m025 },
  { version: 26, name: 'summary-merge-in-idle-time', sql: m026 },
  { version: 27, name: 'known-told-instructions', sql: m027 },
  { version: 28, name: 'proxy-sessions', sql: m028 },
  { version: 29, name: 'proxy-accounting', sql: m029 },
  { version: 30, name: 'proxy-chain-stamp', sql: m030 },
  { version: 31, name: 'notes-ledger', sql: m031 },
  { version: 32, name: 'snapcompact-archive-parts', sql: m032 },
  { version: 33, name: 'snapcompact-part-lengths', sql: m033 },
  { version: 34, name: 'extension-schema', sql: m034 },
  { version: 35, name: 'snapcompact-part-marks', sql: m035 },
];
