// Migration 25: lcm's node summaries enter their trigram index (lcm_summary_fts) after the pass
// that wrote them has committed, not by a trigger inside its transaction. A forced pass over a
// long uncovered history writes thousands of nodes, and three quarters of that commit, one
// synchronous stretch of the daemon, was the index. A node written since waits with indexed = 0;
// lcm_grep indexes its session's waiting nodes, in slices, before it searches them
// (storage/state/lcm-tree.ts `indexWaitingSummaries`). Nodes already stored were indexed by the trigger.
export const sql = `
ALTER TABLE lcm_nodes ADD COLUMN indexed INTEGER NOT NULL DEFAULT 1 CHECK (indexed IN (0, 1));
CREATE INDEX lcm_nodes_waiting ON lcm_nodes(sid, node) WHERE indexed = 0;
DROP TRIGGER lcm_summary_fts_ai;
DROP TRIGGER lcm_summary_fts_ad;
DROP TRIGGER lcm_summary_fts_au;
CREATE TRIGGER lcm_summary_fts_ad AFTER DELETE ON lcm_nodes WHEN old.indexed = 1 BEGIN
  DELETE FROM lcm_summary_fts WHERE rowid = old.node;
END;
CREATE TRIGGER lcm_summary_fts_au AFTER UPDATE OF summary ON lcm_nodes WHEN old.indexed = 1 BEGIN
  DELETE FROM lcm_summary_fts WHERE rowid = old.node;
  INSERT INTO lcm_summary_fts(rowid, summary) VALUES (new.node, albedo_fold(new.summary));
END;
`;
