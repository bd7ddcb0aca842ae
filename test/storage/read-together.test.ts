// readTogether (storage/db.ts): a synchronous stretch of reads runs in one transaction, so its
// reads see one state of the file even while another connection writes; a write inside commits
// at the end, a throw rolls it back, inside an open transaction the stretch joins it, and
// withoutFsync work inside it runs as part of it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openDb, readTogether, withoutFsync } from '../../storage/db.ts';
import { openSession, requireSession } from '../../storage/transcript/sessions.ts';
import { tempDbWithPath } from './factories.ts';

test('the reads of a stretch see one snapshot while another connection writes', (t) => {
  const { db, path } = tempDbWithPath(t);
  openSession(db, { session: 'a' });
  const other = openDb(path, { synchronous: 'NORMAL' });
  t.after(() => other.close());
  const names = () => db.prepare('SELECT name FROM sessions ORDER BY sid').pluck().all();

  const seen = readTogether(db, () => {
    const before = names();
    openSession(other, { session: 'b' });
    return [before, names()];
  });
  assert.deepEqual(seen, [['a'], ['a']]);
  assert.equal(db.inTransaction, false);
  assert.deepEqual(names(), ['a', 'b'], 'the write shows once the stretch is over');
});

test('a write inside commits at the end, a throw rolls it back, and an open transaction is joined', (t) => {
  const { db, path } = tempDbWithPath(t);
  readTogether(db, () => openSession(db, { session: 'kept' }));
  assert.equal(requireSession(db, 'kept').name, 'kept');

  assert.throws(
    () =>
      readTogether(db, () => {
        openSession(db, { session: 'lost' });
        throw new Error('boom');
      }),
    /boom/,
  );
  assert.equal(db.inTransaction, false);
  assert.throws(() => requireSession(db, 'lost'), { code: 'unknown_session' });

  // Inside a transaction the stretch is part of it: rolled back with it.
  assert.throws(() =>
    db.transaction(() => {
      readTogether(db, () => openSession(db, { session: 'inner' }));
      assert.equal(db.inTransaction, true);
      throw new Error('outer');
    })()
  );
  assert.throws(() => requireSession(db, 'inner'), { code: 'unknown_session' });

  // Work that commits without an fsync of its own (the indexer, the packer, prepared records)
  // may run inside: its commit is the stretch's (SQLite refuses to change the level there).
  const full = openDb(path, { synchronous: 'FULL' });
  t.after(() => full.close());
  readTogether(full, () => withoutFsync(full, () => openSession(full, { session: 'bookkeeping' })));
  assert.equal(requireSession(db, 'bookkeeping').name, 'bookkeeping');
  assert.equal(full.pragma('synchronous', { simple: true }), 2, 'the connection keeps its level (FULL)');
});
