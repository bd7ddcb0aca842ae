// Sessions: open and reopen, lookups, the list summary and deletion with payload cleanup.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlbedoError } from '../../protocol/errors.ts';
import { getPayload } from '../../storage/images/payloads.ts';
import { deleteSession, findSession, listSessions, openSession, requireSession } from '../../storage/transcript/sessions.ts';
import { appendRows, forkSession } from '../../storage/transcript/write.ts';
import { count, imageIn, pngBytes, tempDb, user } from './factories.ts';

test('opening a new id creates it; reopening answers created:false with the same sid', (t) => {
  const db = tempDb(t);
  const a = openSession(db, { session: 's1', workspace: '/w/one' });
  assert.equal(a.created, true);
  const b = openSession(db, { session: 's1', workspace: '/w/other' });
  assert.deepEqual(b, { session: 's1', sid: a.sid, created: false });
  assert.equal(requireSession(db, 's1').workspace, '/w/one', 'a differing workspace does not replace the stored one');
});

test('a session opened without workspace records the first one given later', (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's1' });
  openSession(db, { session: 's1', workspace: '/w' });
  assert.equal(requireSession(db, 's1').workspace, '/w');
});

// issue 30, defect 9: an imported subagent's transcript is a child session of its main one.
test('a session opened with a parent records it; the parent must exist, and a parent set once is kept', (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'main' });
  openSession(db, { session: 'other' });
  assert.equal(openSession(db, { session: 'main:agent-1', parent: 'main' }).created, true);
  assert.equal(requireSession(db, 'main:agent-1').parent, 'main');
  openSession(db, { session: 'main:agent-1', parent: 'other' });
  assert.equal(requireSession(db, 'main:agent-1').parent, 'main', 'a differing parent does not replace the stored one');
  openSession(db, { session: 'late' });
  openSession(db, { session: 'late', parent: 'main' });
  assert.equal(requireSession(db, 'late').parent, 'main', 'a session without a parent gets the first one given');
  assert.throws(() => openSession(db, { session: 'orphan', parent: 'nobody' }), (e: unknown) => e instanceof AlbedoError && e.code === 'unknown_session');
  assert.equal(findSession(db, 'orphan'), undefined, 'nothing is created for an unknown parent');
  assert.throws(() => openSession(db, { session: 'main', parent: 'main' }), /cannot be its own parent/);
});

test('opening without an id makes a fresh UUID each time', (t) => {
  const db = tempDb(t);
  const a = openSession(db, {});
  const b = openSession(db, {});
  assert.match(a.session, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.notEqual(a.session, b.session);
  assert.equal(a.created && b.created, true);
});

test('requireSession throws unknown_session naming the id; findSession answers undefined', (t) => {
  const db = tempDb(t);
  assert.equal(findSession(db, 'nope'), undefined);
  assert.throws(
    () => requireSession(db, 'nope'),
    (e: unknown) =>
      e instanceof AlbedoError && e.code === 'unknown_session' && e.message === 'unknown session "nope"' &&
      e.details?.session === 'nope',
  );
});

test('listSessions reports head, row count and parent per session', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a', workspace: '/w' });
  openSession(db, { session: 'b' });
  openSession(db, { session: 'empty' });
  await appendRows(db, 'a', [user('a1')]);
  await appendRows(db, 'b', [user('b1')]);
  const last = await appendRows(db, 'a', [user('a2'), user('a3')]);
  forkSession(db, 'a', { branch: 'a-fork', now: () => 5 });
  const byName = new Map(listSessions(db).map((s) => [s.session, s]));
  assert.equal(byName.get('a')?.head, last.head);
  assert.equal(byName.get('a')?.rows, 3);
  assert.equal(byName.get('a')?.workspace, '/w');
  assert.equal(byName.get('b')?.rows, 1);
  assert.deepEqual(byName.get('empty'), { ...byName.get('empty'), head: 0, rows: 0, parent: null });
  const fork = byName.get('a-fork');
  assert.equal(fork?.parent, 'a');
  assert.equal(fork?.rows, 3);
  assert.equal(fork?.workspace, '/w', 'a fork inherits the workspace');
  assert.equal(fork?.created_at, 5);
  assert.ok((fork?.head ?? 0) > last.head);
});

test('deleting a session removes its rows and the payloads only it used, keeps shared ones', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  const shared = await pngBytes(4, 4);
  const own = await pngBytes(5, 5);
  const ra = await appendRows(db, 'a', [user('x', { images: [imageIn(shared, 'image/png'), imageIn(own, 'image/png')] })]);
  await appendRows(db, 'b', [user('y', { images: [imageIn(shared, 'image/png')] })]);
  const [sharedHash, ownHash] = (
    JSON.parse(db.prepare('SELECT body FROM transcript WHERE seq = ?').pluck().get(ra.seqs[0]) as string) as { content: Array<{ hash?: string }> }
  ).content
    .filter((p) => p.hash)
    .map((p) => p.hash as string);
  forkSession(db, 'a', { branch: 'a-child' });

  assert.equal(deleteSession(db, 'a'), true);
  assert.equal(findSession(db, 'a'), undefined);
  assert.equal(count(db, "SELECT count(*) FROM transcript t JOIN sessions s USING (sid) WHERE s.name = 'b'"), 1);
  // The child copied the rows (and their references), so both payloads are still named.
  assert.ok(getPayload(db, ownHash!));
  const child = requireSession(db, 'a-child');
  assert.equal(child.parent_sid, null, 'children keep living without a parent');
  assert.equal(child.parent, null);

  assert.equal(deleteSession(db, 'a-child'), true);
  assert.equal(getPayload(db, ownHash!), undefined, 'a payload no session names is collected');
  assert.ok(getPayload(db, sharedHash!), 'a payload another session still names stays');
  assert.equal(count(db, 'SELECT count(*) FROM payload_refs'), 1);
  assert.equal(count(db, 'SELECT count(*) FROM transcript'), 1);
  assert.equal(deleteSession(db, 'a-child'), false, 'deleting an unknown session answers false');
});

test('deleting a session drops its tool calls so no orphan remains', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a' });
  await appendRows(db, 'a', [
    user('go'),
    { kind: 'assistant', content: [{ type: 'tool_call', id: 'c1', name: 'n', arguments: {} }] },
  ]);
  assert.equal(count(db, 'SELECT count(*) FROM tool_calls'), 1);
  deleteSession(db, 'a');
  assert.equal(count(db, 'SELECT count(*) FROM tool_calls'), 0);
});
