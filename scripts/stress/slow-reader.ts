// slow-reader: one client sends many `transcript.rows` requests whose replies are ~300 KB each
// and never reads them; then four clients each send most of a 32 MiB line and stop. The daemon's
// RSS is sampled before, at the peak and after the clients closed. Bounded output per connection
// and bounded partial-line bytes keep the growth small; unbounded queues show as hundreds of MB.
import { makeHome, MB, rssOf, sleep, startDaemon } from './daemon.ts';
import type { Prng } from './prng.ts';
import { RawConn } from './raw.ts';
import { result, type PartResult } from './report.ts';

const SESSION = 'slow';
/** Growth of RSS at the peak that still passes (bytes). */
const PEAK_LIMIT = 150 * MB;
/** Growth of RSS that may remain once the clients are gone (bytes). */
const AFTER_LIMIT = 64 * MB;

async function sample(pid: number, ms: number, peak: { v: number }): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    peak.v = Math.max(peak.v, rssOf(pid));
    await sleep(50);
  }
}

export async function slowReaderPart(tmp: string, prng: Prng, quick: boolean, log: (s: string) => void): Promise<PartResult> {
  const t0 = performance.now();
  const requests = quick ? 500 : 1500;
  const partialBytes = (quick ? 16 : 32) * MB;
  const d = await startDaemon(makeHome(tmp, 'slow'));
  const client = await d.connect();
  await client.call('session.open', { session: SESSION });
  // 30 rows of 10 KB: one page of transcript.rows is ~300 KB of JSON.
  const rows = Array.from({ length: 30 }, (_, i) => ({ kind: 'user' as const, content: [{ type: 'text' as const, text: `${i} ${'slow reader '.repeat(850)}${prng.int(0, 9)}` }] }));
  await client.call('transcript.append', { session: SESSION, rows });
  await client.close();
  await sleep(500);
  const before = d.rss();

  const peak = { v: before };
  const reader = await RawConn.connect(d.socket);
  await reader.initialize();
  reader.sock.pause();
  for (let i = 0; i < requests; i++) reader.send({ jsonrpc: '2.0', id: i, method: 'transcript.rows', params: { session: SESSION, limit: 1000 } });
  await sample(d.pid, quick ? 4000 : 10_000, peak);
  const unreadPeak = peak.v;
  const closedByDaemon = reader.closed;
  reader.destroy();
  await sample(d.pid, 1500, peak);
  const afterReader = d.rss();

  // Partial lines: most of a line under the cap, never finished.
  const partPeak = { v: afterReader };
  const chunk = Buffer.alloc(MB, 0x61);
  const partials: RawConn[] = [];
  for (let c = 0; c < 4; c++) {
    const conn = await RawConn.connect(d.socket);
    conn.write('{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{"x":"');
    for (let i = 0; i < partialBytes / MB; i++) conn.write(chunk);
    partials.push(conn);
  }
  await sample(d.pid, quick ? 2000 : 4000, partPeak);
  for (const p of partials) p.destroy();
  await sample(d.pid, 1500, partPeak);
  const after = d.rss();
  const alive = d.alive();
  await d.stop();
  log(`  slow-reader: rss ${Math.round(before / MB)} -> ${Math.round(unreadPeak / MB)} MB (unread), ${Math.round(partPeak.v / MB)} MB (partial lines)`);

  const failures: string[] = [];
  if (!alive) failures.push('the daemon died');
  if (unreadPeak - before > PEAK_LIMIT) failures.push(`${requests} unread replies grew RSS by ${Math.round((unreadPeak - before) / MB)} MB (limit ${PEAK_LIMIT / MB} MB): the write queue is unbounded`);
  if (afterReader - before > AFTER_LIMIT) failures.push(`RSS stayed ${Math.round((afterReader - before) / MB)} MB above the start after the slow reader closed`);
  if (partPeak.v - afterReader > 2 * partialBytes) failures.push(`4 partial lines of ${partialBytes / MB} MiB grew RSS by ${Math.round((partPeak.v - afterReader) / MB)} MB (over half the bytes sent): partial lines are not bounded across connections`);
  return result(
    'slow-reader',
    t0,
    {
      unread_requests: requests,
      rss_before_mb: Math.round(before / MB),
      rss_unread_peak_mb: Math.round(unreadPeak / MB),
      rss_after_close_mb: Math.round(afterReader / MB),
      closed_by_daemon: closedByDaemon,
      partial_lines_mib: 4 * (partialBytes / MB),
      rss_partial_peak_mb: Math.round(partPeak.v / MB),
      rss_end_mb: Math.round(after / MB),
    },
    failures,
  );
}
