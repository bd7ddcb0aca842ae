// Migration 24: a stamp on the session that changes whenever its rolling summary or its notes are
// written. Every prepare reads both states (about 8 KB of summary and 10 KB of notes on a long
// session), parses them and locates their cuts, though they change only at a compaction. With
// the stamp, the strategies keep what they parsed per kernel and read one integer instead.
//
// The triggers set a random value rather than counting up: a count that a rolled-back save had
// raised would be reached again by the next save, with a different state behind it, and a cache
// filled inside the rolled-back transaction would take it for the same. Shifted to 53 bits so that
// a JavaScript number holds it exactly.

/** The three triggers that restamp a session when a row of `table` is written. */
function stampTriggers(table: string): string {
  const stamp = 'UPDATE sessions SET state_stamp = random() >> 11 WHERE sid';
  return `
CREATE TRIGGER ${table}_stamp_ai AFTER INSERT ON ${table} BEGIN ${stamp} = new.sid; END;
CREATE TRIGGER ${table}_stamp_au AFTER UPDATE ON ${table} BEGIN ${stamp} IN (old.sid, new.sid); END;
CREATE TRIGGER ${table}_stamp_ad AFTER DELETE ON ${table} BEGIN ${stamp} = old.sid; END;`;
}

export const sql = `
ALTER TABLE sessions ADD COLUMN state_stamp INTEGER NOT NULL DEFAULT 0;
${stampTriggers('rolling_state')}
${stampTriggers('compaction_notes')}
`;
