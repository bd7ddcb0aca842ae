// snapcompact's saved archive: the save time a request checks is remembered per connection
// (reading it walks the archive text's overflow pages), and every write that can change it is
// still seen: a save here, a commit by another connection, the session's deletion, a rollback.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { openDb } from '../../storage/db.ts';
import { deleteSession, openSession } from '../../storage/sessions.ts';
import { archiveStamp, saveArchive } from '../../storage/snapcompact-state.ts';
import { tempDbWithPath } from './factories.ts';
import { recordingDb } from './recording-db.ts';

const state = (text: string) => ({ text, marks: [[0, 1]] as Array<[number, number]>, folds: [], cut: { format: 2 as const, users: 1, fingerprint: 'f' }, hints: { openerSeq: 2, resumeSeq: 2 } });
/** Big enough that the stamp lies past many overflow pages, as on a long session. */
const LONG = 'x'.repeat(200_000);

describe('snapcompact archive stamp', () => {
  test('an unchanged archive is checked without reading its save time from the row again', (t) => {
    const { db: base } = tempDbWithPath(t);
    const { db, executed } = recordingDb(base);
    const sid = openSession(db, { session: 's' }).sid;
    saveArchive(db, sid, state(LONG), 1000);
    assert.equal(archiveStamp(db, sid), 1000);
    executed.length = 0;
    assert.equal(archiveStamp(db, sid), 1000);
    assert.equal(archiveStamp(db, sid), 1000);
    assert.deepEqual(
      executed.filter((sql) => /updated_at/.test(sql)),
      [],
      `no read of updated_at once it is known: ${executed.join(' | ')}`,
    );
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
