// Migration 2: what the compaction engine keeps — per-session extension choices, rolling's
// saved state, prepared requests with their observations and usage, and the compaction log.

export const sql = `
-- Explicit /extensions choices for one session; later choices replace earlier ones per name.
CREATE TABLE session_extensions (
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  name TEXT NOT NULL,
  enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
  chosen_at INTEGER NOT NULL,
  PRIMARY KEY (sid, name)
) STRICT, WITHOUT ROWID;

-- rolling: one summary of everything before the cut. cut is JSON (see storage/state/rolling.ts);
-- cut_seq is the seq of the first row after the cut when it was saved, a hint re-checked on load.
CREATE TABLE rolling_state (
  sid INTEGER PRIMARY KEY REFERENCES sessions(sid) ON DELETE CASCADE,
  summary TEXT NOT NULL,
  cut TEXT NOT NULL,
  cut_seq INTEGER NOT NULL,
  backend TEXT,
  updated_at INTEGER NOT NULL
) STRICT;

-- Every prepared request's observation, and the provider's measured usage once reported.
CREATE TABLE prepared_requests (
  id TEXT PRIMARY KEY,
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  head INTEGER NOT NULL,
  model TEXT,
  created_at INTEGER NOT NULL,
  estimated_input_tokens INTEGER NOT NULL,
  provider_input_tokens INTEGER,
  cached_tokens INTEGER,
  -- JSON of protocol/prepared.ts Observation.
  observation TEXT NOT NULL
) STRICT;
CREATE INDEX prepared_requests_session ON prepared_requests(sid, created_at);

-- One line per compaction attempt, successful or not.
CREATE TABLE compactions (
  id INTEGER PRIMARY KEY,
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  strategy TEXT NOT NULL,
  at INTEGER NOT NULL,
  forced INTEGER NOT NULL,
  ok INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL,
  backend TEXT,
  summarizer_tokens_in INTEGER NOT NULL,
  summarizer_tokens_out INTEGER NOT NULL,
  tokens_before INTEGER NOT NULL,
  tokens_after INTEGER NOT NULL,
  evicted_rows INTEGER NOT NULL,
  error TEXT
) STRICT;
CREATE INDEX compactions_session ON compactions(sid, id);

-- Consecutive failed automatic compactions (the failure latch) and the last model prepared for.
ALTER TABLE sessions ADD COLUMN auto_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN last_model TEXT;
-- The agent's instructions and tools (JSON) at the last prepare, so /compact can size the
-- pinned prompt without a request in hand.
ALTER TABLE sessions ADD COLUMN last_instructions TEXT;
ALTER TABLE sessions ADD COLUMN last_tools TEXT;
-- Bumped whenever rows of the session move or change in place (tool-result settling, image
-- elision). In-memory caches of derived positions (a verified cut) are keyed on it.
ALTER TABLE sessions ADD COLUMN rewrites INTEGER NOT NULL DEFAULT 0;
`;
