// Migration 19: the block index of deep transcript reads (storage/transcript/read.ts), kept
// across restarts. A session's first deep read after a start used to sum its whole history
// again (half a second at a million rows); the saved index is reused when the session's
// identity and rewrite counter still match, and extended from `through` by new rows only.
// It is a cache: a missing or stale row costs a rebuild, never a wrong page.

export const sql = `
CREATE TABLE read_blocks (
  sid INTEGER PRIMARY KEY REFERENCES sessions(sid) ON DELETE CASCADE,
  created_at INTEGER NOT NULL,
  rewrites INTEGER NOT NULL,
  -- Rows with a seq up to this one are summed in.
  through INTEGER NOT NULL,
  closed INTEGER NOT NULL CHECK (closed IN (0, 1)),
  -- Little-endian float64 arrays of equal length: each block's last seq, and the rendered
  -- size of the session's rows through it.
  ends BLOB NOT NULL,
  sums BLOB NOT NULL
) STRICT;
`;
