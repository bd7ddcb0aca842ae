// slow-reader: one client sends many `transcript.rows` requests whose replies are ~300 KB each
// and never reads them; then four clients each send most of a long line and stop, more than the
// daemon's partial-line budget in all. The verdicts are on what the daemon holds: its own count
// of queued output and of partial lines (daemon.status), and its live memory after a full GC
// (gc-probe.ts). RSS is reported beside them, and bounds only the peak: freed memory stays in
// RSS until V8 collects it and glibc gives it back (docs/reliability.md says why).
import { execFileSync } from 'node:child_process';
import type { Result } from '../../protocol/methods.ts';
import { makeHome, MB, rssOf, sleep, startDaemon, type StressDaemon } from './daemon.ts';
import type { Prng } from './prng.ts';
import { RawConn } from './raw.ts';
import { result, type PartResult } from './report.ts';
import { byScale, type Scale } from './scale.ts';

const SESSION = 'slow';
/** Growth of RSS at the peak that still passes (bytes). */
const PEAK_LIMIT = 150 * MB;
/** Live memory (heap after a full GC, plus buffers) that may remain once the clients are gone (bytes). */
const LIVE_AFTER_LIMIT = 16 * MB;
/** The daemon's output bound per connection and its in-flight requests per connection (defaults). */
const OUTPUT_BOUND = 16 * MB;
const MAX_IN_FLIGHT = 64;
/** Longest wait for the partial lines to arrive (ms). */
const PARTIAL_WAIT_MS = 60_000;

type Memory = Result<'daemon.status'>['memory'];

/** Samples RSS (/proc) and the daemon's own figures every 50 ms for `ms`, keeping the peaks. */
async function sample(d: StressDaemon, watcher: Watcher, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    watcher.rss = Math.max(watcher.rss, rssOf(d.pid));
    const m = await watcher.status();
    watcher.queued = Math.max(watcher.queued, m.queued_output_bytes);
    watcher.partial = Math.max(watcher.partial, m.partial_line_bytes);
    await sleep(50);
  }
}

interface Watcher {
  rss: number;
  queued: number;
  partial: number;
  status: () => Promise<Memory>;
}

/** Live memory after a full GC: the heap in use plus memory outside it (buffers). */
async function live(d: StressDaemon): Promise<number> {
  const m = await d.liveMemory();
  return m.heapUsed + m.external;
}

/** RSS after glibc's malloc_trim(0), through gdb; null when gdb is missing or may not attach. */
function rssAfterTrim(pid: number): number | null {
  try {
    execFileSync('gdb', ['-p', String(pid), '-batch', '-ex', 'call (int)malloc_trim(0)'], { stdio: 'ignore', timeout: 20_000 });
    return rssOf(pid);
  } catch {
    return null;
  }
}

const mb = (n: number): number => Math.round(n / MB);

export async function slowReaderPart(tmp: string, prng: Prng, scale: Scale, log: (s: string) => void): Promise<PartResult> {
  const t0 = performance.now();
  const requests = byScale(scale, 1500, 500, 150);
  // Four lines of 3/4 of the line cap: the budget (two lines' worth) holds two, not four.
  const lineCap = byScale(scale, 64, 8, 4) * MB;
  const lineBytes = (lineCap / 4) * 3;
  const budget = 2 * lineCap;
  const d = await startDaemon(makeHome(tmp, 'slow'), { probe: true, env: { ALBEDO_MAX_LINE_BYTES: String(lineCap) } });
  const client = await d.connect();
  await client.call('session.open', { session: SESSION });
  // 30 rows of 10 KB: one page of transcript.rows is ~300 KB of JSON.
  const rows = Array.from({ length: 30 }, (_, i) => ({ kind: 'user' as const, content: [{ type: 'text' as const, text: `${i} ${'slow reader '.repeat(850)}${prng.int(0, 9)}` }] }));
  await client.call('transcript.append', { session: SESSION, rows });
  const replyBytes = Buffer.byteLength(JSON.stringify(await client.call('transcript.rows', { session: SESSION, limit: 1000 }))) + 100;
  const watcher: Watcher = { rss: 0, queued: 0, partial: 0, status: async () => (await client.call('daemon.status', {})).memory };
  await sleep(500);
  const liveBefore = await live(d);
  const before = d.rss();

  // Unread replies.
  watcher.rss = before;
  const reader = await RawConn.connect(d.socket);
  await reader.initialize();
  reader.sock.pause();
  for (let i = 0; i < requests; i++) reader.send({ jsonrpc: '2.0', id: i, method: 'transcript.rows', params: { session: SESSION, limit: 1000 } });
  await sample(d, watcher, byScale(scale, 10_000, 4000, 2000));
  const unreadPeak = watcher.rss;
  const queuedPeak = watcher.queued;
  const closedByDaemon = reader.closed;
  reader.destroy();
  await sample(d, watcher, 1000);
  const afterReader = d.rss();
  const liveAfterReader = await live(d);
  const afterReaderGc = d.rss();

  // Partial lines: most of a line under the cap, never finished, on four connections.
  const liveBeforePartials = await live(d);
  watcher.rss = d.rss();
  const rssBeforePartials = watcher.rss;
  const chunk = Buffer.alloc(MB, 0x61);
  const partials: RawConn[] = [];
  for (let c = 0; c < 4; c++) {
    const conn = await RawConn.connect(d.socket);
    conn.write('{"jsonrpc":"2.0","id":1,"method":"daemon.status","params":{"x":"');
    for (let i = 0; i < lineBytes / MB; i++) conn.write(chunk);
    partials.push(conn);
  }
  // Until every byte left the clients (or their connection was closed), then a second more:
  // on a busy machine the lines take a while to arrive.
  const deadline = Date.now() + PARTIAL_WAIT_MS;
  while (Date.now() < deadline && !partials.every((p) => p.closed || p.sock.writableLength === 0)) await sample(d, watcher, 200);
  await sample(d, watcher, 1000);
  const liveHeld = await live(d);
  const closedPartials = partials.filter((p) => p.closed).length;
  for (const p of partials) p.destroy();
  await sample(d, watcher, 1000);
  const rssPartialPeak = watcher.rss;
  const liveEnd = await live(d);
  const rssEnd = d.rss();
  const rssTrimmed = scale === 'full' ? rssAfterTrim(d.pid) : null;
  const alive = d.alive();
  await client.close();
  await d.stop();
  log(`  slow-reader: rss ${mb(before)} -> ${mb(unreadPeak)} MB (unread), ${mb(rssPartialPeak)} MB (partial lines); live ${mb(liveBefore)} -> ${mb(liveAfterReader)} -> ${mb(liveHeld)} -> ${mb(liveEnd)} MB`);

  const failures: string[] = [];
  const outputLimit = OUTPUT_BOUND + MAX_IN_FLIGHT * replyBytes;
  if (!alive) failures.push('the daemon died');
  if (queuedPeak > outputLimit) failures.push(`the unread connection held ${mb(queuedPeak)} MB of output (bound ${mb(OUTPUT_BOUND)} MB plus ${MAX_IN_FLIGHT} replies in flight: ${mb(outputLimit)} MB)`);
  if (unreadPeak - before > PEAK_LIMIT) failures.push(`${requests} unread replies grew RSS by ${mb(unreadPeak - before)} MB (limit ${mb(PEAK_LIMIT)} MB)`);
  if (liveAfterReader - liveBefore > LIVE_AFTER_LIMIT) failures.push(`live memory stayed ${mb(liveAfterReader - liveBefore)} MB above the start after the slow reader closed (limit ${mb(LIVE_AFTER_LIMIT)} MB)`);
  if (watcher.partial > budget) failures.push(`partial lines held ${mb(watcher.partial)} MB, over the budget of ${mb(budget)} MB`);
  if (liveHeld - liveBeforePartials > budget + LIVE_AFTER_LIMIT) failures.push(`4 partial lines of ${mb(lineBytes)} MiB grew live memory by ${mb(liveHeld - liveBeforePartials)} MB (budget ${mb(budget)} MB)`);
  if (closedPartials < 1) failures.push(`no connection was closed although 4 partial lines of ${mb(lineBytes)} MiB exceed the budget of ${mb(budget)} MB`);
  if (liveEnd - liveBefore > LIVE_AFTER_LIMIT) failures.push(`live memory stayed ${mb(liveEnd - liveBefore)} MB above the start after the partial lines closed (limit ${mb(LIVE_AFTER_LIMIT)} MB)`);
  return result(
    'slow-reader',
    t0,
    {
      unread_requests: requests,
      reply_kb: Math.round(replyBytes / 1024),
      queued_output_peak_mb: mb(queuedPeak),
      closed_by_daemon: closedByDaemon,
      rss_before_mb: mb(before),
      rss_unread_peak_mb: mb(unreadPeak),
      rss_after_close_mb: mb(afterReader),
      rss_after_close_gc_mb: mb(afterReaderGc),
      live_before_mb: mb(liveBefore),
      live_after_close_mb: mb(liveAfterReader),
      partial_lines_mib: 4 * mb(lineBytes),
      partial_budget_mib: mb(budget),
      partial_held_peak_mb: mb(watcher.partial),
      partial_conns_closed: closedPartials,
      live_partials_held_mb: mb(liveHeld),
      rss_partial_before_mb: mb(rssBeforePartials),
      rss_partial_peak_mb: mb(rssPartialPeak),
      live_end_mb: mb(liveEnd),
      rss_end_mb: mb(rssEnd),
      rss_end_trimmed_mb: rssTrimmed === null ? null : mb(rssTrimmed),
    },
    failures,
  );
}
