// What the model of a session last learned of its system prompt, and when a pin holds: the
// system prompt stays while a notice told the model exactly what the prompt would say now and
// the tools are the same; the engine rebuilds it at the next compaction.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { noteSent, noteTold, pinnedPrompt, tellPromptChanges } from '../../daemon/capabilities.ts';
import { ExtensionsFile, type ConfigSnapshot } from '../../daemon/config.ts';
import { loadCatalog } from '../../strategies/catalog/models.ts';
import { BUILTIN_SET } from '../../strategies/index.ts';
import { knownPrompt } from '../../storage/log/known-prompt.ts';
import { recordingDb } from '../storage/recording-db.ts';
import type { Kernel } from '../../daemon/kernels.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { prepareRequest, type EngineSetup, type Prepared } from '../../strategies/prepare.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { tempDb } from '../storage/factories.ts';
import { argsFor, sessionWithTurns, setupFor } from '../strategies/engine-fixtures.ts';

const tool = (name: string) => ({ name, description: '', input_schema: {} });
const setup = (context: string, tools = ['transcript_read']): EngineSetup => ({ ...setupFor({}), extensionContext: context, extensionTools: tools.map(tool) });
const sent = (context: string, tools = ['transcript_read'], instructions = 'I'): Prepared => ({ extensionContext: context, instructions, tools: tools.map(tool) }) as Prepared;
const request = { instructions: 'I', tools: [] };
const parts = (context: string) => ({ instructions: 'I', context });

test('a pin holds only after the model was told of exactly the current context, with the same tools', (t) => {
  const db = tempDb(t);
  const sid = openSession(db, { session: 's' }).sid;
  const kernel: Kernel = { session: 's', loadedAt: 0, cache: new KernelCache() };
  assert.equal(pinnedPrompt(kernel, setup('B'), request), undefined, 'nothing sent yet: the current prompt');
  assert.equal(noteTold(kernel, 'B'), false, 'nothing sent yet: nobody to tell');
  noteSent(db, sid, kernel, setup('A'), request, sent('A'));
  assert.equal(pinnedPrompt(kernel, setup('B'), request), undefined, 'changed without a notice (an /extensions choice): the current prompt');
  assert.equal(noteTold(kernel, 'A'), false, 'the model already knows A: no notice');
  assert.equal(noteTold(kernel, 'B'), true, 'a reload tells it of B');
  assert.equal(noteTold(kernel, 'B'), false, 'once');
  assert.deepEqual(pinnedPrompt(kernel, setup('B'), request), parts('A'), 'told of B: the prompt the model has stays');
  assert.equal(pinnedPrompt(kernel, setup('C'), request), undefined, 'changed again since the notice');
  assert.equal(pinnedPrompt(kernel, setup('B', ['transcript_read', 'lcm_grep']), request), undefined, 'a changed tool set misses the cache anyway');
  noteSent(db, sid, kernel, setup('B'), request, sent('A'));
  assert.deepEqual(pinnedPrompt(kernel, setup('B'), request), parts('A'), 'a pinned request keeps the pin');
  noteSent(db, sid, kernel, setup('B'), request, sent('B'));
  assert.equal(pinnedPrompt(kernel, setup('B'), request), undefined, 'once a compaction rebuilt the prompt, nothing is pinned');
});

test('the engine sends the pinned context until a compaction, then the current one', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 3);
  const base = { ...setupFor({ window: 8000 }), extensionContext: 'NEW CONTEXT', pinnedPrompt: { instructions: 'You are a coding agent.', context: 'OLD CONTEXT' } };
  const quiet = await prepareRequest(base, argsFor(db, 's'));
  assert.equal(quiet.compacted, false);
  assert.equal(quiet.system, 'You are a coding agent.\n\nOLD CONTEXT');
  assert.equal(quiet.extensionContext, 'OLD CONTEXT');
  await sessionWithTurns(db, 'big', 40);
  const compacted = await prepareRequest(base, argsFor(db, 'big'));
  assert.equal(compacted.compacted, true);
  assert.equal(compacted.system, 'You are a coding agent.\n\nNEW CONTEXT');
  assert.equal(compacted.extensionContext, 'NEW CONTEXT');
  assert.equal(compacted.observation.sections[0]!.estimated_tokens, quiet.observation.sections[0]!.estimated_tokens, 'same-sized contexts: same pinned cost');
});

test('instructions the client changed without a notice go out, and a tool of the client counts toward the tool set', (t) => {
  const db = tempDb(t);
  const sid = openSession(db, { session: 's' }).sid;
  const kernel: Kernel = { session: 's', loadedAt: 0, cache: new KernelCache() };
  noteSent(db, sid, kernel, setup('A'), request, sent('A'));
  assert.equal(pinnedPrompt(kernel, setup('A'), { ...request, instructions: 'J' }), undefined, 'changed in a live session without a notice: they go out');
  assert.equal(noteTold(kernel, 'B'), true);
  assert.deepEqual(pinnedPrompt(kernel, setup('B'), request), parts('A'), 'told of B with the same tools: pinned');
  assert.equal(pinnedPrompt(kernel, setup('B'), { instructions: 'I', tools: [tool('bash')] }), undefined, 'the client added a tool of its own: the cache misses anyway');
});

test('the engine sends pinned instructions until a compaction, then the ones the client sends', async (t) => {
  const db = tempDb(t);
  await sessionWithTurns(db, 's', 3);
  const base = { ...setupFor({ window: 8000 }), extensionContext: 'CONTEXT', pinnedPrompt: { instructions: 'OLD INSTRUCTIONS', context: 'CONTEXT' } };
  const quiet = await prepareRequest(base, argsFor(db, 's'));
  assert.equal(quiet.compacted, false);
  assert.equal(quiet.system, 'OLD INSTRUCTIONS\n\nCONTEXT');
  assert.equal(quiet.instructions, 'OLD INSTRUCTIONS');
  assert.match(quiet.observation.sections[0]!.source, /^instructions from before the last restart/);
  await sessionWithTurns(db, 'big', 40);
  const compacted = await prepareRequest(base, argsFor(db, 'big'));
  assert.equal(compacted.compacted, true);
  assert.equal(compacted.system, 'You are a coding agent.\n\nCONTEXT');
  assert.equal(compacted.instructions, 'You are a coding agent.');
});

test('the prompt a request sent is written once: the same one again writes nothing, a changed one is written', (t) => {
  const db = tempDb(t);
  const sid = openSession(db, { session: 's' }).sid;
  const kernel: Kernel = { session: 's', loadedAt: 0, cache: new KernelCache() };
  const rec = recordingDb(db);
  const writes = () => rec.executed.filter((sql) => sql.includes('known_tools = @tools')).length;
  noteSent(rec.db, sid, kernel, setup('A'), request, sent('A'));
  assert.equal(writes(), 1);
  noteSent(rec.db, sid, kernel, setup('A'), request, sent('A'));
  noteSent(rec.db, sid, kernel, setup('A'), request, sent('A'));
  assert.equal(writes(), 1, 'the same prompt and tools: the row already holds them');
  noteSent(rec.db, sid, kernel, setup('A'), request, sent('A', ['transcript_read', 'lcm_grep']));
  assert.equal(writes(), 2, 'other tools');
  noteSent(rec.db, sid, kernel, setup('A'), request, sent('A', ['transcript_read', 'lcm_grep'], 'J'));
  assert.equal(writes(), 3, 'other instructions');
  assert.equal(knownPrompt(db, sid)?.instructions, 'J');
});

test('a row recorded before instructions were kept is written at the next request, though nothing changed', (t) => {
  const db = tempDb(t);
  const sid = openSession(db, { session: 's' }).sid;
  noteSent(db, sid, { session: 's', loadedAt: 0, cache: new KernelCache() }, setup(''), request, sent(''));
  db.prepare('UPDATE sessions SET known_instructions = NULL WHERE sid = ?').run(sid);
  // A restart: a new kernel adopts the row, then sends the same prompt.
  const kernel: Kernel = { session: 's', loadedAt: 0, cache: new KernelCache() };
  const config: ConfigSnapshot = { modules: BUILTIN_SET, extensions: ExtensionsFile.parse({ extensions: { disable: ['lcm-memory', 'snapcompact-memory', 'notes'] } }), models: loadCatalog(), version: 1 };
  assert.equal(tellPromptChanges(kernel, db, config, sid, request), false, 'nothing to tell');
  noteSent(db, sid, kernel, setup(''), request, sent(''));
  assert.equal(knownPrompt(db, sid)?.instructions, 'I', 'the instructions are recorded now');
});
