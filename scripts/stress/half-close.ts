// half-close: a client writes its requests (fast ones and slow ones), shuts down its write side
// at once (as `nc -N` or a pipe into socat does) and keeps reading. Every request must still be
// answered before the daemon closes the connection.
import { makeHome, startDaemon } from './daemon.ts';
import type { Prng } from './prng.ts';
import { idOf, RawConn } from './raw.ts';
import { result, type PartResult } from './report.ts';
import { byScale, type Scale } from './scale.ts';

const SESSION = 'half';

export async function halfClosePart(tmp: string, prng: Prng, scale: Scale, log: (s: string) => void): Promise<PartResult> {
  const t0 = performance.now();
  const trials = byScale(scale, 10, 3, 2);
  const d = await startDaemon(makeHome(tmp, 'half', { rolling: { contextWindowTokens: 4000 } }));
  const client = await d.connect();
  await client.call('session.open', { session: SESSION });
  const rows = Array.from({ length: 200 }, (_, i) => {
    const content = [{ type: 'text' as const, text: `${i}: ${'half close '.repeat(prng.int(10, 200))}` }];
    return i % 2 === 0 ? { kind: 'user' as const, content } : { kind: 'assistant' as const, content };
  });
  await client.call('transcript.append', { session: SESSION, rows });
  await client.close();

  let sent = 0;
  let answered = 0;
  let slowLost = 0;
  let fastLost = 0;
  for (let t = 0; t < trials; t++) {
    const conn = await RawConn.connect(d.socket, { allowHalfOpen: true });
    await conn.initialize();
    const ids = new Map<string, 'fast' | 'slow'>();
    for (let i = 0; i < 12; i++) {
      const slow = i % 3 === 0;
      const id = `${t}-${i}`;
      ids.set(id, slow ? 'slow' : 'fast');
      const slowCall = prng.next() < 0.5
        ? { method: 'prepare', params: { session: SESSION, model: 'claude-sonnet-4-5', force: true } }
        : { method: 'transcript_grep', params: { pattern: 'half', limit: 500 } };
      conn.send(slow ? { jsonrpc: '2.0', id, ...slowCall } : { jsonrpc: '2.0', id, method: 'daemon.status' });
    }
    conn.sock.end();
    sent += ids.size;
    for (;;) {
      const r = await conn.next(15_000);
      if (r === 'closed' || r === 'timeout') break;
      const id = idOf(r.value);
      if (typeof id === 'string' && ids.delete(id)) answered++;
      if (ids.size === 0) break;
    }
    for (const kind of ids.values()) {
      if (kind === 'slow') slowLost++;
      else fastLost++;
    }
    conn.destroy();
  }
  const alive = d.alive();
  await d.stop();
  log(`  half-close: ${answered}/${sent} answered`);
  const failures: string[] = [];
  if (answered < sent) failures.push(`${sent - answered} of ${sent} requests got no reply after the client half-closed (${slowLost} slow, ${fastLost} fast)`);
  if (!alive) failures.push('the daemon died');
  return result('half-close', t0, { trials, sent, answered, lost_slow: slowLost, lost_fast: fastLost }, failures);
}
