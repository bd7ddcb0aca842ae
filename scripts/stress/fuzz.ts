// fuzz: malformed messages over raw connections: random bytes, truncated and deeply nested
// JSON, invalid UTF-8, NUL bytes, huge numbers and ids, wrong types for the params of every
// method in protocol/methods.ts, garbage batches and `__proto__` keys. Each message that calls
// for a reply must get one (or its connection closes); the daemon must stay up and the seeded
// session must read the same before and after. Also counted: internal errors (-32603), ids not
// echoed as sent, and a valid append sent as a notification that stored nothing.
import { methods } from '../../protocol/methods.ts';
import type { AlbedoClient } from '../../protocol/client.ts';
import { allRows, makeHome, startDaemon } from './daemon.ts';
import type { Prng } from './prng.ts';
import { errorCodeOf, idOf, RawConn } from './raw.ts';
import { result, type PartResult } from './report.ts';
import { byScale, type Scale } from './scale.ts';

const SEED_SESSION = 'fuzz-seed';
/** Wait for one reply before the message counts as unanswered (ms). */
const REPLY_MS = 5000;
const CONNECTIONS = 8;

const CATEGORIES = ['random_bytes', 'truncated', 'deep', 'invalid_utf8', 'nul', 'huge_numbers', 'wrong_types', 'batch', 'proto'] as const;
type Category = (typeof CATEGORIES)[number];

interface Message {
  category: Category;
  bytes: Buffer;
  /** The id we wait for; null: wait for the sentinel (parse errors answer with id null). */
  id: string | null;
  /** Replies are not required (a notification, or a batch of them). */
  quiet: boolean;
  /** Raw id text that must come back verbatim, or be refused with -32600. */
  exactId?: string;
  /** The id the answer must carry (a well-formed request with a readable id, whatever else is wrong). */
  answersId?: string;
}

const WRONG: unknown[] = [0, -1, 1.5, 1e308, -1e308, true, false, null, [], {}, [1, 'a'], '', '\u0000', 'x'.repeat(5000), { __proto__: null }, [[[]]]];

function line(obj: unknown): Buffer {
  return Buffer.from(`${JSON.stringify(obj)}\n`);
}

function deep(n: number, leaf = '1'): string {
  return `${'['.repeat(n)}${leaf}${']'.repeat(n)}`;
}

function deepObject(n: number): string {
  return `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
}

/** The keys of a method's params object (through .default wrappers), for wrong-type messages. */
function paramKeys(schema: unknown): string[] {
  let s = schema as { shape?: Record<string, unknown>; _zod?: { def?: { innerType?: unknown } } };
  for (let i = 0; i < 5 && s.shape === undefined && s._zod?.def?.innerType !== undefined; i++) s = s._zod.def.innerType as typeof s;
  return s.shape === undefined ? [] : Object.keys(s.shape);
}

function makeMessage(prng: Prng, n: number): Message {
  const id = `f${n}`;
  const category = CATEGORIES[n % CATEGORIES.length]!;
  const req = (method: string, params: unknown): Message => ({ category, bytes: line({ jsonrpc: '2.0', id, method, params }), id, quiet: false });
  switch (category) {
    case 'random_bytes': {
      const b = prng.bytes(prng.int(1, 300)).map((x) => (x === 0x0a ? 0x20 : x));
      if (b.every((x) => x === 0x20 || x === 0x09 || x === 0x0d)) b[0] = 0x41;
      return { category, bytes: Buffer.concat([b, Buffer.from('\n')]), id: null, quiet: false };
    }
    case 'truncated': {
      const full = JSON.stringify({ jsonrpc: '2.0', id, method: 'transcript.append', params: { session: SEED_SESSION, rows: [{ kind: 'user', content: [{ type: 'text', text: 'cut' }] }] } });
      return { category, bytes: Buffer.from(`${full.slice(0, prng.int(1, full.length - 2))}\n`), id: null, quiet: false };
    }
    case 'deep': {
      const depth = prng.pick([100, 1000, 4105, 20_000, 100_000]);
      const which = prng.int(0, 3);
      if (which === 0) return { category, bytes: Buffer.from(`${deep(depth)}\n`), id: null, quiet: false };
      if (which === 1) {
        const args = deepObject(depth);
        const s = `{"jsonrpc":"2.0","id":"${id}","method":"transcript.append","params":{"session":"${SEED_SESSION}","rows":[{"kind":"assistant","content":[{"type":"tool_call","id":"deep-${n}","name":"x","arguments":${args}}]}]}}\n`;
        return { category, bytes: Buffer.from(s), id, quiet: false };
      }
      if (which === 2) {
        const schema = deepObject(depth);
        const s = `{"jsonrpc":"2.0","id":"${id}","method":"prepare","params":{"session":"${SEED_SESSION}","model":"claude-sonnet-4-5","tools":[{"name":"t","description":"d","input_schema":${schema}}]}}\n`;
        return { category, bytes: Buffer.from(s), id, quiet: false };
      }
      return { category, bytes: Buffer.from(`{"jsonrpc":"2.0","id":"${id}","method":"daemon.status","params":${deep(depth, '{}')}}\n`), id, quiet: false };
    }
    case 'invalid_utf8': {
      const bad = prng.pick([Buffer.from([0xc3, 0x28, 0xff]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0xf8, 0x88]), Buffer.from([0xc0, 0xaf])]);
      const where = prng.int(0, 2);
      const head = Buffer.from(
        where === 0
          ? `{"jsonrpc":"2.0","id":"${id}","method":"transcript.append","params":{"session":"${SEED_SESSION}","rows":[{"kind":"user","content":[{"type":"text","text":"bad`
          : where === 1
          ? `{"jsonrpc":"2.0","id":"${id}","method":"session.open","params":{"session":"x`
          : `{"jsonrpc":"2.0","id":"${id}","method":"daemon.`,
      );
      const tail = Buffer.from(where === 0 ? ` end"}]}]}}\n` : where === 1 ? `"}}\n` : `status"}\n`);
      return { category, bytes: Buffer.concat([head, bad, tail]), id: null, quiet: false, answersId: id };
    }
    case 'nul': {
      const s = prng.pick([
        `{"jsonrpc":"2.0","id":"${id}","method":"daemon.status"\u0000}`,
        `\u0000\u0000\u0000`,
        `{"jsonrpc":"2.0","id":"${id}","method":"daemon\u0000.status"}`,
        `{"jsonrpc":"2.0","id":"${id}",\u0000"method":"session.list"}`,
      ]);
      return { category, bytes: Buffer.from(`${s}\n`), id: null, quiet: false };
    }
    case 'huge_numbers': {
      const which = prng.int(0, 2);
      if (which === 0) {
        const raw = prng.pick(['12345678901234567890', '1e400', '-1e400', '9007199254740993', '1.0000000000000000001', '123456789012345678901234567890']);
        return { category, bytes: Buffer.from(`{"jsonrpc":"2.0","id":${raw},"method":"daemon.status"}\n`), id: null, quiet: false, exactId: raw };
      }
      const num = prng.pick(['1e400', '-1e400', '9007199254740993', '1e-400', '123456789012345678901234567890', '-0']);
      const method = prng.pick(['transcript.rows', 'transcript_read', 'transcript_grep']);
      const key = method === 'transcript.rows' ? 'after' : method === 'transcript_read' ? 'offset' : 'limit';
      const extra = method === 'transcript_grep' ? `"pattern":"x",` : '';
      return { category, bytes: Buffer.from(`{"jsonrpc":"2.0","id":"${id}","method":"${method}","params":{${extra}"session":"${SEED_SESSION}","${key}":${num}}}\n`), id, quiet: false };
    }
    case 'wrong_types': {
      const names = Object.keys(methods).filter((m) => m !== 'initialize');
      const method = prng.pick(names);
      const keys = paramKeys(methods[method as keyof typeof methods].params);
      if (keys.length === 0 || prng.next() < 0.25) {
        // Non-object params, or (for parameterless methods) an unknown key: never a valid call.
        const params = keys.length === 0 ? prng.pick([5, 'x', [1], { bogus: prng.pick(WRONG) }]) : prng.pick([5, 'x', [1], true]);
        return req(method, params);
      }
      const params: Record<string, unknown> = {};
      for (const k of keys) params[k] = prng.pick(WRONG);
      // At least one key gets a number where every method wants a string, or the reverse.
      params[keys[0]!] = keys[0] === 'session' || keys[0] === 'pattern' || keys[0] === 'branch' ? 42 : prng.pick([null, [], {}]);
      return req(method, params);
    }
    case 'batch': {
      const which = prng.int(0, 4);
      const body = which === 0
        ? '[]'
        : which === 1
        ? '[1,2,3]'
        : which === 2
        ? `[[],{},${JSON.stringify({ jsonrpc: '2.0', id, method: 'daemon.status' })}]`
        : which === 3
        ? `[${Array.from({ length: 200 }, () => '{"jsonrpc":"2.0"}').join(',')}]`
        : `[${JSON.stringify({ jsonrpc: '2.0', id, method: 'nope' })},`;
      return { category, bytes: Buffer.from(`${body}\n`), id: null, quiet: false };
    }
    case 'proto': {
      const which = prng.int(0, 3);
      if (which === 0) return { category, bytes: Buffer.from(`{"jsonrpc":"2.0","id":"${id}","method":"${prng.pick(['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'])}"}\n`), id, quiet: false };
      if (which === 1) return { category, bytes: Buffer.from(`{"jsonrpc":"2.0","id":"${id}","method":"transcript.rows","params":{"__proto__":{"session":"${SEED_SESSION}"}}}\n`), id, quiet: false };
      if (which === 2) return { category, bytes: Buffer.from(`{"__proto__":{"jsonrpc":"2.0","id":"${id}","method":"daemon.status"}}\n`), id: null, quiet: false };
      return { category, bytes: Buffer.from(`{"jsonrpc":"2.0","id":"${id}","method":"session.open","params":{"session":"p","__proto__":{"workspace":"/x"}}}\n`), id, quiet: false };
    }
  }
}

async function snapshot(client: AlbedoClient): Promise<string> {
  return JSON.stringify({ rows: await allRows(client, SEED_SESSION), read: await client.call('transcript_read', { session: SEED_SESSION, limit: 1_000_000 }) });
}

export async function fuzzPart(tmp: string, prng: Prng, scale: Scale, log: (s: string) => void): Promise<PartResult> {
  const t0 = performance.now();
  const total = byScale(scale, 10_000, 1000, 300);
  const d = await startDaemon(makeHome(tmp, 'fuzz'));
  const failures: string[] = [];
  const client = await d.connect();
  await client.call('session.open', { session: SEED_SESSION });
  await client.call('transcript.append', {
    session: SEED_SESSION,
    rows: [
      { kind: 'user', key: 's1', content: [{ type: 'text', text: 'the seeded question, größe ß' }] },
      { kind: 'assistant', content: [{ type: 'text', text: 'looking' }, { type: 'tool_call', id: 'c1', name: 'read_file', arguments: { path: 'a.ts' } }] },
      { kind: 'tool_result', call_id: 'c1', content: [{ type: 'text', text: 'export const a = 1;' }] },
    ],
  });
  const before = await snapshot(client);

  const messages = Array.from({ length: total }, (_, n) => makeMessage(prng, n));
  const perCat = new Map<Category, { sent: number; answered: number; closed: number; unanswered: number }>(CATEGORIES.map((c) => [c, { sent: 0, answered: 0, closed: 0, unanswered: 0 }]));
  let internal = 0;
  let idsAltered = 0;
  let utf8Accepted = 0;
  let idsLost = 0;
  let reconnects = 0;
  const internalBy = new Map<string, number>();

  const worker = async (w: number): Promise<void> => {
    let conn: RawConn | undefined;
    for (let n = w; n < messages.length; n += CONNECTIONS) {
      const m = messages[n]!;
      const stat = perCat.get(m.category)!;
      stat.sent++;
      if (conn === undefined || conn.closed) {
        if (conn !== undefined) reconnects++;
        conn = await RawConn.connect(d.socket);
        await conn.initialize();
      }
      conn.write(m.bytes);
      // A sentinel after every message: a parse error is answered before it, a slow call may
      // be answered after it, so the wait ends at the sentinel only once a reply was seen.
      const sentinel = `s${n}`;
      conn.send({ jsonrpc: '2.0', id: sentinel, method: 'daemon.status' });
      const deadline = Date.now() + REPLY_MS;
      let got = 0;
      let closed = false;
      let sentinelSeen = false;
      while (!sentinelSeen || got === 0) {
        const r = await conn.next(Math.max(1, deadline - Date.now()));
        if (r === 'timeout') break;
        if (r === 'closed') {
          closed = true;
          break;
        }
        const rid = idOf(r.value);
        if (rid === sentinel) {
          sentinelSeen = true;
          continue;
        }
        got++;
        const replies = Array.isArray(r.value) ? r.value : [r.value];
        for (const one of replies) {
          if (errorCodeOf(one) === -32603) {
            internal++;
            internalBy.set(m.category, (internalBy.get(m.category) ?? 0) + 1);
          }
          if (m.category === 'invalid_utf8' && typeof one === 'object' && one !== null && 'result' in one) utf8Accepted++;
        }
        if (m.answersId !== undefined && rid !== m.answersId) idsLost++;
        if (m.exactId !== undefined && errorCodeOf(r.value) !== -32600 && !r.line.includes(`"id":${m.exactId}`)) idsAltered++;
      }
      if (got > 0) stat.answered++;
      else if (closed) stat.closed++;
      else if (!m.quiet) stat.unanswered++;
      if ((n + 1) % 2000 < CONNECTIONS && w === 0) log(`  fuzz ${n + 1}/${total}`);
    }
    conn?.destroy();
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, (_, w) => worker(w)));

  // A valid append sent as a notification (no id): JSON-RPC says it runs, only unanswered.
  await client.call('session.open', { session: 'fuzz-notification' });
  const notif = await RawConn.connect(d.socket);
  await notif.initialize();
  notif.send({ jsonrpc: '2.0', method: 'transcript.append', params: { session: 'fuzz-notification', rows: [{ kind: 'user', content: [{ type: 'text', text: 'sent without an id' }] }] } });
  notif.send({ jsonrpc: '2.0', id: 'after', method: 'daemon.status' });
  await notif.reply('after', REPLY_MS);
  // The notification runs beside the status request: give it a bounded moment to land.
  let notificationStored = false;
  for (let i = 0; i < 50 && !notificationStored; i++) {
    notificationStored = (await client.call('transcript.rows', { session: 'fuzz-notification' })).rows.length === 1;
    if (!notificationStored) await new Promise((r) => setTimeout(r, 20));
  }
  notif.destroy();

  const alive = d.alive();
  let after = '';
  try {
    after = await snapshot(client);
  } catch (err) {
    after = `unreadable: ${err instanceof Error ? err.message : String(err)}`;
  }
  await client.close();
  await d.stop();

  const sum = (k: 'answered' | 'closed' | 'unanswered'): number => [...perCat.values()].reduce((n, s) => n + s[k], 0);
  if (!alive) failures.push('the daemon died');
  if (sum('unanswered') > 0) failures.push(`${sum('unanswered')} messages neither answered nor closed: ${[...perCat].filter(([, s]) => s.unanswered > 0).map(([c, s]) => `${c} ${s.unanswered}`).join(', ')}`);
  if (after !== before) failures.push(after.startsWith('unreadable') ? `the seeded session is ${after}` : 'the seeded session changed (rows or rendering differ)');
  if (internal > 0) failures.push(`${internal} internal errors (-32603): ${[...internalBy].map(([c, n]) => `${c} ${n}`).join(', ')}`);
  if (idsAltered > 0) failures.push(`${idsAltered} huge ids answered altered instead of verbatim or -32600`);
  if (idsLost > 0) failures.push(`${idsLost} well-formed requests with invalid UTF-8 were answered without their id`);
  if (utf8Accepted > 0) failures.push(`${utf8Accepted} messages with invalid UTF-8 were accepted (not refused)`);
  if (!notificationStored) failures.push('an append sent as a notification stored nothing');
  return result(
    'fuzz',
    t0,
    {
      messages: total,
      answered: sum('answered'),
      closed: sum('closed'),
      unanswered: sum('unanswered'),
      reconnects,
      internal_errors: internal,
      ids_altered: idsAltered,
      invalid_utf8_accepted: utf8Accepted,
      ids_lost: idsLost,
      notification_stored: notificationStored,
      alive,
      data_unchanged: after === before,
    },
    failures,
  );
}
