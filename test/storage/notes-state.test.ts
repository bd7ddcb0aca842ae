// The notes layer's table (migration 9): a save and a failure round-trip, a failure never
// touches stored text or cut, an unreadable cut is reported, and the row goes with its session.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadNotes, noteNotesFailure, saveNotes } from '../../storage/state/notes.ts';
import { deleteSession, openSession } from '../../storage/transcript/sessions.ts';
import { START_CUT } from '../../strategies/harness/cut.ts';
import { count, tempDb } from './factories.ts';

test('notes save, record a failure without losing text or cut, and clear it at the next save', (t) => {
  const db = tempDb(t);
  const sid = openSession(db, { session: 's' }).sid;
  assert.equal(loadNotes(db, sid), undefined);
  noteNotesFailure(db, sid, 'backend down', START_CUT, 5);
  assert.deepEqual(loadNotes(db, sid), { text: '', ledger: null, cut: START_CUT, hints: { openerSeq: 1, resumeSeq: 1 }, backend: null, rewrites: null, failure: 'backend down', updatedAt: 5 });
  const cut = { format: 2 as const, users: 3, fingerprint: 'abc', rows: 12 };
  saveNotes(db, sid, { text: '- src/a.ts: keep', ledger: '{"files":[],"commands":[],"tests":[]}', cut, hints: { openerSeq: 13, resumeSeq: 13 }, backend: 'client' }, 10);
  noteNotesFailure(db, sid, 'timed out', START_CUT, 20);
  // A failure keeps the ledger with the text: both cover history up to the same cut.
  assert.deepEqual(loadNotes(db, sid), { text: '- src/a.ts: keep', ledger: '{"files":[],"commands":[],"tests":[]}', cut, hints: { openerSeq: 13, resumeSeq: 13 }, backend: 'client', rewrites: 0, failure: 'timed out', updatedAt: 10 });
  saveNotes(db, sid, { text: 'v2', cut, hints: { openerSeq: 13, resumeSeq: 13 }, backend: 'client' }, 30);
  const again = loadNotes(db, sid);
  assert.ok(again !== undefined && !('unreadable' in again) && again.failure === null && again.text === 'v2');
});

test('a cut this build cannot parse is reported, not trusted; deleting the session deletes its notes', (t) => {
  const db = tempDb(t);
  const sid = openSession(db, { session: 's' }).sid;
  saveNotes(db, sid, { text: 'x', cut: START_CUT, hints: { openerSeq: 1, resumeSeq: 1 }, backend: null });
  db.prepare('UPDATE compaction_notes SET cut = ? WHERE sid = ?').run('{"format": 3}', sid);
  const read = loadNotes(db, sid);
  assert.ok(read !== undefined && 'unreadable' in read && /format this build does not know/.test(read.unreadable));
  deleteSession(db, 's');
  assert.equal(count(db, 'SELECT count(*) FROM compaction_notes'), 0);
});
