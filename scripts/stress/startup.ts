// startup: clients connect in a tight loop while the daemon starts. Refusals before the socket
// exists are expected; a connection that was accepted and then closed or reset before its
// `initialize` was answered is a reset, and there must be none.
import { makeHome, sleep, startDaemon } from './daemon.ts';
import type { Prng } from './prng.ts';
import { RawConn } from './raw.ts';
import { result, type PartResult } from './report.ts';
import { byScale, type Scale } from './scale.ts';

const CONNECTORS = 4;
/** How long the loop goes on after the first accepted connection (ms). */
const AFTER_FIRST_MS = 300;
const START_LIMIT_MS = 20_000;

export async function startupPart(tmp: string, _prng: Prng, scale: Scale, log: (s: string) => void): Promise<PartResult> {
  const t0 = performance.now();
  const starts = byScale(scale, 10, 3, 2);
  let resets = 0;
  let served = 0;
  let refused = 0;
  let startsWithResets = 0;
  const firstResetMs: number[] = [];
  for (let s = 0; s < starts; s++) {
    const home = makeHome(tmp, 'start', { rolling: { contextWindowTokens: 8000 } });
    const spawnedAt = Date.now();
    const d = await startDaemon(home, { waitListening: false });
    let firstAccept: number | undefined;
    let resetsHere = 0;
    const loop = async (): Promise<void> => {
      while (Date.now() - spawnedAt < START_LIMIT_MS && (firstAccept === undefined || Date.now() - firstAccept < AFTER_FIRST_MS) && d.alive()) {
        let conn: RawConn;
        try {
          conn = await RawConn.connect(d.socket);
        } catch {
          refused++;
          await sleep(1);
          continue;
        }
        firstAccept ??= Date.now();
        const ok = await conn.initialize(5000);
        if (ok) served++;
        else {
          resets++;
          resetsHere++;
          if (resetsHere === 1) firstResetMs.push(Date.now() - firstAccept);
        }
        conn.destroy();
      }
    };
    await Promise.all(Array.from({ length: CONNECTORS }, loop));
    if (resetsHere > 0) startsWithResets++;
    await d.stop();
    log(`  start ${s + 1}/${starts}: ${resetsHere} resets`);
  }
  const failures: string[] = [];
  if (resets > 0) failures.push(`${resets} connections accepted during start-up were closed before initialize was answered (${startsWithResets} of ${starts} starts)`);
  if (served === 0) failures.push('no connection was served');
  return result('startup', t0, { starts, served, resets, starts_with_resets: startsWithResets, refused_before_listen: refused, first_reset_max_ms: firstResetMs.length === 0 ? null : Math.max(...firstResetMs) }, failures);
}
