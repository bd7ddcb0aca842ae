// Reconcile: the agent's whole history arrives with every request; only what is new is stored,
// a retry stores nothing, and a history that departs from the stored one continues in a fork
// while the stored rows stay as they were.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { WireMessage } from '../../../daemon/proxy/anthropic-wire.ts';
import { anthropicWire } from '../../../daemon/proxy/anthropic.ts';
import { identify, type Identity } from '../../../daemon/proxy/identity.ts';
import { CHAIN_LINKS, CHAIN_MEMO, matchChain, proxySessionFor, reconcile, recordAnswer } from '../../../daemon/proxy/reconcile.ts';
import type { MessageCodec } from '../../../daemon/proxy/wire.ts';
import { KernelCache } from '../../../strategies/harness/kernel-cache.ts';
import { owedCommitState, type Db } from '../../../storage/db.ts';
import { chainStamp, countSideRequest, currentProxySession, dropChainFrom, messageChain, noteClientCompaction, noteMemoryCall, notePassedThrough, noteRun, proxySession } from '../../../storage/log/proxy-state.ts';
import { recordWriteLevels } from '../../storage/recording-db.ts';
import { findSession } from '../../../storage/transcript/sessions.ts';
import { rowsOf, tempDb } from '../../storage/factories.ts';

/** The identity the Anthropic wire reads off these headers and this body. */
function idOf(headers: Record<string, string>, body: unknown): Identity {
  const r = anthropicWire.read(body, headers, 'http://upstream.invalid');
  if ('error' in r) throw new Error(r.error);
  return identify({ headers, ...r.identity });
}

const u = (text: string): WireMessage => ({ role: 'user', content: text });
const call = (id: string, command: string): WireMessage => ({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'Bash', input: { command } }] });
const result = (id: string, text: string): WireMessage => ({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: text }] });

function setup(t: TestContext, first = 'fix the bug'): { db: Db; session: { sid: number; name: string }; identity: string } {
  const db = tempDb(t);
  const body = { model: 'claude-sonnet-4-5', messages: [u(first)], system: 'You are pi.' };
  const id = idOf({ 'x-api-key': 'sk-test', 'user-agent': 'pi/0.73.1' }, body);
  const s = proxySessionFor(db, 'anthropic', id);
  return { db, session: { sid: s.sid, name: s.name }, identity: id.identity };
}

test('a proxy session is created with an owed commit, and the requests after it owe nothing', (t) => {
  const db = tempDb(t);
  const body = { model: 'claude-sonnet-4-5', messages: [u('fix the bug')], system: 'You are pi.' };
  const id = idOf({ 'x-api-key': 'sk-test', 'user-agent': 'pi/0.73.1' }, body);
  const before = owedCommitState(db).pending;
  const first = proxySessionFor(db, 'anthropic', id);
  assert.equal(first.created, true);
  // Owed (storage/db.ts commitOwed): the request's reconcile or prepare pays it off the loop.
  assert.equal(owedCommitState(db).pending, before + 1);
  const again = proxySessionFor(db, 'anthropic', id);
  assert.deepEqual([again.created, again.sid], [false, first.sid]);
  assert.equal(owedCommitState(db).pending, before + 1, 'a request to a known session writes nothing');
});

test('what /context tells of a proxied session is written without an fsync, on a connection at FULL too', (t) => {
  const db = tempDb(t);
  db.pragma('synchronous = FULL');
  // Before the file's proxy statements are first prepared, so that all of them are seen.
  const levels = recordWriteLevels(db, 'proxy_');
  const body = { model: 'claude-sonnet-4-5', messages: [u('fix the bug')], system: 'You are pi.' };
  const session = proxySessionFor(db, 'anthropic', idOf({ 'x-api-key': 'sk-test', 'user-agent': 'pi/0.73.1' }, body));
  countSideRequest(db, session.sid, 10, 2);
  notePassedThrough(db, session.sid, 'the window is unknown');
  noteRun(db, session.sid, 'run-1');
  noteClientCompaction(db, session.sid);
  noteMemoryCall(db, session.sid, { turn: 1, round: 1, name: 'lcm_grep', arguments: { pattern: 'x' }, isError: false, inputTokens: 5, outputTokens: 1, now: 1 });
  // The session's own row (an owed commit) and the five notes.
  assert.deepEqual(levels, [1, 1, 1, 1, 1, 1], 'each written at NORMAL');
  assert.equal(db.pragma('synchronous', { simple: true }), 2, 'and the level put back');
  const state = proxySession(db, session.sid);
  assert.deepEqual([state?.side_requests, state?.passed_through, state?.client_compactions], [1, 1, 1]);
});

test('the same history sent again stores nothing; one more message stores only its rows', async (t) => {
  const { db, session } = setup(t);
  const history = [u('fix the bug'), call('c1', 'ls'), result('c1', 'a.ts')];
  const first = await reconcile(db, anthropicWire, session, history);
  assert.equal(first.appended, 3);
  const again = await reconcile(db, anthropicWire, session, history);
  assert.equal(again.appended, 0, 'a retried request stores nothing twice');
  // The agent moved its cache marker and switched the string form for a block: the same messages.
  const reshaped = [{ role: 'user' as const, content: [{ type: 'text', text: 'fix the bug', cache_control: { type: 'ephemeral' } }] }, history[1]!, history[2]!];
  const next = await reconcile(db, anthropicWire, session, [...reshaped, call('c2', 'cat a.ts')]);
  assert.equal(next.appended, 1);
  assert.equal(next.forkedFrom, null);
  assert.equal(rowsOf(db, session.name).length, 4);
});

test('an earlier prompt edited by the client forks at the edit; the stored session keeps every row', async (t) => {
  const { db, session, identity } = setup(t);
  await reconcile(db, anthropicWire, session, [u('fix the bug'), call('c1', 'ls'), result('c1', 'a.ts'), call('c2', 'cat a.ts'), result('c2', 'x = 1'), u('now the tests')]);
  const before = rowsOf(db, session.name).map((r) => r.text);
  const edited = await reconcile(db, anthropicWire, session, [u('fix the bug'), call('c1', 'ls'), result('c1', 'a.ts'), u('only list it')]);
  assert.equal(edited.forkedFrom, session.name);
  assert.notEqual(edited.target.name, session.name);
  assert.deepEqual(rowsOf(db, session.name).map((r) => r.text), before, 'nothing stored is rewritten');
  const fork = rowsOf(db, edited.target.name).map((r) => r.text);
  assert.deepEqual(fork, [...before.slice(0, 3), 'only list it']);
  assert.equal(findSession(db, edited.target.name)?.parent, session.name);
  assert.equal(currentProxySession(db, identity)?.name, edited.target.name, 'the next request goes to the fork');
  // And it continues there without forking again.
  const more = await reconcile(db, anthropicWire, edited.target, [u('fix the bug'), call('c1', 'ls'), result('c1', 'a.ts'), u('only list it'), call('c3', 'ls -la')]);
  assert.equal(more.forkedFrom, null);
  assert.equal(more.appended, 1);
});

test('a recorded answer the agent sends back in another shape is the same turn, not a fork', async (t) => {
  const { db, session } = setup(t);
  const r = await reconcile(db, anthropicWire, session, [u('fix the bug')]);
  // The tee built the turn with an empty text block first; the agent drops it when it echoes.
  await recordAnswer(db, anthropicWire, session, r.links, [{ role: 'assistant', content: [{ type: 'text', text: '' }, { type: 'tool_use', id: 'c1', name: 'Bash', input: { command: 'ls' } }] }]);
  const next = await reconcile(db, anthropicWire, session, [u('fix the bug'), call('c1', 'ls'), result('c1', 'a.ts')]);
  assert.equal(next.forkedFrom, null);
  assert.equal(next.appended, 1);
  assert.deepEqual(rowsOf(db, session.name).map((r) => r.kind), ['user', 'assistant', 'tool_result']);
});

test('the reshaped answer sent back alone stores only its links, an owed commit paid off the loop before reconcile returns', async (t) => {
  const { db, session } = setup(t);
  const r = await reconcile(db, anthropicWire, session, [u('fix the bug')]);
  await recordAnswer(db, anthropicWire, session, r.links, [{ role: 'assistant', content: [{ type: 'text', text: '' }, { type: 'tool_use', id: 'c1', name: 'Bash', input: { command: 'ls' } }] }]);
  const before = owedCommitState(db);
  const next = await reconcile(db, anthropicWire, session, [u('fix the bug'), call('c1', 'ls')]);
  assert.equal(next.appended, 0);
  assert.equal(next.forkedFrom, null);
  // storage/db.ts commitOwed then durable: one more flush, nothing left owed (a commit at FULL, on the loop, counts neither).
  assert.deepEqual(owedCommitState(db), { pending: 0, flushes: before.flushes + 1 });
  assert.equal(messageChain(db, session.sid)[1]?.chain, next.links[1]?.chain, "the agent's hash is stored");
});

test('a rewind (a strict prefix of the stored history) continues in a fork at its end', async (t) => {
  const { db, session } = setup(t);
  await reconcile(db, anthropicWire, session, [u('fix the bug'), call('c1', 'ls'), result('c1', 'a.ts'), u('and the docs')]);
  const back = await reconcile(db, anthropicWire, session, [u('fix the bug'), call('c1', 'ls'), result('c1', 'a.ts')]);
  assert.equal(back.forkedFrom, session.name);
  assert.equal(rowsOf(db, back.target.name).length, 3);
  assert.equal(rowsOf(db, session.name).length, 4);
});

test('a retry after the answer was recorded is not a rewind', async (t) => {
  const { db, session } = setup(t);
  const r = await reconcile(db, anthropicWire, session, [u('fix the bug')]);
  await recordAnswer(db, anthropicWire, session, r.links, [{ role: 'assistant', content: [{ type: 'text', text: 'on it' }] }]);
  const retry = await reconcile(db, anthropicWire, session, [u('fix the bug')]);
  assert.equal(retry.forkedFrom, null);
  assert.equal(retry.appended, 0);
});

test('a conversation with another opening under the same agent session id is a child session (a Task subagent)', (t) => {
  const db = tempDb(t);
  const headers = { 'x-api-key': 'sk-test', 'x-claude-code-session-id': '73765bef-eced', 'user-agent': 'claude-cli/2.1.332 (external, sdk-cli)' };
  const main = { model: 'claude-opus-5-5', messages: [u('fix the bug')], system: 'main prompt', tools: [{ name: 'Task' }] };
  const sub = { model: 'claude-opus-5-5', messages: [u('search the repo for X')], system: 'subagent prompt', tools: [{ name: 'Grep' }] };
  const a = proxySessionFor(db, 'anthropic', idOf(headers, main));
  const b = proxySessionFor(db, 'anthropic', idOf(headers, sub));
  assert.equal(a.name, 'claude-73765bef');
  assert.notEqual(b.sid, a.sid);
  assert.equal(findSession(db, b.name)?.parent, a.name);
  // Another credential without an account is another namespace: never the same session.
  const other = proxySessionFor(db, 'anthropic', idOf({ ...headers, 'x-api-key': 'sk-other' }, main));
  assert.notEqual(other.sid, a.sid);
});

/** The Anthropic codec, counting the messages it is asked to hash. */
function counting(): { codec: MessageCodec<WireMessage>; hashed: WireMessage[] } {
  const hashed: WireMessage[] = [];
  return { hashed, codec: { ...anthropicWire, canonical: (m) => (hashed.push(m), anthropicWire.canonical(m)) } };
}

test('the memo of the previous request hashes only what changed, and its chains are the ones hashing gives', () => {
  const history = [u('fix the bug'), call('c1', 'ls'), result('c1', 'a.ts'), call('c2', 'cat a.ts'), result('c2', 'x = 1')];
  const plain = matchChain(anthropicWire, [], history);
  const { codec, hashed } = counting();
  const again = matchChain(codec, [], history, { messages: structuredClone(history), chains: plain.chains });
  assert.deepEqual(again.chains, plain.chains);
  assert.equal(hashed.length, 0, 'an equal history (other objects, same content) is not hashed again');

  // One more message, and the agent's cache marker moved onto the last one it sent before.
  const marked: WireMessage = { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'c2', content: 'x = 1', cache_control: { type: 'ephemeral' } }] };
  const next = [...history.slice(0, 4), marked, u('now the tests')];
  const memoed = matchChain(codec, [], next, { messages: history, chains: plain.chains });
  assert.deepEqual(memoed.chains, matchChain(anthropicWire, [], next).chains);
  assert.deepEqual(hashed, [marked, next[5]], 'only the changed message and the new one are hashed');

  // The same message with its keys in another order is hashed, and gets the same chain.
  hashed.length = 0;
  const reordered = [{ content: history[0]!.content, role: 'user' } as WireMessage, ...history.slice(1)];
  assert.deepEqual(matchChain(codec, [], reordered, { messages: history, chains: plain.chains }).chains, plain.chains);
  assert.deepEqual(hashed, [reordered[0]]);

  // An edit early on: everything from it on is hashed again (the chain after it differs).
  hashed.length = 0;
  const edited = [u('fix the other bug'), ...history.slice(1)];
  const e = matchChain(codec, [], edited, { messages: history, chains: plain.chains });
  assert.deepEqual(e.chains, matchChain(anthropicWire, [], edited).chains);
  assert.equal(hashed.length, edited.length);
  assert.notEqual(e.chains[4], plain.chains[4]);
});

test('reconcile keeps the memo in the kernel cache it is given; an edit still forks with it', async (t) => {
  const { db, session } = setup(t);
  const cache = new KernelCache();
  const history = [u('fix the bug'), call('c1', 'ls'), result('c1', 'a.ts')];
  await reconcile(db, anthropicWire, session, history, { cache });
  assert.equal(cache.get(CHAIN_MEMO)?.chains.length, 3);
  const retry = await reconcile(db, anthropicWire, session, structuredClone(history), { cache });
  assert.deepEqual([retry.appended, retry.forkedFrom], [0, null]);
  const edited = await reconcile(db, anthropicWire, session, [u('fix the bug'), call('c1', 'ls -la'), result('c1', 'a.ts')], { cache });
  assert.equal(edited.forkedFrom, session.name, 'a changed message is never taken from the memo');
});

test('the kernel keeps the stored chain under its stamp after each write; a write it did not make is read again', async (t) => {
  const { db, session } = setup(t);
  const cache = new KernelCache();
  const history = [u('fix the bug'), call('c1', 'ls'), result('c1', 'a.ts')];
  const first = await reconcile(db, anthropicWire, session, history, { cache });
  const kept = (): { stamp: number; links: number } | undefined => {
    const k = cache.get(CHAIN_LINKS);
    return k === undefined ? undefined : { stamp: k.stamp, links: k.links.length };
  };
  // Warm after the request's own write: the next request reads the stamp, not the chain.
  assert.deepEqual(kept(), { stamp: chainStamp(db, session.sid), links: 3 });
  assert.notEqual(chainStamp(db, session.sid), 0);
  await recordAnswer(db, anthropicWire, session, first.links, [{ role: 'assistant', content: [{ type: 'text', text: 'done' }] }], { cache });
  assert.deepEqual(kept(), { stamp: chainStamp(db, session.sid), links: 4 });
  // Another writer drops the chain: the stamp moves, so the next request reads it again and
  // links the history anew instead of trusting the kept copy (which would store nothing).
  db.transaction(() => dropChainFrom(db, session.sid, 0))();
  assert.notEqual(kept()?.stamp, chainStamp(db, session.sid));
  const again = await reconcile(db, anthropicWire, session, history, { cache });
  assert.equal(again.forkedFrom, null);
  assert.equal(messageChain(db, session.sid).length, 3);
  assert.deepEqual(kept(), { stamp: chainStamp(db, session.sid), links: 3 });
});
