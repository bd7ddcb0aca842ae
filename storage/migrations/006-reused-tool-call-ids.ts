// Migration 6: a tool-call id may come back in a session once its earlier call is answered, so
// tool_calls holds one record per call (not per id) and names the result row that answered it.
// Orphan results (no open call had their id) keep a NULL transcript.call_id and are indexed.

// SQLite cannot change a primary key in place: the table is rebuilt (create, copy, drop,
// rename). Foreign keys are on while migrations run; nothing references tool_calls, so dropping
// it checks nothing, and every copied record points at rows that exist. Before this version a
// call had at most one result, and only a result naming the call's id in the call's session,
// so that result is the link. transcript_result served only the old lookup of a call's result
// by id; the link replaces it.
export const sql = `
CREATE TABLE tool_calls_v6 (
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  call_id TEXT NOT NULL,
  -- The assistant row that made the call.
  seq INTEGER NOT NULL REFERENCES transcript(seq) ON DELETE CASCADE,
  -- The tool_result row that answered it; NULL while the call is open. Settling rewrites the
  -- record when either row moves, so a deleted row takes the record with it.
  result_seq INTEGER REFERENCES transcript(seq) ON DELETE CASCADE,
  PRIMARY KEY (sid, call_id, seq)
) STRICT, WITHOUT ROWID;
INSERT INTO tool_calls_v6 (sid, call_id, seq, result_seq)
  SELECT tc.sid, tc.call_id, tc.seq,
         (SELECT t.seq FROM transcript t
           WHERE t.sid = tc.sid AND t.call_id = tc.call_id AND t.kind = 'tool_result'
           ORDER BY t.seq LIMIT 1)
    FROM tool_calls tc;
DROP TABLE tool_calls;
ALTER TABLE tool_calls_v6 RENAME TO tool_calls;
CREATE INDEX tool_calls_seq ON tool_calls(seq);
-- At most one open call per id and session: the one a result with that id answers.
CREATE UNIQUE INDEX tool_calls_open ON tool_calls(sid, call_id) WHERE result_seq IS NULL;
-- A result answers one call; settling finds the call a result row answers through this.
CREATE UNIQUE INDEX tool_calls_result ON tool_calls(result_seq) WHERE result_seq IS NOT NULL;
DROP INDEX transcript_result;
-- Orphan results only; kind and call_id are in the key so counting reads nothing else.
CREATE INDEX transcript_orphans ON transcript(sid, kind, call_id) WHERE kind = 'tool_result' AND call_id IS NULL;
`;
