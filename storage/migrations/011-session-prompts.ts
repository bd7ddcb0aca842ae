// Migration 11: the prompt (instructions and tools) of a session's last prepare moves out of the
// sessions row into a table of its own, with a hash of it. An agent sends the same ~10 KB of
// prompt on every turn: the hash lets a prepare see it unchanged and write nothing of it, and
// out of the sessions row it is no longer copied by SQLite's rewrite of the whole row on every
// small update there (the prepared head, the rewrite counter, the failure latch).
// Prompts stored before keep an empty hash, so the next prepare writes its prompt once.

export const sql = `
CREATE TABLE session_prompts (
  sid INTEGER PRIMARY KEY REFERENCES sessions(sid) ON DELETE CASCADE,
  hash TEXT NOT NULL,
  instructions TEXT NOT NULL,
  -- JSON array of protocol/prepared.ts StoredToolSpec.
  tools TEXT NOT NULL
) STRICT;
INSERT INTO session_prompts (sid, hash, instructions, tools)
  SELECT sid, '', coalesce(last_instructions, ''), coalesce(last_tools, '[]') FROM sessions
   WHERE last_instructions IS NOT NULL OR last_tools IS NOT NULL;
ALTER TABLE sessions DROP COLUMN last_instructions;
ALTER TABLE sessions DROP COLUMN last_tools;
`;
