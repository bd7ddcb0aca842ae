// crash: SIGKILL the daemon at seeded random moments while one client appends keyed rows to two
// sessions, prepares (some forced) and compacts, with a client summarizer that answers after a
// random delay. After each kill: `PRAGMA integrity_check` on the file (read-only, daemon gone),
// then a restart, and every acknowledged row must be there once, with its acknowledged seq, in
// order; keys sent but not acknowledged at most once; a retry of each key answers its stored seq.
import path from 'node:path';
import Database from 'better-sqlite3';
import type { AlbedoClient } from '../../protocol/client.ts';
import type { ParamsIn } from '../../protocol/methods.ts';
import { allRows, makeHome, percentile, sleep, startDaemon, type StressDaemon } from './daemon.ts';
import type { Prng } from './prng.ts';
import { result, type PartResult } from './report.ts';
import { byScale, type Scale } from './scale.ts';

type RowIn = ParamsIn<'transcript.append'>['rows'][number];

const SESSIONS = ['crash-a', 'crash-b'];
const MODEL = 'claude-sonnet-4-5';
/** Small window so automatic compactions happen every few prepares (tokens). */
const WINDOW = 3000;

interface SessionLedger {
  /** Acknowledged keys in the order they were sent, with the seq the daemon answered. */
  acked: Array<{ key: string; seq: number; row: RowIn }>;
  /** Rows sent whose append was cut off by the kill: stored entirely or not at all. */
  pending: RowIn[];
  next: number;
}

const WORDS = ['parser', 'socket', 'compaction', 'summary', 'window', 'token', 'daemon', 'row', 'seq', 'retry', 'index', 'fold'];

function text(prng: Prng, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(prng.pick(WORDS));
  return out.join(' ');
}

export async function crashPart(tmp: string, prng: Prng, scale: Scale, log: (s: string) => void): Promise<PartResult> {
  const t0 = performance.now();
  const kills = byScale(scale, 32, 6, 2);
  const home = makeHome(tmp, 'crash', { rolling: { contextWindowTokens: WINDOW } });
  const ledgers = new Map<string, SessionLedger>(SESSIONS.map((s) => [s, { acked: [], pending: [], next: 0 }]));
  const failures: string[] = [];
  const during = { append: 0, prepare: 0, compaction: 0, summarizer: 0 };
  let lost = 0;
  let duplicated = 0;
  let outOfOrder = 0;
  let seqChanged = 0;
  let integrityBad = 0;
  let retryMismatch = 0;
  let unreadable = 0;
  let pendingStored = 0;
  let pendingAbsent = 0;
  let compactions = 0;
  const restartMs: number[] = [];

  let d: StressDaemon = await startDaemon(home);
  const opener = await d.connect();
  for (const session of SESSIONS) await opener.call('session.open', { session });
  await opener.close();
  for (let k = 0; k < kills; k++) {
    const killAfter = prng.int(80, 1500);
    let stopped = false;
    let summarizing = 0;
    const inflight = { append: 0, prepare: 0, compaction: 0 };
    const client = await d.connect({
      summarize: async (params, signal) => {
        summarizing++;
        try {
          await sleep(prng.int(0, 250));
          if (signal.aborted) throw new Error('aborted');
          return { text: `summary of ${params.prompt.length} chars: ${text(prng, 20)}` };
        } finally {
          summarizing--;
        }
      },
    });
    const appender = async (session: string): Promise<void> => {
      const ledger = ledgers.get(session)!;
      while (!stopped) {
        const rows: RowIn[] = [];
        const n = prng.int(1, 8);
        for (let i = 0; i < n; i++) {
          const key = `${session}-${ledger.next++}`;
          const body = `${key}: ${text(prng, prng.int(20, 250))}`;
          rows.push(i % 2 === 0 ? { kind: 'user', key, content: [{ type: 'text', text: body }] } : { kind: 'assistant', key, content: [{ type: 'text', text: body }] });
        }
        ledger.pending = rows;
        inflight.append++;
        try {
          const r = await client.call('transcript.append', { session, rows });
          rows.forEach((row, i) => ledger.acked.push({ key: row.key!, seq: r.seqs[i]!, row }));
          ledger.pending = [];
        } catch {
          return;
        } finally {
          inflight.append--;
        }
      }
    };
    const preparer = async (): Promise<void> => {
      while (!stopped && !client.closed) {
        const force = prng.next() < 0.3;
        const kind = force ? 'compaction' : 'prepare';
        inflight[kind]++;
        try {
          const p = await client.call('prepare', { session: prng.pick(SESSIONS), model: MODEL, force });
          if (p.compacted) compactions++;
        } catch {
          if (stopped || client.closed) return;
        } finally {
          inflight[kind]--;
        }
        if (prng.next() < 0.2) {
          inflight.compaction++;
          try {
            const c = await client.call('compact', { session: prng.pick(SESSIONS) });
            if (c.compacted) compactions++;
          } catch {
            if (stopped || client.closed) return;
          } finally {
            inflight.compaction--;
          }
        }
      }
    };
    const work = Promise.all([...SESSIONS.map(appender), preparer()]);
    await sleep(killAfter);
    if (inflight.append > 0) during.append++;
    if (inflight.prepare > 0) during.prepare++;
    if (inflight.compaction > 0) during.compaction++;
    if (summarizing > 0) during.summarizer++;
    await d.kill();
    stopped = true;
    await client.close();
    await work;

    const db = new Database(path.join(home, 'albedo.db'), { readonly: true, fileMustExist: true });
    try {
      const check = db.pragma('integrity_check', { simple: true });
      if (check !== 'ok') {
        integrityBad++;
        failures.push(`kill ${k}: integrity_check said ${String(check)}`);
      }
    } finally {
      db.close();
    }

    const r0 = performance.now();
    d = await startDaemon(home);
    restartMs.push(performance.now() - r0);
    const check: AlbedoClient = await d.connect();
    try {
      for (const session of SESSIONS) {
        const ledger = ledgers.get(session)!;
        let rows;
        try {
          rows = await allRows(check, session);
          await check.call('context', { session });
        } catch (err) {
          unreadable++;
          failures.push(`kill ${k}: ${session} unreadable after restart: ${err instanceof Error ? err.message : String(err)}`);
          continue;
        }
        const byKey = new Map<string, number[]>();
        let prev = 0;
        for (const row of rows) {
          if (row.seq <= prev) outOfOrder++;
          prev = row.seq;
          if (row.key !== null) byKey.set(row.key, [...(byKey.get(row.key) ?? []), row.seq]);
        }
        for (const seqs of byKey.values()) if (seqs.length > 1) duplicated += seqs.length - 1;
        let last = 0;
        for (const a of ledger.acked) {
          const seqs = byKey.get(a.key);
          if (seqs === undefined) lost++;
          else if (seqs[0] !== a.seq) seqChanged++;
          if (a.seq <= last) outOfOrder++;
          last = a.seq;
        }
        const stored = ledger.pending.filter((row) => byKey.has(row.key!)).length;
        if (stored === ledger.pending.length && stored > 0) pendingStored++;
        else if (stored === 0 && ledger.pending.length > 0) pendingAbsent++;
        else if (stored > 0) failures.push(`kill ${k}: ${session}: a cut-off append is half stored (${stored} of ${ledger.pending.length} rows)`);
        // Retry the last acknowledged batch's keys and the cut-off batch: each key answers its seq.
        const retry = ledger.acked.slice(-3);
        const retryRows: RowIn[] = retry.map((a) => a.row);
        try {
          if (retryRows.length > 0) {
            const r = await check.call('transcript.append', { session, rows: retryRows });
            retry.forEach((a, i) => {
              if (r.seqs[i] !== a.seq) retryMismatch++;
            });
          }
          if (ledger.pending.length > 0) {
            const r = await check.call('transcript.append', { session, rows: ledger.pending });
            ledger.pending.forEach((row, i) => {
              const had = byKey.get(row.key!);
              if (had !== undefined && had[0] !== r.seqs[i]) retryMismatch++;
              ledger.acked.push({ key: row.key!, seq: r.seqs[i]!, row });
            });
            ledger.pending = [];
          }
        } catch (err) {
          retryMismatch++;
          failures.push(`kill ${k}: retrying keys in ${session} failed: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
    } finally {
      await check.close();
    }
    log(`  crash ${k + 1}/${kills}: killed after ${killAfter} ms`);
  }
  await d.stop();

  const acked = [...ledgers.values()].reduce((n, l) => n + l.acked.length, 0);
  if (lost > 0) failures.push(`${lost} acknowledged rows lost`);
  if (duplicated > 0) failures.push(`${duplicated} rows stored twice under one key`);
  if (seqChanged > 0) failures.push(`${seqChanged} acknowledged rows have another seq than acknowledged`);
  if (outOfOrder > 0) failures.push(`${outOfOrder} rows out of order`);
  if (retryMismatch > 0) failures.push(`${retryMismatch} retried keys answered another seq than stored`);
  restartMs.sort((a, b) => a - b);
  return result(
    'crash',
    t0,
    {
      kills,
      during_append: during.append,
      during_prepare: during.prepare,
      during_compaction: during.compaction,
      during_summarizer: during.summarizer,
      compactions,
      acked_rows: acked,
      lost,
      duplicated,
      seq_changed: seqChanged,
      out_of_order: outOfOrder,
      cut_off_stored: pendingStored,
      cut_off_absent: pendingAbsent,
      retry_mismatch: retryMismatch,
      integrity_bad: integrityBad,
      unreadable,
      restart_p50_ms: Math.round(percentile(restartMs, 50)),
    },
    failures,
  );
}
