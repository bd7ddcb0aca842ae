// Migration 26: the summaries' trigram index (lcm_summary_fts) stops merging its segments inside
// commits, as the rows' index did in migration 20. Since migration 25 a large compaction's
// summaries are indexed after it, in many small commits (lcm_grep's catch-up, the daemon's idle
// work); with FTS5's automerge on, some of those commits also merged older segments and held
// the event loop for tens of milliseconds. Segments are now merged in bounded steps of their
// own (storage/state/lcm-tree.ts mergeSummaryIndex), between the catch-up's units and in idle time.
// The crisis merge (16 segments on one level) stays as a backstop inside commits.

export const sql = `
INSERT INTO lcm_summary_fts(lcm_summary_fts, rank) VALUES ('automerge', 0);
`;
