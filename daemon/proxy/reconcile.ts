// Reconcile: the agent re-sends its whole history on every request; this stores only what is
// new. Each conversation message gets a chained hash over the normalized messages up to it
// (its wire's MessageCodec.canonical); the session remembers that chain (proxy_messages), and its
// kernel the previous request's messages (ChainMemo), so a request costs a comparison per message,
// a hash of those that changed and an append of the new ones. A history that departs from the
// chain continues in a fork at the departure: nothing stored is ever rewritten.
import { createHash } from 'node:crypto';
import { AlbedoError } from '../../protocol/errors.ts';
import { RowIn } from '../../protocol/rows.ts';
import { z } from 'zod';
import { commitOwed, durable, type Db } from '../../storage/db.ts';
import { addProxySession, chainStamp, currentProxySession, proxySession, dropChainFrom, firstOfFamily, messageChain, noteAgent, putChainLinks, retireProxySession, type ChainLink } from '../../storage/log/proxy-state.ts';
import { createSession, findSession } from '../../storage/transcript/sessions.ts';
import { appendRows, forkMap, forkSession } from '../../storage/transcript/write.ts';
import { sameJson } from '../../protocol/json-equal.ts';
import { cacheSlot, type KernelCache } from '../../strategies/harness/kernel-cache.ts';
import type { Identity } from './identity.ts';
import type { MessageCodec } from './wire.ts';

export interface ProxyTarget {
  sid: number;
  name: string;
}

/** sha256 of the previous link's chain and a message's canonical form. */
export function chainHash(previous: string, canonical: string): string {
  return createHash('sha256').update(previous).update('\n').update(canonical).digest('hex');
}

/** `stem`, or `stem@2`, `stem@3`, ... for the first name no session has. */
function uniqueName(db: Db, stem: string): string {
  if (findSession(db, stem) === undefined) return stem;
  for (let n = 2;; n++) if (findSession(db, `${stem}@${n}`) === undefined) return `${stem}@${n}`;
}

/**
 * The session this identity's requests go to, created on its first request. A conversation
 * that shares its family (the agent's session id) with an earlier one is that one's child. The
 * commit is owed (storage/db.ts commitOwed): the request's reconcile or prepare that follows
 * awaits `durable` before anything goes out.
 */
export function proxySessionFor(db: Db, wire: string, id: Identity, now = Date.now()): ProxyTarget & { created: boolean } {
  // Every request after the first: nothing to write, so nothing owed.
  const known = currentProxySession(db, id.identity);
  if (known !== undefined && (id.agent === null || known.agent === id.agent)) return { sid: known.sid, name: known.name, created: false };
  return commitOwed(db, () => {
    const current = currentProxySession(db, id.identity);
    if (current !== undefined) {
      if (id.agent !== null && current.agent !== id.agent) noteAgent(db, current.sid, id.agent);
      return { sid: current.sid, name: current.name, created: false };
    }
    const parent = id.family === id.identity ? undefined : firstOfFamily(db, id.family);
    const name = uniqueName(db, parent === undefined ? id.stem : `${parent.name}.sub`);
    const sid = createSession(db, { name, workspace: null, created_at: now, parent_sid: parent?.sid ?? null });
    if (sid === undefined) throw new Error(`session "${name}" appeared while it was created`);
    addProxySession(db, { sid, wire, identity: id.identity, family: id.family, namespace: id.namespace, parentSid: parent?.sid ?? null, agent: id.agent, now });
    return { sid, name, created: true };
  });
}

export interface Reconciled {
  target: ProxyTarget;
  /** Rows stored by this request. */
  appended: number;
  /** Set when the history departed from what was stored: the session it continues in came from this one. */
  forkedFrom: string | null;
  /** The chain as it stands after this request (its last link is the newest message's). */
  links: ChainLink[];
}

/** Rows of one message with their client keys (position and chain), each checked as transcript.append would. */
function keyedRows<M>(codec: MessageCodec<M>, m: M, idx: number, chain: string): RowIn[] {
  return codec.rows(m).map((row, k) => {
    const parsed = RowIn.safeParse({ ...row, key: `px:${idx}:${chain.slice(0, 40)}:${k}` });
    if (!parsed.success) {
      throw new AlbedoError('invalid_proxy_request', `message ${idx} (${codec.label(m)}) cannot be stored: ${z.prettifyError(parsed.error).replaceAll('\n', '; ')}`, { message: idx });
    }
    return parsed.data;
  });
}

/**
 * Continues the identity in a fork of `from` holding its first `keep` messages (rows up to the
 * last of them); a fork of nothing is a new, empty session linked to `from`.
 */
function forkAt(db: Db, from: ProxyTarget, links: readonly ChainLink[], keep: number, now: number): { target: ProxyTarget; links: ChainLink[] } {
  return db.transaction(() => {
    const state = proxySession(db, from.sid);
    if (state === undefined) throw new Error(`session "${from.name}" is not a proxy session`);
    const name = uniqueName(db, from.name.replace(/@\d+$/, ''));
    let sid: number;
    let kept: ChainLink[] = [];
    if (keep === 0) {
      const created = createSession(db, { name, workspace: null, created_at: now, parent_sid: from.sid });
      if (created === undefined) throw new Error(`session "${name}" appeared while it was created`);
      sid = created;
    } else {
      const at = links[keep - 1]!.last_seq;
      const fork = forkSession(db, from.name, { at, branch: name, now: () => now });
      sid = fork.sid;
      const map = forkMap(db, sid);
      // A message that stored no row of its own points at its predecessor's last row, possibly none.
      kept = links.slice(0, keep).map((l) => ({ ...l, last_seq: map.get(l.last_seq) ?? 0 }));
      putChainLinks(db, sid, kept);
    }
    retireProxySession(db, from.sid);
    addProxySession(db, { sid, wire: state.wire, identity: state.identity, family: state.family, namespace: state.namespace, parentSid: from.sid, agent: state.agent, now });
    return { target: { sid, name }, links: kept };
  })();
}

/**
 * The previous request's messages and their chained hashes, kept in the session's kernel. A
 * chain depends only on the messages up to it, so a message equal to the one at its place in
 * the previous request, after the same chain, has that message's chain: an agent that sends its
 * history again costs a comparison of what it sent before, not a hash of it. Only the messages
 * that changed (the new ones, the one the agent's cache marker moved from) are hashed.
 */
export interface ChainMemo {
  messages: readonly unknown[];
  chains: readonly string[];
}

export const CHAIN_MEMO = cacheSlot<ChainMemo>('proxy.chainMemo');

/** The session's stored chain as its kernel last read or wrote it, with the stamp it had then (migration 30). */
export const CHAIN_LINKS = cacheSlot<{ sid: number; stamp: number; links: readonly ChainLink[] }>('proxy.chainLinks');

/** The stored chain of `sid`: the kernel's copy while the stamp holds, else read (and kept). */
function storedChain(db: Db, sid: number, cache: KernelCache | undefined): readonly ChainLink[] {
  if (cache === undefined) return messageChain(db, sid);
  const stamp = chainStamp(db, sid);
  const kept = cache.get(CHAIN_LINKS);
  if (kept !== undefined && kept.sid === sid && kept.stamp === stamp) return kept.links;
  const links = messageChain(db, sid);
  cache.set(CHAIN_LINKS, { sid, stamp, links });
  return links;
}

/**
 * Keeps `links` as the chain of `sid` once a write of this kernel's has committed: the stamp it
 * reads now is the one that write left, and only this session's kernel writes its chain.
 */
function keepChain(db: Db, sid: number, links: readonly ChainLink[], cache: KernelCache | undefined): void {
  cache?.set(CHAIN_LINKS, { sid, stamp: chainStamp(db, sid), links });
}

/**
 * How far `conversation` agrees with the stored chain: the chained hash of each of its
 * messages, how many of them are stored already, and whether it departs from what is stored.
 */
export function matchChain<M>(codec: MessageCodec<M>, links: readonly ChainLink[], conversation: readonly M[], memo?: ChainMemo): { chains: string[]; matched: number; departed: boolean } {
  const chains: string[] = [];
  let previous = '';
  let matched = 0;
  let departed = false;
  for (let i = 0; i < conversation.length; i++) {
    const m = conversation[i]!;
    const known = memo !== undefined && i < memo.messages.length && previous === (i === 0 ? '' : memo.chains[i - 1]) && sameJson(memo.messages[i], m);
    previous = known ? memo.chains[i]! : chainHash(previous, codec.canonical(m));
    chains.push(previous);
    if (departed || i >= links.length) continue;
    const link = links[i]!;
    if (link.chain === previous) matched = i + 1;
    else if (link.recorded && codec.isAnswer(m) && i === matched) matched = i + 1;
    else departed = true;
  }
  return { chains, matched, departed };
}

/**
 * Stores the new messages of `conversation` (the agent's messages without its system-role
 * ones) in the target session, forking first when the history departs from the stored chain.
 * A recorded assistant turn (the proxy's copy of the upstream's answer) that the agent sends
 * back in another shape is taken as the same turn.
 */
export async function reconcile<M>(db: Db, codec: MessageCodec<M>, target: ProxyTarget, conversation: readonly M[], opts: { maxImageBytes?: number; now?: number; cache?: KernelCache } = {}): Promise<Reconciled> {
  const now = opts.now ?? Date.now();
  let links = storedChain(db, target.sid, opts.cache);
  const { chains, matched, departed } = matchChain(codec, links, conversation, opts.cache?.get(CHAIN_MEMO));
  opts.cache?.set(CHAIN_MEMO, { messages: conversation, chains });
  let forkedFrom: string | null = null;
  // A rewind (a strict prefix of what is stored) also continues in a fork, unless all that is
  // past it is the answer the proxy recorded to this very request (a retry after the answer).
  const onlyAnswerPast = links.length > conversation.length && links.slice(conversation.length).every((l) => l.recorded);
  if (departed || (matched === conversation.length && links.length > conversation.length && !onlyAnswerPast)) {
    forkedFrom = target.name;
    const forked = forkAt(db, target, links, matched, now);
    target = forked.target;
    links = forked.links;
  } else if (onlyAnswerPast && matched === conversation.length) {
    dropChainFrom(db, target.sid, conversation.length);
    links = links.slice(0, conversation.length);
  }
  // Links the agent's copy re-hashed (a recorded turn in its shape): stored with its hash.
  const rehashed = links.slice(0, matched).flatMap((l, i) => (l.chain === chains[i] ? [] : [{ ...l, chain: chains[i]! }]));
  const rows: RowIn[] = [];
  const owners: number[] = [];
  for (let i = matched; i < conversation.length; i++) {
    const r = keyedRows(codec, conversation[i]!, i, chains[i]!);
    rows.push(...r);
    for (let k = 0; k < r.length; k++) owners.push(i);
  }
  const fresh: ChainLink[] = [];
  // The links of the new messages, from the seqs their rows got; stored with the rows.
  const link = (seqs: readonly number[]): void => {
    let last = matched === 0 ? 0 : links[matched - 1]!.last_seq;
    for (let i = matched; i < conversation.length; i++) {
      owners.forEach((o, k) => {
        if (o === i) last = Math.max(last, seqs[k]!);
      });
      fresh.push({ idx: i, chain: chains[i]!, last_seq: last, recorded: false });
    }
    putChainLinks(db, target.sid, [...rehashed, ...fresh]);
  };
  if (rows.length > 0) await appendRows(db, target.name, rows, { maxImageBytes: opts.maxImageBytes, withRows: (r) => link(r.seqs) });
  else if (rehashed.length > 0 || matched < conversation.length) {
    // Links alone: owed like an append's commit (storage/db.ts commitOwed), paid off the loop before the request goes on.
    commitOwed(db, () => link([]));
    await durable(db);
  }
  const appended = rows.length;
  const all = [...links.slice(0, matched).map((l, i) => ({ ...l, chain: chains[i]! })), ...fresh];
  keepChain(db, target.sid, all, opts.cache);
  return { target, appended, forkedFrom, links: all };
}

/**
 * Stores the upstream's answer as the conversation's next messages (one on Messages and Chat
 * Completions, one per output item on Responses), marked as recorded. Keyed by position and
 * chain, so an answer recorded twice is stored once.
 */
export async function recordAnswer<M>(db: Db, codec: MessageCodec<M>, target: ProxyTarget, links: readonly ChainLink[], answer: readonly M[], opts: { model?: string; cache?: KernelCache } = {}): Promise<ChainLink[]> {
  const rows: RowIn[] = [];
  const owners: number[] = [];
  const chains: string[] = [];
  let previous = links.length === 0 ? '' : links[links.length - 1]!.chain;
  answer.forEach((m, k) => {
    previous = chainHash(previous, codec.canonical(m));
    chains.push(previous);
    const r = keyedRows(codec, m, links.length + k, previous).map((row) => (row.kind === 'assistant' && opts.model !== undefined ? { ...row, model: opts.model } : row));
    rows.push(...r);
    for (let j = 0; j < r.length; j++) owners.push(k);
  });
  let fresh: ChainLink[] = [];
  // The answer's links, from the seqs its rows got; stored with the rows.
  const link = (seqs: readonly number[]): void => {
    let last = links.length === 0 ? 0 : links[links.length - 1]!.last_seq;
    fresh = chains.map((chain, k) => {
      owners.forEach((o, j) => {
        if (o === k) last = Math.max(last, seqs[j]!);
      });
      return { idx: links.length + k, chain, last_seq: last, recorded: true };
    });
    if (fresh.length > 0) putChainLinks(db, target.sid, fresh);
  };
  if (rows.length > 0) await appendRows(db, target.name, rows, { withRows: (r) => link(r.seqs) });
  else {
    commitOwed(db, () => link([]));
    await durable(db);
  }
  keepChain(db, target.sid, [...links, ...fresh], opts.cache);
  return fresh;
}

/**
 * Stores one round of a turn the proxy ran its own tools in: the round's answer and the tool
 * results, keyed by the turn's place, the round and their content (a retried turn whose round
 * came out the same stores nothing twice). Answers the newest seq; `withRows` runs in the same
 * transaction with it (the last round's link to what the client saw).
 */
export async function appendRound(db: Db, target: ProxyTarget, turn: number, round: number, rows: readonly RowIn[], withRows?: (lastSeq: number) => void): Promise<number> {
  const keyed = rows.map((row, k) => {
    const digest = createHash('sha256').update(JSON.stringify(row)).digest('hex').slice(0, 32);
    const parsed = RowIn.safeParse({ ...row, key: `pxt:${turn}:${round}:${digest}:${k}` });
    if (!parsed.success) throw new AlbedoError('invalid_proxy_request', `round ${round} of the turn cannot be stored: ${z.prettifyError(parsed.error).replaceAll('\n', '; ')}`, { round });
    return parsed.data;
  });
  if (keyed.length === 0) {
    if (withRows !== undefined) {
      commitOwed(db, () => withRows(0));
      await durable(db);
    }
    return 0;
  }
  const { seqs } = await appendRows(db, target.name, keyed, withRows === undefined ? {} : { withRows: (r) => withRows(Math.max(...r.seqs)) });
  return Math.max(...seqs);
}

/**
 * Links the message(s) the client saw of such a turn to the rows its rounds stored: the client
 * sends them back with its next request, where they match these links (recorded), so the
 * spliced message is never a divergence, while upstream keeps getting the stored rounds. The
 * commit is owed: a caller outside appendRound's transaction awaits `durable(db)` before it answers.
 */
export function linkTurn<M>(db: Db, codec: MessageCodec<M>, target: ProxyTarget, links: readonly ChainLink[], visible: readonly M[], lastSeq: number, cache?: KernelCache): ChainLink[] {
  let previous = links.length === 0 ? '' : links[links.length - 1]!.chain;
  const fresh = visible.map((m, k) => {
    previous = chainHash(previous, codec.canonical(m));
    return { idx: links.length + k, chain: previous, last_seq: lastSeq, recorded: true };
  });
  // Owed (storage/db.ts commitOwed): inside appendRound's transaction the append pays it, on its own the caller awaits `durable`.
  if (fresh.length > 0) commitOwed(db, () => putChainLinks(db, target.sid, fresh));
  keepChain(db, target.sid, [...links, ...fresh], cache);
  return fresh;
}
