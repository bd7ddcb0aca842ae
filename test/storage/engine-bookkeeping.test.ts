// The engine's bookkeeping in storage/log/: /extensions choices keep the order they
// were made in, what a fork inherits (choices and last prompt) against what it does not, and
// the prompt a session's model last knew.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inheritChoices, saveSessionChoices, sessionChoices } from '../../storage/log/extension-choices.ts';
import { knownPrompt, saveKnownPrompt, saveKnownTold } from '../../storage/log/known-prompt.ts';
import { inheritLastPrompt, lastPrompt, savePrepared } from '../../storage/log/prepared-requests.ts';
import { openSession, requireSession } from '../../storage/transcript/sessions.ts';
import { observationOf, tempDb } from './factories.ts';
import { owedCommitState } from '../../storage/db.ts';

test('choices made in the same millisecond come back in the order they were made, not by name', (t) => {
  const db = tempDb(t);
  const { sid } = requireSession(db, openSession(db, { session: 's' }).session);
  saveSessionChoices(db, sid, [
    { name: 'rolling', enabled: true, at: 1000 },
    { name: 'lcm', enabled: true, at: 1000 },
    { name: 'models', enabled: false, at: 1000 },
  ]);
  assert.deepEqual(
    sessionChoices(db, sid).map((c) => c.name),
    ['rolling', 'lcm', 'models'],
  );
  // A later save of the same list with one more choice keeps the earlier order too.
  saveSessionChoices(db, sid, [...sessionChoices(db, sid), { name: 'notes', enabled: true, at: 1000 }]);
  assert.deepEqual(
    sessionChoices(db, sid).map((c) => c.name),
    ['rolling', 'lcm', 'models', 'notes'],
  );
});

test('a clock that stepped back does not reorder choices', (t) => {
  const db = tempDb(t);
  const { sid } = requireSession(db, openSession(db, { session: 's' }).session);
  saveSessionChoices(db, sid, [
    { name: 'snapcompact', enabled: true, at: 5000 },
    { name: 'lcm', enabled: true, at: 4000 },
  ]);
  const back = sessionChoices(db, sid);
  assert.deepEqual(back.map((c) => c.name), ['snapcompact', 'lcm']);
  assert.ok(back[0]!.at < back[1]!.at);
});

/** A prepared request's observation with nothing in it, for session `session` (prepared id 'x'). */
test('a fork inherits the choices and the last prompt, copied to the branch only', (t) => {
  const db = tempDb(t);
  const parent = requireSession(db, openSession(db, { session: 'p' }).session).sid;
  const child = requireSession(db, openSession(db, { session: 'c' }).session).sid;
  saveSessionChoices(db, parent, [{ name: 'models', enabled: false, at: 7 }]);
  const observation = observationOf('p');
  const tools = [{ name: 't', description: 'a tool', input_schema: {} }];
  savePrepared(db, { id: 'x', sid: parent, head: 0, model: 'm1', estimate: 1, observation, prompt: { instructions: 'be brief', tools } });

  inheritChoices(db, parent, child);
  inheritLastPrompt(db, parent, child);
  assert.deepEqual(sessionChoices(db, child), [{ name: 'models', enabled: false, at: 7 }]);
  assert.deepEqual(lastPrompt(db, child), { model: 'm1', instructions: 'be brief', tools });
  assert.deepEqual(sessionChoices(db, parent), [{ name: 'models', enabled: false, at: 7 }], 'the parent keeps its own');
});

test('a prepare with the same prompt leaves the stored prompt alone; a changed one replaces it', (t) => {
  const db = tempDb(t);
  const { sid } = requireSession(db, openSession(db, { session: 's' }).session);
  const observation = observationOf('s');
  const tools = [{ name: 't', description: 'a tool', input_schema: {} }];
  // Counts the writes of the prompt row.
  db.exec(`CREATE TEMP TABLE prompt_writes (n INTEGER);
    CREATE TEMP TRIGGER pw_i AFTER INSERT ON session_prompts BEGIN INSERT INTO prompt_writes VALUES (1); END;
    CREATE TEMP TRIGGER pw_u AFTER UPDATE ON session_prompts BEGIN INSERT INTO prompt_writes VALUES (1); END;`);
  const writes = (): number => db.prepare('SELECT count(*) FROM prompt_writes').pluck().get() as number;
  db.pragma('synchronous = FULL');
  const save = (id: string, instructions: string, head: number): void => savePrepared(db, { id, sid, head, model: 'm1', estimate: 1, observation: { ...observation, prepared_id: id }, prompt: { instructions, tools } });

  save('a', 'be brief', 1);
  save('b', 'be brief', 2);
  save('c', 'be brief', 3);
  assert.equal(writes(), 1, 'the same prompt is written once');
  assert.deepEqual(lastPrompt(db, sid), { model: 'm1', instructions: 'be brief', tools });
  assert.equal(db.prepare('SELECT prepared_head FROM sessions WHERE sid = ?').pluck().get(sid), 3, 'every prepare still records its head');
  assert.equal(db.prepare('SELECT count(*) FROM prepared_requests WHERE sid = ?').pluck().get(sid), 3, 'and its observation');
  assert.equal(owedCommitState(db).pending, 1, 'only the first, a new prompt, is owed its fsync');
  save('d', 'be thorough', 4);
  assert.equal(writes(), 2);
  // Owed, not waited for on the event loop: the daemon pays it off the loop (durable) before the session's next task.
  assert.equal(owedCommitState(db).pending, 2);
  assert.deepEqual(lastPrompt(db, sid), { model: 'm1', instructions: 'be thorough', tools });
  // The connection's synchronous level (FULL) is what it was after prepares that skipped the fsync.
  assert.equal(db.pragma('synchronous', { simple: true }), 2);
});

test('the known prompt keeps the instructions it carried; a new system prompt clears what notices told, the same one keeps it', (t) => {
  const db = tempDb(t);
  const { sid } = requireSession(db, openSession(db, { session: 's' }).session);
  assert.equal(knownPrompt(db, sid), undefined, 'nothing sent yet');
  saveKnownPrompt(db, sid, { instructions: 'I1', context: 'C1' }, 'T');
  saveKnownTold(db, sid, { context: 'C1', instructions: 'I2' });
  saveKnownPrompt(db, sid, { instructions: 'I1', context: 'C1' }, 'T');
  assert.deepEqual(knownPrompt(db, sid), { instructions: 'I1', context: 'C1', toolsHash: 'T', told: { instructions: 'I2', context: 'C1' }, preparedHead: null });
  saveKnownPrompt(db, sid, { instructions: 'I2', context: 'C1' }, 'T');
  assert.deepEqual(knownPrompt(db, sid)?.told, { instructions: null, context: null }, 'rebuilt with other instructions: the notices are history');
  saveKnownTold(db, sid, { context: 'C2', instructions: null });
  saveKnownPrompt(db, sid, { instructions: 'I2', context: 'C2' }, 'T');
  assert.deepEqual(knownPrompt(db, sid), { instructions: 'I2', context: 'C2', toolsHash: 'T', told: { instructions: null, context: null }, preparedHead: null });
  // A row from before the instructions were kept: its first record does not count as a change.
  db.prepare('UPDATE sessions SET known_instructions = NULL, known_told = ? WHERE sid = ?').run('C3', sid);
  saveKnownPrompt(db, sid, { instructions: 'I2', context: 'C2' }, 'T');
  assert.deepEqual(knownPrompt(db, sid)?.told, { instructions: null, context: 'C3' });
  assert.equal(knownPrompt(db, sid)?.instructions, 'I2');
});
