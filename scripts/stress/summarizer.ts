// summarizer: a client summarizer that fails in each way it can (throws, never answers within
// the timeout, answers empty text, answers far past its cap, answers a malformed result). After
// each failed forced compaction the prepared request must be the one from before, byte for byte
// (an oversized answer may instead be used cut to its cap). Also: a failed compaction reports
// the tokens it sent, and an append to the session does not wait behind a hanging summarizer.
import type { Result } from '../../protocol/methods.ts';
import { makeHome, sleep, startDaemon } from './daemon.ts';
import type { Prng } from './prng.ts';
import { result, type PartResult } from './report.ts';
import { byScale, type Scale } from './scale.ts';

const SESSION = 'summ';
const MODEL = 'claude-sonnet-4-5';
/** The summarizer timeout configured for this part (ms). */
const TIMEOUT_MS = 2000;
/** An append waiting longer than this behind a summarizer call fails the check (ms). */
const APPEND_LIMIT_MS = 500;

type Mode = 'ok' | 'error' | 'timeout' | 'empty' | 'oversized' | 'malformed';
const FAULTS: Mode[] = ['error', 'timeout', 'empty', 'oversized', 'malformed'];

function wire(p: Result<'prepare'>): string {
  return JSON.stringify({ system: p.system, tools: p.tools, inputs: p.inputs });
}

export async function summarizerPart(tmp: string, prng: Prng, scale: Scale, log: (s: string) => void): Promise<PartResult> {
  const t0 = performance.now();
  const rounds = byScale(scale, 3, 1, 1);
  const d = await startDaemon(makeHome(tmp, 'summ', { rolling: { contextWindowTokens: 3000 }, summarizer: { provider: 'client', timeoutMs: TIMEOUT_MS } }));
  let mode: Mode = 'ok';
  let cap = 0;
  let version = 0;
  let calls = 0;
  const client = await d.connect({
    summarize: async (params, signal) => {
      cap = params.max_output_tokens * 4;
      calls++;
      switch (mode) {
        case 'ok':
          return { text: `summary v${++version}: the session worked on the parser.` };
        case 'error':
          throw new Error('upstream model unavailable');
        case 'timeout':
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, TIMEOUT_MS * 3);
            signal.addEventListener('abort', () => {
              clearTimeout(timer);
              resolve();
            });
          });
          return { text: 'too late' };
        case 'empty':
          return { text: '' };
        case 'oversized':
          return { text: 'An oversized sentence about the parser. '.repeat(Math.ceil((cap * 20) / 40)) };
        case 'malformed':
          return { text: 42 } as unknown as { text: string };
      }
    },
  });
  const other = await d.connect();
  await client.call('session.open', { session: SESSION });
  const failures: string[] = [];
  let kept = 0;
  let changed = 0;
  let zeroTokensIn = 0;
  let notCalled = 0;
  let appendWaitMs = 0;
  let n = 0;
  const append = async (count: number): Promise<void> => {
    const rows = Array.from({ length: count }, () => ({ kind: 'user' as const, content: [{ type: 'text' as const, text: `turn ${n++}: ${'parser window token '.repeat(prng.int(20, 40))}` }] }));
    await client.call('transcript.append', { session: SESSION, rows });
  };
  for (let round = 0; round < rounds; round++) {
    mode = 'ok';
    await append(40);
    const good = await client.call('prepare', { session: SESSION, model: MODEL, force: true });
    if (!good.compacted) {
      failures.push(`round ${round}: the working summarizer did not compact (${good.observation.failure ?? 'no reason'})`);
      continue;
    }
    for (const fault of FAULTS) {
      mode = fault;
      // New history to compact, and the request as it stands (any automatic try fails too).
      await append(12);
      const callsAtStart = calls;
      let before: string;
      try {
        before = wire(await client.call('prepare', { session: SESSION, model: MODEL }));
      } catch (err) {
        failures.push(`round ${round} ${fault}: prepare failed: ${err instanceof Error ? err.message : String(err)}`);
        continue;
      }
      const callsBefore = calls;
      let after: string;
      let obs;
      try {
        const p = await client.call('prepare', { session: SESSION, model: MODEL, force: true });
        after = wire(p);
        obs = p.observation;
      } catch (err) {
        failures.push(`round ${round} ${fault}: prepare failed instead of keeping the projection: ${err instanceof Error ? err.message : String(err)}`);
        continue;
      }
      // An oversized answer may be used cut to its cap, and the automatic try may be the one that
      // used it: then nothing is left for the forced one to compact, and that is the fault's outcome.
      const usedByAutomatic = fault === 'oversized' && callsBefore > callsAtStart && obs.last_compaction?.ok === true && !obs.last_compaction.forced;
      if (calls === callsBefore && !usedByAutomatic) notCalled++;
      const fitsCap = fault === 'oversized' && after.length - before.length < 2 * cap;
      if (after === before || fitsCap) kept++;
      else {
        changed++;
        failures.push(`round ${round} ${fault}: the prepared request changed (${before.length} -> ${after.length} chars)`);
      }
      const last = obs.last_compaction;
      if (fault !== 'oversized' && last !== null && !last.ok && last.summarizer_tokens_in === 0) zeroTokensIn++;
    }
  }
  // An append beside a summarizer call that hangs until the timeout.
  mode = 'timeout';
  await append(20);
  const hanging = client.call('prepare', { session: SESSION, model: MODEL, force: true }).catch(() => undefined);
  await sleep(200);
  const s = performance.now();
  await other.call('transcript.append', { session: SESSION, rows: [{ kind: 'user', content: [{ type: 'text', text: 'an append while the summarizer hangs' }] }] });
  appendWaitMs = performance.now() - s;
  await hanging;
  await other.close();
  await client.close();
  const alive = d.alive();
  await d.stop();
  log(`  summarizer: ${kept} kept, ${changed} changed`);
  if (zeroTokensIn > 0) failures.push(`${zeroTokensIn} failed compactions report summarizer_tokens_in 0 although the prompt was sent`);
  if (appendWaitMs > APPEND_LIMIT_MS) failures.push(`an append waited ${Math.round(appendWaitMs)} ms behind a hanging summarizer (limit ${APPEND_LIMIT_MS} ms, timeout ${TIMEOUT_MS} ms)`);
  if (notCalled > 0) failures.push(`${notCalled} forced compactions never asked the summarizer (the check proved nothing for them)`);
  if (!alive) failures.push('the daemon died');
  return result('summarizer', t0, { faults: rounds * FAULTS.length, kept, changed, not_called: notCalled, zero_tokens_in: zeroTokensIn, append_wait_ms: Math.round(appendWaitMs) }, failures);
}
