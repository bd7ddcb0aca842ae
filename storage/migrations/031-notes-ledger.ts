// Migration 31: the notes layer's artifact ledger (strategies/notes/ledger.ts), saved with the
// notes it shares a cut with: the files, commands and test runs read off the tool calls of the
// history the notes cover. JSON, checked with zod when the layer reads it back; NULL before the
// first compaction that writes one.

export const sql = `
ALTER TABLE compaction_notes ADD COLUMN ledger TEXT;
`;
