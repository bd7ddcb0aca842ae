// Migration 29: what /context says of proxied work beyond the conversation's own messages.
// - A Responses request that names `previous_response_id` continues history the provider holds,
//   so it goes up as it came; Codex may still run its own compaction (`/responses/compact`).
//   Both are counted per session, with the last reason given.
// - The `albedo run` a session came through, for `albedo mcp` started under the same run.
// - The memory-tool calls the proxy ran itself inside a turn (daemon/proxy/memory-tools.ts): one
//   row per call, with the round it was in and what that round cost upstream.

export const sql = `
ALTER TABLE proxy_sessions ADD COLUMN passed_through INTEGER NOT NULL DEFAULT 0;
ALTER TABLE proxy_sessions ADD COLUMN passed_through_reason TEXT;
ALTER TABLE proxy_sessions ADD COLUMN client_compactions INTEGER NOT NULL DEFAULT 0;
-- The 'albedo run' the agent was started by (ALBEDO_RUN, in the request's path): 'albedo mcp'
-- under the same run finds its session by it.
ALTER TABLE proxy_sessions ADD COLUMN run_id TEXT;
CREATE INDEX proxy_sessions_run ON proxy_sessions(run_id, sid) WHERE run_id IS NOT NULL;

CREATE TABLE proxy_memory_calls (
  id INTEGER PRIMARY KEY,
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  -- The turn: the position its client-visible message takes in the session's chain.
  turn INTEGER NOT NULL,
  -- 0 for the answer to the agent's own request, then one per follow-up the proxy sent.
  round INTEGER NOT NULL,
  name TEXT NOT NULL,
  -- The call's arguments as the model gave them (JSON).
  arguments TEXT NOT NULL,
  is_error INTEGER NOT NULL DEFAULT 0,
  -- What the round that made the call cost upstream (input counts cached tokens too).
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX proxy_memory_calls_sid ON proxy_memory_calls(sid, id);
`;
