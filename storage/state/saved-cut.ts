// The saved form of a compaction cut, as strategies store it in a JSON column: counts and
// fingerprints that still mean the same place after provider projection, settling and
// restarts. What the fields mean and how a cut is located is strategies/harness/cut.ts.
import { z } from 'zod';

export const SavedCut = z.strictObject({
  format: z.literal(2),
  /** User inputs (row_class 'user') before the unit the cut opens on. */
  users: z.number().int().nonnegative(),
  /** Chained hash of those inputs' stored text. */
  fingerprint: z.string(),
  /** Image-fit notices after the last counted user input, before that unit (0 when absent). */
  fits: z.number().int().nonnegative().optional(),
  /** Exchanges of that unit that lie before the cut (0 or absent: a whole-unit cut). */
  exchanges: z.number().int().nonnegative().optional(),
  /** Chained digest of those exchanges' rows (present when `exchanges` > 0). */
  exchange_fingerprint: z.string().optional(),
  /** Rows of the session before that unit when the cut was saved (absent in older saves). */
  rows: z.number().int().nonnegative().optional(),
});
export type SavedCut = z.infer<typeof SavedCut>;

/** Where a saved cut was found when it was saved: hints, re-checked before use. */
export interface CutHints {
  /** Seq of the row that opens the cut's unit (head + 1 when the cut is past every row). */
  openerSeq: number;
  /** First seq of the verbatim rows after the opener (= openerSeq for a whole-unit cut). */
  resumeSeq: number;
}

/**
 * A cut read back from its JSON column with `schema` (SavedCut, or a union with older formats),
 * or why this build cannot read it; callers ignore such a state until it is replaced.
 */
export function readCut<T>(text: string, schema: z.ZodType<T>): { cut: T } | { unreadable: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { unreadable: 'its cut is not JSON' };
  }
  const cut = schema.safeParse(json);
  if (!cut.success) return { unreadable: `its cut has a format this build does not know (${z.prettifyError(cut.error).split('\n')[0] ?? ''})` };
  return { cut: cut.data };
}
