// load: many concurrent typed clients, each sending a fixed number of mixed requests (append,
// prepare, grep, read, context) one after another on its own session. Counts failures, reports
// p50/p99 latency per request and the daemon's RSS before and after.
import type { AlbedoClient } from '../../protocol/client.ts';
import { makeHome, MB, percentile, startDaemon } from './daemon.ts';
import type { Prng } from './prng.ts';
import { result, type PartResult } from './report.ts';
import { byScale, type Scale } from './scale.ts';

const KINDS = ['append', 'prepare', 'grep', 'read', 'context'] as const;

export async function loadPart(tmp: string, prng: Prng, scale: Scale, log: (s: string) => void): Promise<PartResult> {
  const t0 = performance.now();
  const clients = byScale(scale, 64, 16, 8);
  const perClient = byScale(scale, 300, 60, 20);
  const d = await startDaemon(makeHome(tmp, 'load', { rolling: { contextWindowTokens: 8000 } }));
  const rssBefore = d.rss();
  const latencies: number[] = [];
  const failuresBy = new Map<string, number>();
  const examples: string[] = [];
  let peakRss = rssBefore;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, d.rss())), 100);

  const one = async (c: number): Promise<void> => {
    const session = `load-${c}`;
    // The part counts failed requests; connecting 64 clients at once on a busy machine may take
    // longer than the client's default 5 s, which is no failure of the daemon's.
    const client: AlbedoClient = await d.connect({ connectTimeoutMs: 60_000 });
    try {
      await client.call('session.open', { session, workspace: `/w/${c % 4}` });
      await client.call('transcript.append', { session, rows: [{ kind: 'user', content: [{ type: 'text', text: `client ${c} starts: parser socket` }] }] });
      for (let i = 0; i < perClient; i++) {
        const kind = prng.pick(KINDS);
        const s = performance.now();
        try {
          if (kind === 'append') {
            const n = prng.int(1, 4);
            const rows = Array.from({ length: n }, (_, j) => ({ kind: 'user' as const, key: `${c}-${i}-${j}`, content: [{ type: 'text' as const, text: `request ${i} row ${j}: ${'parser socket window '.repeat(prng.int(1, 40))}` }] }));
            await client.call('transcript.append', { session, rows });
          } else if (kind === 'prepare') await client.call('prepare', { session, model: 'claude-sonnet-4-5' });
          else if (kind === 'grep') await client.call('transcript_grep', prng.next() < 0.5 ? { pattern: 'socket', session } : { pattern: 'parser', workspace: `/w/${c % 4}` });
          else if (kind === 'read') await client.call('transcript_read', { session, limit: 5000 });
          else await client.call('context', { session });
          latencies.push(performance.now() - s);
        } catch (err) {
          failuresBy.set(kind, (failuresBy.get(kind) ?? 0) + 1);
          if (examples.length < 3) examples.push(`${kind}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
    } finally {
      await client.close();
    }
  };
  await Promise.all(Array.from({ length: clients }, (_, c) => one(c)));
  clearInterval(sampler);
  const rssAfter = d.rss();
  const alive = d.alive();
  await d.stop();
  log(`  load: ${latencies.length} requests answered`);

  latencies.sort((a, b) => a - b);
  const failed = [...failuresBy.values()].reduce((a, b) => a + b, 0);
  const failures: string[] = [];
  if (failed > 0) failures.push(`${failed} requests failed (${[...failuresBy].map(([k, n]) => `${k} ${n}`).join(', ')}), e.g. ${examples.join('; ')}`);
  if (!alive) failures.push('the daemon died');
  return result(
    'load',
    t0,
    {
      clients,
      requests: clients * perClient,
      failures: failed,
      p50_ms: percentile(latencies, 50),
      p99_ms: percentile(latencies, 99),
      max_ms: latencies.at(-1) ?? 0,
      rss_before_mb: Math.round(rssBefore / MB),
      rss_peak_mb: Math.round(peakRss / MB),
      rss_after_mb: Math.round(rssAfter / MB),
    },
    failures,
  );
}
