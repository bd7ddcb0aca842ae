// Migration 10: snapcompact's saved archive (the normalized text of everything before its cut,
// with where each archived row starts in it) and the frame cache. A frame's PNG is a payload
// (content-addressed, served by payload.get); the frame row names it, which keeps it from
// payload garbage collection until the frame is pruned for disuse.

export const sql = `
CREATE TABLE snapcompact_archive (
  sid INTEGER PRIMARY KEY REFERENCES sessions(sid) ON DELETE CASCADE,
  text TEXT NOT NULL,
  -- JSON [[offset, seq], ...]: the UTF-16 offset in text where each archived row starts.
  marks TEXT NOT NULL,
  -- JSON [{source, text, firstSeq, lastSeq}]: other extensions' folds the archive replaced,
  -- kept as text ahead of the frames.
  folds TEXT NOT NULL,
  -- JSON SavedCut (storage/state/saved-cut.ts) and its hints, as rolling_state keeps them.
  cut TEXT NOT NULL,
  cut_seq INTEGER NOT NULL,
  resume_seq INTEGER NOT NULL,
  rewrites INTEGER,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE snapcompact_frames (
  key TEXT PRIMARY KEY,
  hash TEXT NOT NULL,
  width INTEGER NOT NULL,
  height INTEGER NOT NULL,
  used_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX snapcompact_frames_hash ON snapcompact_frames(hash);
CREATE INDEX snapcompact_frames_used ON snapcompact_frames(used_at);
`;
