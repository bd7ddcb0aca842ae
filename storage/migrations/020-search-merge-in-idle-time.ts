// Migration 20: the rows' trigram index stops merging its segments inside commits. With FTS5's
// automerge on, the commit that writes a batch's new segment may also merge older ones, and
// that merge, not the batch, is what made some indexer turns last tens of milliseconds (the
// daemon cannot stop one halfway, so a request arriving meanwhile waited). The daemon now
// merges in bounded steps of its own between requests (storage/search/indexer.ts
// mergeSearchIndex, daemon/idle-work.ts). FTS5's crisis merge (16 segments on one level) still
// runs inside a commit, as a backstop when the daemon never gets idle time.

export const sql = `
INSERT INTO transcript_fts(transcript_fts, rank) VALUES ('automerge', 0);
`;
