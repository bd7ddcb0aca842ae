// Migration 4: rolling's saved state remembers the session's rewrite counter at save time. While
// the counter is unchanged no row before the cut can have moved or changed, so adopting the
// state after a restart needs no re-hash of every user message before the cut.

export const sql = `
ALTER TABLE rolling_state ADD COLUMN rewrites INTEGER;
`;
