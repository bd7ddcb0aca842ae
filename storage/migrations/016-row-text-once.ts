// Migration 16: a row's text is stored once, as its body. transcript.text repeated what
// storage/transcript/row-text.ts derives from the body (~40% of the row table); it is dropped, and every
// reader derives the text through albedo_row_text (ROW_TEXT_SQL), the search triggers included.
// A row whose stored text differs from today's derivation (the body no longer decodes, or it was
// written by a rowText that rendered differently, such as deep tool-call arguments stored before
// the nesting bound) keeps that text in legacy_text, so every read, grep hit and fingerprint stays
// byte for byte what it was; new rows leave it NULL.
//
// Cost on a large file: the comparison derives every row's text once (JSON parse, validation,
// rendering: tens of microseconds a row), and DROP COLUMN rewrites every row of the table in this
// one transaction, so the WAL grows by about the size of the new table until the next checkpoint.
// The pages the text occupied become free pages inside the file: later appends reuse them before
// the file grows, so the file stops growing until they are used up. It only shrinks with a
// VACUUM (a full copy of the file, which needs that much free disk and holds the write lock), so
// none runs here; the free bytes show in `daemon.status` as free_bytes.

export const sql = `
DROP TRIGGER transcript_fts_ai;
DROP TRIGGER transcript_fts_au;
ALTER TABLE transcript ADD COLUMN legacy_text TEXT;
UPDATE transcript SET legacy_text = text WHERE text IS NOT albedo_derived_text(seq, body);
ALTER TABLE transcript DROP COLUMN text;
CREATE TRIGGER transcript_fts_ai AFTER INSERT ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  INSERT INTO transcript_fts(rowid, text, sid) VALUES (new.seq, albedo_fold(albedo_row_text(new.seq, new.body, new.legacy_text)), new.sid);
  INSERT INTO search_rows(seq, sid, tail, chars) VALUES (new.seq, new.sid,
    albedo_fold_tail(albedo_row_text(new.seq, new.body, new.legacy_text)), albedo_fold_chars(albedo_row_text(new.seq, new.body, new.legacy_text)));
END;
-- The text changes only with the body or the kept text (image elision rewrites the body).
CREATE TRIGGER transcript_fts_au AFTER UPDATE OF body, legacy_text ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  DELETE FROM transcript_fts WHERE rowid = old.seq;
  INSERT INTO transcript_fts(rowid, text, sid) VALUES (new.seq, albedo_fold(albedo_row_text(new.seq, new.body, new.legacy_text)), new.sid);
  UPDATE search_rows SET tail = albedo_fold_tail(albedo_row_text(new.seq, new.body, new.legacy_text)),
    chars = albedo_fold_chars(albedo_row_text(new.seq, new.body, new.legacy_text)) WHERE seq = new.seq;
END;
`;
