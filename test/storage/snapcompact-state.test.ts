// snapcompact's saved archive: the save time a request checks is read through its own index
// (from the row it lies past the archive text's overflow pages), and every write that can change
// it is seen: a save here, a commit by another connection, the session's deletion, a rollback.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { openDb } from '../../storage/db.ts';
import { deleteSession, openSession } from '../../storage/transcript/sessions.ts';
import { archiveStamp, saveArchive } from '../../storage/state/snapcompact.ts';
import { tempDbWithPath } from './factories.ts';

const state = (text: string) => ({ text, marks: [[0, 1]] as Array<[number, number]>, folds: [], cut: { format: 2 as const, users: 1, fingerprint: 'f' }, hints: { openerSeq: 2, resumeSeq: 2 } });
/** Big enough that the stamp lies past many overflow pages, as on a long session. */
const LONG = 'x'.repeat(200_000);

describe('snapcompact archive stamp', () => {
  test('the save time is read from its index, not from the row past the archive text', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    saveArchive(db, sid, state(LONG), 1000);
    const { sql } = db.prepare<[], { sql: string }>("SELECT sql FROM sqlite_master WHERE name = 'snapcompact_archive_stamp'").get() ?? { sql: '' };
    assert.match(sql, /\(sid, updated_at\)/);
    const [plan] = db.prepare('EXPLAIN QUERY PLAN SELECT updated_at FROM snapcompact_archive INDEXED BY snapcompact_archive_stamp WHERE sid = ?').all(sid) as Array<{ detail: string }>;
    assert.match(plan?.detail ?? '', /USING COVERING INDEX snapcompact_archive_stamp/);
    assert.equal(archiveStamp(db, sid), 1000);
  });

  test('a save on this connection is seen at once', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    assert.equal(archiveStamp(db, sid), undefined);
    saveArchive(db, sid, state(LONG), 1000);
    assert.equal(archiveStamp(db, sid), 1000);
    saveArchive(db, sid, state(`${LONG}y`), 2000);
    assert.equal(archiveStamp(db, sid), 2000);
  });

  test('a save committed by another connection is seen', (t) => {
    const { db, path } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    saveArchive(db, sid, state(LONG), 1000);
    assert.equal(archiveStamp(db, sid), 1000);
    const other = openDb(path, { synchronous: 'NORMAL' });
    try {
      saveArchive(other, sid, state(`${LONG}y`), 2000);
    } finally {
      other.close();
    }
    assert.equal(archiveStamp(db, sid), 2000);
  });

  test('the archive is gone with its session', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    saveArchive(db, sid, state(LONG), 1000);
    assert.equal(archiveStamp(db, sid), 1000);
    assert.equal(deleteSession(db, 's'), true);
    assert.equal(archiveStamp(db, sid), undefined);
  });

  test('a save read inside a transaction that rolls back leaves the earlier stamp', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    saveArchive(db, sid, state(LONG), 1000);
    assert.equal(archiveStamp(db, sid), 1000);
    assert.throws(
      () =>
        db.transaction(() => {
          saveArchive(db, sid, state(`${LONG}y`), 2000);
          assert.equal(archiveStamp(db, sid), 2000, 'the transaction sees its own save');
          throw new Error('roll back');
        })(),
      /roll back/,
    );
    assert.equal(archiveStamp(db, sid), 1000);
  });
});
