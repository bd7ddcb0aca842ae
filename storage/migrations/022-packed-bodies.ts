// Migration 22: large row bodies are stored deflated (storage/transcript/row-body.ts). `packed` holds the
// deflated JSON of such a row, whose `body` is then ''; every other row keeps its JSON in `body`
// and `packed` NULL. Adding a nullable column rewrites nothing, so existing rows stay as they
// are (plain) and only rows written from now on are packed.
//
// The search triggers derive the row's text from its JSON, so they are recreated to read it
// through albedo_unpack when the row is packed, and to follow updates of `packed` too.

export const sql = `
ALTER TABLE transcript ADD COLUMN packed BLOB;
DROP TRIGGER transcript_fts_ai;
DROP TRIGGER transcript_fts_au;
CREATE TRIGGER transcript_fts_ai AFTER INSERT ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  INSERT INTO transcript_fts(rowid, text, sid) VALUES (new.seq, albedo_fold(albedo_row_text(new.seq,
    CASE WHEN new.packed IS NULL THEN new.body ELSE albedo_unpack(new.seq, new.packed) END, new.legacy_text)), new.sid);
  INSERT INTO search_rows(seq, sid, tail, chars) VALUES (new.seq, new.sid,
    albedo_fold_tail(albedo_row_text(new.seq, CASE WHEN new.packed IS NULL THEN new.body ELSE albedo_unpack(new.seq, new.packed) END, new.legacy_text)),
    albedo_fold_chars(albedo_row_text(new.seq, CASE WHEN new.packed IS NULL THEN new.body ELSE albedo_unpack(new.seq, new.packed) END, new.legacy_text)));
END;
CREATE TRIGGER transcript_fts_au AFTER UPDATE OF body, packed, legacy_text ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  DELETE FROM transcript_fts WHERE rowid = old.seq;
  INSERT INTO transcript_fts(rowid, text, sid) VALUES (new.seq, albedo_fold(albedo_row_text(new.seq,
    CASE WHEN new.packed IS NULL THEN new.body ELSE albedo_unpack(new.seq, new.packed) END, new.legacy_text)), new.sid);
  UPDATE search_rows SET
    tail = albedo_fold_tail(albedo_row_text(new.seq, CASE WHEN new.packed IS NULL THEN new.body ELSE albedo_unpack(new.seq, new.packed) END, new.legacy_text)),
    chars = albedo_fold_chars(albedo_row_text(new.seq, CASE WHEN new.packed IS NULL THEN new.body ELSE albedo_unpack(new.seq, new.packed) END, new.legacy_text))
  WHERE seq = new.seq;
END;
`;
