// Migration 8: lcm's summary tree. A node summarizes the source rows first_seq..last_seq of its
// session (a leaf) or the rows of its ordered children (a condensed parent); the frontier is
// the nodes with no parent. The covered cursor is the last source seq a leaf covers. Node
// summaries get a trigram index of their own (folded like transcript_fts) for lcm_grep.

export const sql = `
CREATE TABLE lcm_state (
  sid INTEGER PRIMARY KEY REFERENCES sessions(sid) ON DELETE CASCADE,
  -- Last transcript seq covered by a leaf (inclusive); 0 before the first leaf.
  covered_seq INTEGER NOT NULL,
  -- Bumped by every write to the session's tree (kernel caches of the frontier key on it).
  version INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE lcm_nodes (
  node INTEGER PRIMARY KEY,
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  depth INTEGER NOT NULL CHECK (depth >= 0),
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL CHECK (last_seq >= first_seq),
  summary TEXT NOT NULL,
  -- Estimated tokens of the summary as it goes into a request.
  estimated_tokens INTEGER NOT NULL,
  -- Estimated tokens of what the node covers (its source rows, or its children's sources).
  source_tokens INTEGER NOT NULL,
  -- 1 when the summary is a pointer to the rows (the summarizer could not make it smaller).
  pointer INTEGER NOT NULL DEFAULT 0 CHECK (pointer IN (0, 1)),
  backend TEXT,
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX lcm_nodes_session ON lcm_nodes(sid, first_seq);

-- Ordered child links; one parent per child.
CREATE TABLE lcm_edges (
  child INTEGER PRIMARY KEY REFERENCES lcm_nodes(node) ON DELETE CASCADE,
  parent INTEGER NOT NULL REFERENCES lcm_nodes(node) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  UNIQUE (parent, position)
) STRICT;

CREATE VIRTUAL TABLE lcm_summary_fts USING fts5(
  summary, content='', contentless_delete=1, tokenize='trigram case_sensitive 1'
);
CREATE TRIGGER lcm_summary_fts_ai AFTER INSERT ON lcm_nodes BEGIN
  INSERT INTO lcm_summary_fts(rowid, summary) VALUES (new.node, albedo_fold(new.summary));
END;
CREATE TRIGGER lcm_summary_fts_ad AFTER DELETE ON lcm_nodes BEGIN
  DELETE FROM lcm_summary_fts WHERE rowid = old.node;
END;
CREATE TRIGGER lcm_summary_fts_au AFTER UPDATE OF summary ON lcm_nodes BEGIN
  DELETE FROM lcm_summary_fts WHERE rowid = old.node;
  INSERT INTO lcm_summary_fts(rowid, summary) VALUES (new.node, albedo_fold(new.summary));
END;
`;
