// Timing primitives for the benchmark: a monotonic clock in milliseconds, another process's CPU
// time, repeated runs with median/min/max, and an event-loop stall probe (perf_hooks.monitorEventLoopDelay) wrapped
// around one async operation.
import fs from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

/** Milliseconds from a monotonic clock. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** This process's CPU milliseconds so far (user + system, every thread). */
export function ownCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** Another process's CPU milliseconds (user + system) from /proc (Linux), or undefined. */
export function processCpuMs(pid: number): number | undefined {
  try {
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS_PER_S;
  } catch {
    return undefined;
  }
}
/** USER_HZ: /proc reports CPU time in these ticks (100 on Linux builds in practice). */
const CLOCK_TICKS_PER_S = 100;

export interface Stats {
  runs: number;
  median_ms: number;
  min_ms: number;
  max_ms: number;
}

export function stats(samples: readonly number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  const n = sorted.length;
  const median = n === 0 ? NaN : n % 2 === 1 ? sorted[(n - 1) / 2]! : (sorted[n / 2 - 1]! + sorted[n / 2]!) / 2;
  return { runs: n, median_ms: median, min_ms: sorted[0] ?? NaN, max_ms: sorted[n - 1] ?? NaN };
}

/** Times one call of `fn`. */
export async function timeOnce<T>(fn: () => Promise<T> | T): Promise<{ ms: number; value: T }> {
  const t0 = nowMs();
  const value = await fn();
  return { ms: nowMs() - t0, value };
}

export interface RepeatOptions {
  /** Untimed calls first. */
  warmup?: number;
  /** Timed calls at least ... */
  minRuns?: number;
  /** ... and at most. */
  maxRuns?: number;
  /** Keep running (up to maxRuns) until the timed calls add up to this much. */
  minTotalMs?: number;
}

/** Lets timers run (a macrotask turn), so back-to-back runs do not look like one long stall. */
export function turn(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

/**
 * Times `fn` repeatedly; the value of the last call is returned with the statistics. Each run
 * starts after a turn of the event loop (outside the timed span).
 */
export async function repeat<T>(fn: () => Promise<T> | T, opts: RepeatOptions = {}): Promise<Stats & { value: T }> {
  const warmup = opts.warmup ?? 0;
  const minRuns = opts.minRuns ?? 3;
  const maxRuns = Math.max(minRuns, opts.maxRuns ?? minRuns);
  const minTotal = opts.minTotalMs ?? 0;
  let value: T | undefined;
  for (let i = 0; i < warmup; i++) value = await fn();
  const samples: number[] = [];
  let total = 0;
  while (samples.length < minRuns || (samples.length < maxRuns && total < minTotal)) {
    await turn();
    const t0 = nowMs();
    value = await fn();
    const ms = nowMs() - t0;
    samples.push(ms);
    total += ms;
  }
  return { ...stats(samples), value: value as T };
}

/**
 * Times two operations in alternating blocks (A B A B ...) after a short warm-up of each, so
 * both medians come from the same stretch of this noisy machine; returns both and a/b.
 */
export async function alternateTimed(
  fa: () => Promise<unknown>,
  fb: () => Promise<unknown>,
  opts: { blocks: number; perBlock: number },
): Promise<{ a: Stats; b: Stats; ratio: number }> {
  for (let i = 0; i < 3; i++) {
    await fa();
    await fb();
  }
  const sa: number[] = [];
  const sb: number[] = [];
  for (let blk = 0; blk < opts.blocks; blk++) {
    for (
      const [f, into] of [
        [fa, sa],
        [fb, sb],
      ] as const
    ) {
      for (let i = 0; i < opts.perBlock; i++) {
        const t0 = nowMs();
        await f();
        into.push(nowMs() - t0);
      }
    }
  }
  const A = stats(sa);
  const B = stats(sb);
  return { a: A, b: B, ratio: A.median_ms / B.median_ms };
}

/**
 * Runs `fn` while sampling event-loop delay at 10 ms resolution and returns the largest delay
 * seen (ms). A stretch of synchronous work of X ms shows up as a delay of about X ms.
 */
export async function withLoopMonitor<T>(fn: () => Promise<T>): Promise<{ value: T; maxStallMs: number; ms: number }> {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  // Let the sampler arm before the work starts.
  await new Promise((r) => setTimeout(r, 20));
  const t0 = nowMs();
  const value = await fn();
  const ms = nowMs() - t0;
  await new Promise((r) => setTimeout(r, 20));
  h.disable();
  return { value, maxStallMs: h.max / 1e6, ms };
}

export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  if (ms >= 10_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms >= 100) return `${ms.toFixed(0)} ms`;
  if (ms >= 1) return `${ms.toFixed(2)} ms`;
  return `${(ms * 1000).toFixed(0)} µs`;
}

export function fmtCount(n: number): string {
  if (n >= 1_000_000) return `${(n / 1_000_000).toFixed(n % 1_000_000 === 0 ? 0 : 2)}M`;
  if (n >= 1000) return `${(n / 1000).toFixed(n % 1000 === 0 ? 0 : 1)}k`;
  return String(n);
}

export function fmtBytes(n: number): string {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(2)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n} B`;
}
