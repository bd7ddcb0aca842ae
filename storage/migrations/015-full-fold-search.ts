// Migration 15: search folds case fully (storage/search/fold.ts), so both trigram indexes are rebuilt
// with the new fold: the summaries' at once (triggers fill it), the rows' by the background
// indexer from an empty cursor. The row index now keeps each row's session (an unindexed
// column the index stores itself), so a search lists (seq, session) pairs without touching
// transcript rows, and search_rows keeps, per indexed row, what answers patterns too short for
// trigrams: its distinct folded characters, and its last two (a two-character pattern is in a
// row when some trigram starts with it or the row ends with it). Rows above the cursor are
// scanned as before.

export const sql = `
DROP TRIGGER transcript_fts_ai;
DROP TRIGGER transcript_fts_ad;
DROP TRIGGER transcript_fts_au;
DROP TABLE transcript_fts;
CREATE VIRTUAL TABLE transcript_fts USING fts5(
  text, sid UNINDEXED, content='', contentless_delete=1, contentless_unindexed=1,
  tokenize='trigram case_sensitive 1'
);
-- The index's terms with the rows they occur in: two-character patterns read it by term range.
CREATE VIRTUAL TABLE transcript_fts_terms USING fts5vocab(transcript_fts, instance);
CREATE TABLE search_rows (
  seq INTEGER PRIMARY KEY,
  sid INTEGER NOT NULL,
  tail TEXT NOT NULL,
  chars TEXT NOT NULL
) STRICT;
UPDATE search_index_state SET indexed_through = 0 WHERE id = 1;
CREATE TRIGGER transcript_fts_ai AFTER INSERT ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  INSERT INTO transcript_fts(rowid, text, sid) VALUES (new.seq, albedo_fold(new.text), new.sid);
  INSERT INTO search_rows(seq, sid, tail, chars) VALUES (new.seq, new.sid, albedo_fold_tail(new.text), albedo_fold_chars(new.text));
END;
CREATE TRIGGER transcript_fts_ad AFTER DELETE ON transcript
  WHEN old.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  DELETE FROM transcript_fts WHERE rowid = old.seq;
  DELETE FROM search_rows WHERE seq = old.seq;
END;
CREATE TRIGGER transcript_fts_au AFTER UPDATE OF text ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  DELETE FROM transcript_fts WHERE rowid = old.seq;
  INSERT INTO transcript_fts(rowid, text, sid) VALUES (new.seq, albedo_fold(new.text), new.sid);
  UPDATE search_rows SET tail = albedo_fold_tail(new.text), chars = albedo_fold_chars(new.text) WHERE seq = new.seq;
END;

DELETE FROM lcm_summary_fts;
INSERT INTO lcm_summary_fts(rowid, summary) SELECT node, albedo_fold(summary) FROM lcm_nodes;
`;
