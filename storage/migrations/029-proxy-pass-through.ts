// Migration 29: what /context says of proxied requests the daemon could not compact. A Responses
// request that names `previous_response_id` continues history the provider holds, so it goes
// up as it came; and Codex may still run its own compaction (`/responses/compact`). Both are
// counted per session, with the last reason given.

export const sql = `
ALTER TABLE proxy_sessions ADD COLUMN passed_through INTEGER NOT NULL DEFAULT 0;
ALTER TABLE proxy_sessions ADD COLUMN passed_through_reason TEXT;
ALTER TABLE proxy_sessions ADD COLUMN client_compactions INTEGER NOT NULL DEFAULT 0;
`;
