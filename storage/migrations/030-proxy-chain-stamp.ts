// Migration 30: a stamp on the proxy session that changes whenever its chain of stored messages
// (proxy_messages) is written. Every proxied request compares the agent's history with that
// chain, one row per message: a long session read thousands of rows per request to find the same
// chain as before. With the stamp, the session's kernel keeps the chain it read or wrote and reads
// one integer instead (daemon/proxy/reconcile.ts).
//
// Random values rather than a count, for the reason migration 24 gives: a count that a
// rolled-back write raised would come back with another chain behind it.

const stamp = 'UPDATE proxy_sessions SET chain_stamp = random() >> 11 WHERE sid';

export const sql = `
ALTER TABLE proxy_sessions ADD COLUMN chain_stamp INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER proxy_messages_stamp_ai AFTER INSERT ON proxy_messages BEGIN ${stamp} = new.sid; END;
CREATE TRIGGER proxy_messages_stamp_au AFTER UPDATE ON proxy_messages BEGIN ${stamp} IN (old.sid, new.sid); END;
CREATE TRIGGER proxy_messages_stamp_ad AFTER DELETE ON proxy_messages BEGIN ${stamp} = old.sid; END;
`;
