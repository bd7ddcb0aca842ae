// Where a bench run's time went, and the bound on the whole run. Issue 35 holds the full run
// (every section, the default sizes) to 30 minutes on the 2-core machine; it took 28 of them in
// stop 51, so each part's wall time is recorded in the order it ran, shown as a table, and the
// bound judged on the run's total when the run was the full one.
import { DEFAULT_LCM, DEFAULT_SIZES, SECTIONS } from './args.ts';
import type { Verdict } from './report.ts';
import { nowMs } from './timing.ts';

/** One timed part of a run: a section, or one measurement on one size's dataset. */
export interface TimePart {
  part: string;
  ms: number;
}

/** The full run's bound (issue 35). */
export const FULL_RUN_TARGET_MS = 30 * 60_000;

/** Records each part's wall time, in the order the parts ran. */
export class PartClock {
  readonly parts: TimePart[] = [];

  async time<T>(part: string, fn: () => Promise<T> | T): Promise<T> {
    const t0 = nowMs();
    try {
      return await fn();
    } finally {
      this.parts.push({ part, ms: nowMs() - t0 });
    }
  }
}

/** The run's flags as the results record them. */
export interface RunArgs {
  quick: boolean;
  sizes: number[];
  only: string[];
  lcm: { rows: number; smallRows: number; nodes: number };
}

/** Whether these flags make the full run: `npm run bench` with no flag that narrows or shrinks it. */
export function isFullRun(args: RunArgs): boolean {
  return (
    !args.quick &&
    args.sizes.length === DEFAULT_SIZES.length &&
    DEFAULT_SIZES.every((s, i) => args.sizes[i] === s) &&
    SECTIONS.every((s) => args.only.includes(s)) &&
    args.lcm.rows === DEFAULT_LCM.rows &&
    args.lcm.smallRows === DEFAULT_LCM.smallRows &&
    args.lcm.nodes === DEFAULT_LCM.nodes
  );
}

/** The bound on the whole run, judged only on the full run (a narrower one says nothing of it). */
export function judgeRunTime(args: RunArgs, totalMs: number, parts: readonly TimePart[]): Verdict[] {
  if (!isFullRun(args)) return [];
  const longest = [...parts].sort((a, b) => b.ms - a.ms).slice(0, 3);
  return [{
    target: `the full run within ${FULL_RUN_TARGET_MS / 60_000} minutes`,
    measured: `${(totalMs / 60_000).toFixed(1)} min (longest parts: ${longest.map((p) => `${p.part} ${(p.ms / 60_000).toFixed(1)} min`).join(', ')})`,
    pass: totalMs <= FULL_RUN_TARGET_MS,
  }];
}

/** The parts as lines: each one's seconds and share of the run, in the order they ran. */
export function renderRunTime(parts: readonly TimePart[], totalMs: number): string {
  if (parts.length === 0) return '';
  const rows = [...parts, { part: '(between parts)', ms: totalMs - parts.reduce((n, p) => n + p.ms, 0) }];
  const width = Math.max(...rows.map((p) => p.part.length));
  const line = (p: TimePart): string => `  ${p.part.padEnd(width)}  ${`${(p.ms / 1000).toFixed(1)} s`.padStart(9)}  ${((100 * p.ms) / totalMs).toFixed(1).padStart(5)}%`;
  return ["\nwhere the run's time went", ...rows.map(line)].join('\n');
}
