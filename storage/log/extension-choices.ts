// A session's own /extensions choices, in the order they were made (the global ones live in
// extensions.json). A fork inherits them, so a branch keeps its strategy.
import { perDb, type Db } from '../db.ts';

function prepare(db: Db) {
  return {
    choices: db.prepare('SELECT name, enabled, chosen_at AS at FROM session_extensions WHERE sid = ? ORDER BY chosen_at'),
    deleteChoices: db.prepare('DELETE FROM session_extensions WHERE sid = ?'),
    insertChoice: db.prepare('INSERT INTO session_extensions (sid, name, enabled, chosen_at) VALUES (?, ?, ?, ?)'),
    copyChoices: db.prepare('INSERT INTO session_extensions (sid, name, enabled, chosen_at) SELECT ?, name, enabled, chosen_at FROM session_extensions WHERE sid = ?'),
  };
}

const stmts = perDb(prepare);

export interface StoredChoice {
  name: string;
  enabled: boolean;
  at: number;
}

/** The session's choices in the order they were made (the order saveSessionChoices was given). */
export function sessionChoices(db: Db, sid: number): StoredChoice[] {
  const rows = stmts(db).choices.all(sid) as Array<{ name: string; enabled: number; at: number }>;
  return rows.map((r) => ({ name: r.name, enabled: r.enabled === 1, at: r.at }));
}

/**
 * Replaces the session's choices with `choices`, whose list order is the order they were made.
 * The table has no row order of its own, so that order is kept in `chosen_at`: each stored time
 * is at least one more than the one before it. Two choices in the same millisecond (or after
 * the clock stepped back) thus keep their order instead of sorting by name, at the cost of a
 * time a few milliseconds late.
 */
export function saveSessionChoices(db: Db, sid: number, choices: readonly StoredChoice[]): void {
  const st = stmts(db);
  db.transaction(() => {
    st.deleteChoices.run(sid);
    let previous = -Infinity;
    for (const c of choices) {
      const at = Math.max(c.at, previous + 1);
      st.insertChoice.run(sid, c.name, c.enabled ? 1 : 0, at);
      previous = at;
    }
  })();
}

/** What a fork inherits: the parent's choices, copied to the branch. Call it inside the fork's transaction. */
export function inheritChoices(db: Db, parentSid: number, childSid: number): void {
  stmts(db).copyChoices.run(childSid, parentSid);
}
