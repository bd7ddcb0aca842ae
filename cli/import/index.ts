// Imports another agent's transcript file: detects the format from the content (the path's
// extension only breaks a tie), dispatches to the format's importer, and checks every row
// against the wire schema, so what comes back can go to `transcript.append` as it is.
import { RowIn } from '../../protocol/rows.ts';
import { importClaudeCode, looksLikeClaudeCode } from './claude-code.ts';
import { importCodex, looksLikeCodex } from './codex.ts';
import { FORMATS, ImportError, isObject, jsonlLines, type ImportedTranscript, type ImportFormat, type Json } from './common.ts';
import { importPi, looksLikePi } from './pi.ts';
import { importSweAgent, looksLikeSweAgent } from './swe-agent.ts';

export { importClaudeCode } from './claude-code.ts';
export { importCodex } from './codex.ts';
export { FORMATS, ImportError, rowCounts, type ImportedTranscript, type ImportFormat } from './common.ts';
export { importPi } from './pi.ts';
export { importSweAgent } from './swe-agent.ts';

const IMPORTERS: Record<ImportFormat, (text: string) => ImportedTranscript> = {
  'claude-code': importClaudeCode,
  codex: importCodex,
  pi: importPi,
  'swe-agent': importSweAgent,
};

/** The first records of a JSONL text that parse (detection only; the importer checks every line). */
function firstRecords(text: string, n: number): Json[] {
  const out: Json[] = [];
  for (const { raw } of jsonlLines(text)) {
    if (out.length >= n) break;
    try {
      const v: unknown = JSON.parse(raw);
      if (isObject(v)) out.push(v);
    } catch {
      // a pretty-printed document or a broken line: not JSONL evidence
    }
  }
  return out;
}

/** The format of a transcript's text, or null when it is none of the known ones. */
export function detectFormat(text: string, path?: string): ImportFormat | null {
  const head = text.trimStart();
  if (head.startsWith('{') && (path?.endsWith('.traj') || !/^\{[^\n]*\}\s*\n\s*\{/.test(head))) {
    try {
      if (looksLikeSweAgent(JSON.parse(text))) return 'swe-agent';
    } catch {
      // JSONL, not one document
    }
  }
  const recs = firstRecords(text, 200);
  if (recs.length === 0) return null;
  if (looksLikeCodex(recs)) return 'codex';
  if (looksLikePi(recs)) return 'pi';
  if (looksLikeClaudeCode(recs)) return 'claude-code';
  return null;
}

/**
 * Parses a transcript file's text into wire rows. `format` forces the importer; otherwise it
 * is detected. Throws ImportError for an unknown format or a malformed line.
 */
export function importTranscript(text: string, opts: { path?: string; format?: ImportFormat } = {}): ImportedTranscript {
  const format = opts.format ?? detectFormat(text, opts.path);
  if (format === null) throw new ImportError(`unknown transcript format${opts.path === undefined ? '' : ` (${opts.path})`}; known: ${FORMATS.join(', ')}`);
  const out = IMPORTERS[format](text);
  out.rows.forEach((r, i) => {
    const parsed = RowIn.safeParse(r);
    if (!parsed.success) throw new ImportError(`row ${i} (${r.kind}) is not a valid wire row: ${parsed.error.issues.map((x) => `${x.path.join('.')}: ${x.message}`).join('; ')}`);
  });
  return out;
}
