// Migration 17: the indexes an append writes, made cheaper. tool_calls is ordered by the call's
// row, so an append writes its call records at the end of the table instead of into pages all
// over it. Keyed by (sid, call_id, seq), every batch's records landed in as many pages as it had
// distinct ids (ids are random strings), and each such page went to the WAL at commit: the
// largest cost of an append after the rows themselves. Keyed by (seq, call_id), a batch's
// records share the last page or two.
//
// What the old key served is covered otherwise: lookups by the call's row use the new key (so
// tool_calls_seq goes), open calls by id use tool_calls_open, answers by result row use
// tool_calls_result, and the newest answer of an id (image elision, once per compaction) walks
// tool_calls_result down from the head. `sid` no longer references sessions: nothing would
// find a session's records by sid any more, and deleting a session deletes its transcript rows,
// whose deletion takes their call records (seq and result_seq cascade).
//
// (seq, call_id) is as unique as (sid, call_id, seq) was, a row's seq naming its session.
//
// transcript_class holds only the rows that open a unit (user inputs, image-fit notices): no
// query looks for row_class 'other', and those are 95% of a coding agent's rows, each of which
// paid an insert into this index. Queries by row_class name the predicate (storage/transcript/user-rows.ts
// OPENS_UNIT) so that SQLite may use the partial index.
export const sql = `
DROP INDEX transcript_class;
CREATE INDEX transcript_class ON transcript(sid, row_class, seq) WHERE row_class <> 'other';

CREATE TABLE tool_calls_v18 (
  -- The assistant row that made the call.
  seq INTEGER NOT NULL REFERENCES transcript(seq) ON DELETE CASCADE,
  call_id TEXT NOT NULL,
  -- The session of both rows, for the index of open calls.
  sid INTEGER NOT NULL,
  -- The tool_result row that answered it; NULL while the call is open.
  result_seq INTEGER REFERENCES transcript(seq) ON DELETE CASCADE,
  PRIMARY KEY (seq, call_id)
) STRICT, WITHOUT ROWID;
INSERT INTO tool_calls_v18 (seq, call_id, sid, result_seq)
  SELECT seq, call_id, sid, result_seq FROM tool_calls ORDER BY seq, call_id;
DROP TABLE tool_calls;
ALTER TABLE tool_calls_v18 RENAME TO tool_calls;
-- At most one open call per id and session: the one a result with that id answers.
CREATE UNIQUE INDEX tool_calls_open ON tool_calls(sid, call_id) WHERE result_seq IS NULL;
-- A result answers one call; settling finds the call a result row answers through this.
CREATE UNIQUE INDEX tool_calls_result ON tool_calls(result_seq) WHERE result_seq IS NOT NULL;
`;
