// Migration 28: what the provider-compatible proxy (daemon/proxy/) keeps per session. A proxy
// session is found again by an identity made from what the agent sends (its account, its own
// session id, the conversation's opening), and the hashes of the messages already stored let
// the next request append only what is new and find where a history diverged.

export const sql = `
CREATE TABLE proxy_sessions (
  sid INTEGER PRIMARY KEY REFERENCES sessions(sid) ON DELETE CASCADE,
  -- The wire the agent speaks: anthropic (Messages), openai-responses, openai-chat.
  wire TEXT NOT NULL,
  -- sha256 of (namespace, the agent's session id or conversation fingerprint, conversation).
  identity TEXT NOT NULL,
  -- sha256 of (namespace, the agent's session id): the conversations of one agent session (its
  -- Task subagents among them) share it; the first of them is the others' parent.
  family TEXT NOT NULL,
  -- sha256 of the namespace alone (the account, or the credential's hash): an agent that names
  -- no session id has its side requests counted on its namespace's latest session.
  namespace TEXT NOT NULL,
  -- The session this conversation came from (a Task subagent's parent), or null.
  parent_sid INTEGER REFERENCES sessions(sid) ON DELETE SET NULL,
  -- The agent as its user-agent header names it, e.g. "claude-cli/2.1.332".
  agent TEXT,
  -- 1 while this session is where its identity's requests go; 0 once a fork took over.
  current INTEGER NOT NULL DEFAULT 1,
  -- Requests that are not the conversation (titles, quota probes), forwarded unrecorded.
  side_requests INTEGER NOT NULL DEFAULT 0,
  side_input_tokens INTEGER NOT NULL DEFAULT 0,
  side_output_tokens INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX proxy_sessions_identity ON proxy_sessions(identity) WHERE current = 1;
CREATE INDEX proxy_sessions_family ON proxy_sessions(family, sid);
CREATE INDEX proxy_sessions_namespace ON proxy_sessions(namespace, sid) WHERE current = 1;

-- One row per conversation message stored, in the agent's order: the chained hash of the
-- normalized messages up to it, and the newest seq it stored (its last row).
CREATE TABLE proxy_messages (
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  chain TEXT NOT NULL,
  last_seq INTEGER NOT NULL,
  -- 1 for an assistant turn the proxy recorded from the upstream's answer: the agent's copy of
  -- it may differ in shape (dropped empty blocks, reordered keys) and is taken as the same turn.
  recorded INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (sid, idx)
) STRICT, WITHOUT ROWID;
`;
