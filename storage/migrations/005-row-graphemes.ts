// Migration 5: each row's rendered grapheme count (storage/transcript/graphemes.ts), covered by the
// session index, so transcript_read skips to a deep offset without reading row text. Rows
// written before this migration keep NULL and are counted from their text when read; anything
// that changes a row's text must update its count too.

export const sql = `
ALTER TABLE transcript ADD COLUMN graphemes INTEGER;
DROP INDEX transcript_session;
CREATE INDEX transcript_session ON transcript(sid, seq, graphemes);
`;
