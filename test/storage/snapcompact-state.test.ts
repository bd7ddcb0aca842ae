// snapcompact's saved archive: the save time a request checks is read through its own index
// (from the row it lies past the archive text's overflow pages), and every write that can change
// it is seen: a save here, a commit by another connection, the session's deletion, a rollback.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { openDb } from '../../storage/db.ts';
import { deleteSession, openSession } from '../../storage/transcript/sessions.ts';
import type { Db } from '../../storage/db.ts';
import { archiveStamp, archiveText, loadArchive, saveArchive, writeArchivePart } from '../../storage/state/snapcompact.ts';
import { tempDbWithPath } from './factories.ts';

const fields = { marks: [[0, 1]] as Array<[number, number]>, folds: [], cut: { format: 2 as const, users: 1, fingerprint: 'f' }, hints: { openerSeq: 2, resumeSeq: 2 } };
/** Saves an archive of one part, written first as a compaction writes its parts. */
function save(db: Db, sid: number, text: string, now: number): void {
  writeArchivePart(db, sid, 0, text, fields.marks);
  saveArchive(db, sid, { first: 0, partLengths: [text.length], ...fields }, now);
}
/** Big enough that the stamp lies past many overflow pages, as on a long session. */
const LONG = 'x'.repeat(200_000);

describe('snapcompact archive stamp', () => {
  test('the save time is read from its index, not from the row past the archive text', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    save(db, sid, LONG, 1000);
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
    save(db, sid, LONG, 1000);
    assert.equal(archiveStamp(db, sid), 1000);
    save(db, sid, `${LONG}y`, 2000);
    assert.equal(archiveStamp(db, sid), 2000);
  });

  test('a save committed by another connection is seen', (t) => {
    const { db, path } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    save(db, sid, LONG, 1000);
    assert.equal(archiveStamp(db, sid), 1000);
    const other = openDb(path, { synchronous: 'NORMAL' });
    try {
      save(other, sid, `${LONG}y`, 2000);
    } finally {
      other.close();
    }
    assert.equal(archiveStamp(db, sid), 2000);
  });

  test('the archive is gone with its session', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    save(db, sid, LONG, 1000);
    assert.equal(archiveStamp(db, sid), 1000);
    assert.equal(deleteSession(db, 's'), true);
    assert.equal(archiveStamp(db, sid), undefined);
  });

  test('a save read inside a transaction that rolls back leaves the earlier stamp', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    save(db, sid, LONG, 1000);
    assert.equal(archiveStamp(db, sid), 1000);
    assert.throws(
      () =>
        db.transaction(() => {
          save(db, sid, `${LONG}y`, 2000);
          assert.equal(archiveStamp(db, sid), 2000, 'the transaction sees its own save');
          throw new Error('roll back');
        })(),
      /roll back/,
    );
    assert.equal(archiveStamp(db, sid), 1000);
  });
});

describe('snapcompact archive parts', () => {
  test('parts past the saved range are read by no one until a save names them; the save drops the rest', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    writeArchivePart(db, sid, 0, 'first part', fields.marks);
    saveArchive(db, sid, { first: 0, partLengths: ['first part'.length], ...fields }, 1000);
    // A compaction grows the archive: its parts go past the range before its commit.
    writeArchivePart(db, sid, 1, '\nsecond', []);
    writeArchivePart(db, sid, 2, '\nthird', []);
    const before = loadArchive(db, sid);
    assert.ok(before !== undefined && !('unreadable' in before));
    assert.equal(archiveText(db, sid, before), 'first part', 'the parts not yet named are not part of the archive');
    // That compaction is discarded; the next one overwrites part 1 and names 0-1.
    writeArchivePart(db, sid, 1, '\nagain', []);
    const saved = saveArchive(db, sid, { first: 0, partLengths: ['first part'.length, '\nagain'.length], ...fields }, 2000);
    const after = loadArchive(db, sid);
    assert.deepEqual(after, saved, 'the save answers what a load reads back');
    assert.ok(after !== undefined && !('unreadable' in after));
    assert.equal(archiveText(db, sid, after), 'first part\nagain');
    assert.equal(after.length, 'first part\nagain'.length);
    assert.deepEqual(db.prepare('SELECT part FROM snapcompact_text WHERE sid = ? ORDER BY part').pluck().all(sid), [0, 1], 'part 2, past the range, is gone');
  });

  test('an archive that starts over drops the old parts at its commit, and a save naming a part never written fails', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    save(db, sid, 'old archive', 1000);
    writeArchivePart(db, sid, 1, 'new archive', fields.marks);
    saveArchive(db, sid, { first: 1, partLengths: ['new archive'.length], ...fields }, 2000);
    assert.deepEqual(db.prepare('SELECT part FROM snapcompact_text WHERE sid = ?').pluck().all(sid), [1]);
    assert.throws(() => db.transaction(() => saveArchive(db, sid, { first: 1, partLengths: ['new archive'.length, '\nnever written'.length], ...fields }, 3000))(), /1 of its text parts 1-2 were never stored/);
    const kept = loadArchive(db, sid);
    assert.ok(kept !== undefined && !('unreadable' in kept));
    assert.equal(archiveText(db, sid, kept), 'new archive', 'the failed save changed nothing');
    assert.equal(deleteSession(db, 's'), true);
    assert.equal(db.prepare('SELECT count(*) FROM snapcompact_text').pluck().get(), 0, 'the parts go with their session');
  });

  test('each part keeps the marks of its rows: a commit writes only its own, and a load reads them in part order', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    writeArchivePart(db, sid, 0, 'one', [[0, 1]]);
    saveArchive(db, sid, { first: 0, partLengths: [3], ...fields, marks: [[0, 1]] }, 1000);
    writeArchivePart(db, sid, 1, '\ntwo\nthree', [[4, 2], [8, 3]]);
    const grown = saveArchive(db, sid, { first: 0, partLengths: [3, 10], ...fields, marks: [[0, 1], [4, 2], [8, 3]] }, 2000);
    assert.deepEqual(loadArchive(db, sid), grown);
    assert.deepEqual(grown.marks, [[0, 1], [4, 2], [8, 3]]);
    assert.equal(db.prepare('SELECT marks FROM snapcompact_archive WHERE sid = ?').pluck().get(sid), '[]', 'the archive row holds no marks of its own');
    assert.deepEqual(db.prepare('SELECT marks FROM snapcompact_text WHERE sid = ? ORDER BY part').pluck().all(sid), ['[[0,1]]', '[[4,2],[8,3]]']);
    // A part whose marks cannot be read makes the archive unreadable, not shorter.
    db.prepare("UPDATE snapcompact_text SET marks = '[[4]]' WHERE sid = ? AND part = 1").run(sid);
    assert.deepEqual(loadArchive(db, sid), { unreadable: 'the marks of its text part 1 have a format this build does not know' });
  });

  test('an archive whose named parts are missing reads as unreadable, not as a shorter text', (t) => {
    const { db } = tempDbWithPath(t);
    const sid = openSession(db, { session: 's' }).sid;
    save(db, sid, 'the archive', 1000);
    db.prepare('DELETE FROM snapcompact_text WHERE sid = ?').run(sid);
    assert.deepEqual(loadArchive(db, sid), { unreadable: 'its text parts 0-0 are not all stored' });
  });
});
