// A saved state read once per write (strategies/harness/saved-state.ts over migration 24's stamp):
// reused while nothing wrote it, read again after any write — the daemon's own saves, a raw
// UPDATE, a delete — and never mistaken for a save that was rolled back.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadNotes, saveNotes } from '../../storage/state/notes.ts';
import { openSession, stateStamp } from '../../storage/transcript/sessions.ts';
import type { StrategyInput } from '../../strategies/contract.ts';
import { START_CUT } from '../../strategies/harness/cut.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { loadSaved, savedSlot } from '../../strategies/harness/saved-state.ts';
import { tempDb } from '../storage/factories.ts';

const NOTES = savedSlot<string | undefined>('test.notes');
const hints = { openerSeq: 1, resumeSeq: 1 };

test('a saved state is parsed once per write, whoever writes it', (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const other = openSession(db, { session: 'o' }).sid;
  const input = { db, session: { sid, name: 's' }, cache: new KernelCache() } as unknown as StrategyInput;
  let loads = 0;
  const read = (): string | undefined => {
    loads += 1;
    const n = loadNotes(db, sid);
    return n === undefined || 'unreadable' in n ? undefined : n.text;
  };
  assert.equal(stateStamp(db, sid), 0, 'nothing saved yet');
  assert.equal(loadSaved(input, NOTES, read), undefined);
  assert.equal(loadSaved(input, NOTES, read), undefined);
  assert.equal(loads, 1, 'read once while nothing is written');

  saveNotes(db, sid, { text: 'v1', cut: START_CUT, hints, backend: null });
  assert.equal(loadSaved(input, NOTES, read), 'v1');
  assert.equal(loadSaved(input, NOTES, read), 'v1');
  assert.equal(loads, 2);

  saveNotes(db, other, { text: 'elsewhere', cut: START_CUT, hints, backend: null });
  assert.equal(loadSaved(input, NOTES, read), 'v1');
  assert.equal(loads, 2, "another session's save changes nothing here");

  db.prepare("UPDATE compaction_notes SET text = 'by hand' WHERE sid = ?").run(sid);
  assert.equal(loadSaved(input, NOTES, read), 'by hand', 'a raw UPDATE is seen too');
  db.prepare('DELETE FROM compaction_notes WHERE sid = ?').run(sid);
  assert.equal(loadSaved(input, NOTES, read), undefined, 'and a delete');
  assert.equal(loads, 4);
});

test('a state read inside a save that rolled back is not taken for the next save', (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const input = { db, session: { sid, name: 's' }, cache: new KernelCache() } as unknown as StrategyInput;
  const read = (): string | undefined => {
    const n = loadNotes(db, sid);
    return n === undefined || 'unreadable' in n ? undefined : n.text;
  };
  saveNotes(db, sid, { text: 'v1', cut: START_CUT, hints, backend: null });
  assert.equal(loadSaved(input, NOTES, read), 'v1');
  // A compaction saves, reads its own state back inside the same transaction, then fails.
  assert.throws(() =>
    db.transaction(() => {
      saveNotes(db, sid, { text: 'discarded', cut: START_CUT, hints, backend: null });
      assert.equal(loadSaved(input, NOTES, read), 'discarded');
      throw new Error('the commit failed');
    })()
  );
  // The next save must not look like the rolled-back one (a counter would reach the same value).
  saveNotes(db, sid, { text: 'v2', cut: START_CUT, hints, backend: null });
  assert.equal(loadSaved(input, NOTES, read), 'v2');
});
