// The text snapcompact archives: evicted transcript rows as the harness's normalized event lines
// (summary-text.ts: markers, `→ name(k = v)` calls, image markers, the per-kind caps), with
// reasoning items left out, since the archive is what the model reads back verbatim and provider
// reasoning is not part of the conversation it should quote. Capability notices are omitted by
// the shared format already. Storing the text and cutting it into frames are for others.
import type { StoredRow } from '../../protocol/rows.ts';
import { summaryText } from '../harness/summary-text.ts';

/** The archive text of `rows`, oldest first: one event per line. '' when no row has a line. */
export function archiveText(rows: readonly StoredRow[]): string {
  return summaryText(rows, { reasoning: false });
}
