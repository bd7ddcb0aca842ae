// Migration 1: sessions, the durable transcript, image payloads and their references.
// Released migrations are never edited; later schema changes append a new numbered file.

export const sql = `
CREATE TABLE sessions (
  sid INTEGER PRIMARY KEY,
  -- The public session id used on the wire.
  name TEXT NOT NULL UNIQUE,
  workspace TEXT,
  created_at INTEGER NOT NULL,
  -- Forks: the parent session and the parent seq the copy stops at (inclusive).
  parent_sid INTEGER REFERENCES sessions(sid) ON DELETE SET NULL,
  fork_seq INTEGER,
  -- Excursions: the parent's marker row (seq) and whether the branch already returned.
  excursion_marker INTEGER,
  returned_seq INTEGER,
  -- The prompt the model last knew this session by, and the head the last prepared request
  -- reported (see the compaction engine).
  known_instructions TEXT,
  known_context TEXT,
  known_tools TEXT,
  prepared_head INTEGER
) STRICT;
CREATE INDEX sessions_workspace ON sessions(workspace) WHERE workspace IS NOT NULL;
CREATE INDEX sessions_parent ON sessions(parent_sid) WHERE parent_sid IS NOT NULL;

-- seq is the global append-only identity. AUTOINCREMENT: a seq is never handed out twice,
-- even after a session is deleted.
CREATE TABLE transcript (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('user', 'assistant', 'tool_result', 'notice')),
  row_class TEXT NOT NULL CHECK (row_class IN ('user', 'image_fit', 'other')),
  -- Client idempotency key; unique per session.
  key TEXT,
  -- tool_result rows: the call they answer.
  call_id TEXT,
  -- The row content as JSON (protocol/rows.ts StoredBody), re-validated on read.
  body TEXT NOT NULL,
  -- Plain text of the row for search and reads (storage/transcript/row-text.ts).
  text TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX transcript_session ON transcript(sid, seq);
CREATE INDEX transcript_class ON transcript(sid, row_class, seq);
CREATE UNIQUE INDEX transcript_key ON transcript(sid, key) WHERE key IS NOT NULL;
CREATE INDEX transcript_result ON transcript(sid, call_id) WHERE call_id IS NOT NULL;

-- Tool calls made by assistant rows, so a result can find (and settle beside) its call.
CREATE TABLE tool_calls (
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  call_id TEXT NOT NULL,
  seq INTEGER NOT NULL REFERENCES transcript(seq) ON DELETE CASCADE,
  PRIMARY KEY (sid, call_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX tool_calls_seq ON tool_calls(seq);

-- Forks: which parent row each copied row came from, for strategies that copy state.
CREATE TABLE fork_rows (
  seq INTEGER PRIMARY KEY REFERENCES transcript(seq) ON DELETE CASCADE,
  parent_seq INTEGER NOT NULL
) STRICT;

-- Content-addressed image bytes (sha256 of the bytes).
CREATE TABLE payloads (
  hash TEXT PRIMARY KEY,
  media_type TEXT NOT NULL,
  width INTEGER NOT NULL,
  height INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  data BLOB NOT NULL,
  created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Who names a payload: a transcript row, or a session's pinned prompt. A payload no row
-- names may be deleted; that is one indexed query (see storage/images/payloads.ts).
CREATE TABLE payload_refs (
  hash TEXT NOT NULL,
  seq INTEGER REFERENCES transcript(seq) ON DELETE CASCADE,
  pin_sid INTEGER REFERENCES sessions(sid) ON DELETE CASCADE,
  CHECK ((seq IS NULL) <> (pin_sid IS NULL))
) STRICT;
CREATE INDEX payload_refs_hash ON payload_refs(hash);
CREATE INDEX payload_refs_seq ON payload_refs(seq) WHERE seq IS NOT NULL;
CREATE INDEX payload_refs_pin ON payload_refs(pin_sid) WHERE pin_sid IS NOT NULL;

-- Literal search: a trigram index over the row text. It only narrows candidates; the exact
-- Unicode case-insensitive match runs in TypeScript. Appends do not pay for it: a background
-- indexer (storage/search/indexer.ts) indexes rows up to \`indexed_through\`, and searches scan
-- the rows past that cursor. Triggers keep rows at or below the cursor exact when their text
-- changes or a row is rewritten in place (tool-result settling re-inserts rows).
CREATE VIRTUAL TABLE transcript_fts USING fts5(
  text, content='', contentless_delete=1, tokenize='trigram case_sensitive 0'
);
CREATE TABLE search_index_state (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  indexed_through INTEGER NOT NULL
) STRICT;
INSERT INTO search_index_state (id, indexed_through) VALUES (1, 0);
CREATE TRIGGER transcript_fts_ai AFTER INSERT ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  INSERT INTO transcript_fts(rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER transcript_fts_ad AFTER DELETE ON transcript
  WHEN old.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  DELETE FROM transcript_fts WHERE rowid = old.seq;
END;
CREATE TRIGGER transcript_fts_au AFTER UPDATE OF text ON transcript
  WHEN new.seq <= (SELECT indexed_through FROM search_index_state WHERE id = 1)
BEGIN
  DELETE FROM transcript_fts WHERE rowid = old.seq;
  INSERT INTO transcript_fts(rowid, text) VALUES (new.seq, new.text);
END;
`;
