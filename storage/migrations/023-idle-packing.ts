// Migration 23: long bodies still stored as text (rows from before migration 22) are packed in
// the daemon's idle time (storage/transcript/row-packing.ts), going up the transcript behind the cursor
// `pack_state.packed_through`, which starts at 0.
//
// Packing rewrites a row without changing its JSON. The update trigger of the search index would
// take that for an edit and index the row again; it now skips exactly that rewrite (plain body
// replaced by a packed one that inflates to it), so packing an indexed row costs one inflate.

export const sql = `
CREATE TABLE pack_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  packed_through INTEGER NOT NULL
) STRICT;
INSERT INTO pack_state (id, packed_through) VALUES (1, 0);
DROP TRIGGER transcript_fts_au;
CREATE TRIGGER transcript_fts_au AFTER UPDATE OF body, packed, legacy_text ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
    AND NOT (old.packed IS NULL AND new.packed IS NOT NULL AND new.body = ''
      AND new.legacy_text IS old.legacy_text AND albedo_unpack(new.seq, new.packed) = old.body)
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
