// Migration 32: snapcompact's archive text is stored in parts (snapcompact_text), no longer as
// one value in its row. The archive only grows, so a compaction writes only the parts its rows
// add, each in a small transaction of its own before the commit, and the commit names the range
// of parts the archive is (first_part..last_part). A part outside the range is not part of any
// archive: one written by a compaction that was then discarded, or cut short by a crash, is
// overwritten by the next one and deleted by the next commit. Before, every compaction rewrote
// the whole text inside its commit: hundreds of megabytes on a long session, and seconds during
// which the daemon served no one.
//
// An existing archive becomes its single part 0.

export const sql = `
CREATE TABLE snapcompact_text (
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  part INTEGER NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (sid, part)
) STRICT;
ALTER TABLE snapcompact_archive ADD COLUMN first_part INTEGER NOT NULL DEFAULT 0;
ALTER TABLE snapcompact_archive ADD COLUMN last_part INTEGER NOT NULL DEFAULT -1;
INSERT INTO snapcompact_text (sid, part, text) SELECT sid, 0, text FROM snapcompact_archive WHERE text <> '';
UPDATE snapcompact_archive SET last_part = 0 WHERE text <> '';
ALTER TABLE snapcompact_archive DROP COLUMN text;
`;
