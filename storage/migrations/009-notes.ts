// Migration 9: the notes layer's saved text, one row per session. The notes belong to the
// session, not to a strategy, so a strategy switch keeps them; a fork gets no row. The cut is
// the same user-message cut strategies save (storage/state/saved-cut.ts), with its hints.

export const sql = `
CREATE TABLE compaction_notes (
  sid INTEGER PRIMARY KEY REFERENCES sessions(sid) ON DELETE CASCADE,
  -- The notes as the summarizer wrote them; '' before the first successful rewrite.
  text TEXT NOT NULL,
  -- JSON of SavedCut: the history before it is what the notes cover.
  cut TEXT NOT NULL,
  -- Hints: seq of the first row after the cut when it was saved, and where its tail resumed.
  cut_seq INTEGER NOT NULL,
  resume_seq INTEGER NOT NULL,
  -- Summarizer backend that wrote the text.
  backend TEXT,
  -- The session's rewrite counter when the cut was saved.
  rewrites INTEGER,
  -- Why the last rewrite failed (the text above predates it); NULL after a success.
  failure TEXT,
  updated_at INTEGER NOT NULL
) STRICT;
`;
