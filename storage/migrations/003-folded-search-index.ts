// Migration 3: the trigram index holds folded text (storage/search/fold.ts through the albedo_fold SQL
// function) and is case-sensitive. A phrase query for fold(pattern) then matches exactly the
// rows whose folded text contains it, in every script, so search needs no special cases and
// can count matches without reading row text. The index is rebuilt in the background.

export const sql = `
DROP TRIGGER transcript_fts_ai;
DROP TRIGGER transcript_fts_ad;
DROP TRIGGER transcript_fts_au;
DROP TABLE transcript_fts;
CREATE VIRTUAL TABLE transcript_fts USING fts5(
  text, content='', contentless_delete=1, tokenize='trigram case_sensitive 1'
);
UPDATE search_index_state SET indexed_through = 0 WHERE id = 1;
CREATE TRIGGER transcript_fts_ai AFTER INSERT ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  INSERT INTO transcript_fts(rowid, text) VALUES (new.seq, albedo_fold(new.text));
END;
CREATE TRIGGER transcript_fts_ad AFTER DELETE ON transcript
  WHEN old.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  DELETE FROM transcript_fts WHERE rowid = old.seq;
END;
CREATE TRIGGER transcript_fts_au AFTER UPDATE OF text ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  DELETE FROM transcript_fts WHERE rowid = old.seq;
  INSERT INTO transcript_fts(rowid, text) VALUES (new.seq, albedo_fold(new.text));
END;
`;
