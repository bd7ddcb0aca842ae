// What every part returns and how it is printed: one line per part, PASS or FAIL, its figures,
// and the checks that failed. Deciding PASS or FAIL is each part's job.
export type Figures = Record<string, number | string | boolean | null>;

export interface PartResult {
  part: string;
  pass: boolean;
  /** Wall time of the part (ms). */
  ms: number;
  figures: Figures;
  /** One sentence per failed check; empty on PASS. */
  failures: string[];
}

/** Builds a result: the part passes when no check failed. */
export function result(part: string, t0: number, figures: Figures, failures: string[]): PartResult {
  return { part, pass: failures.length === 0, ms: Math.round(performance.now() - t0), figures, failures };
}

function show(v: Figures[string]): string {
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : v.toFixed(2);
  return String(v);
}

export function line(r: PartResult): string {
  const figs = Object.entries(r.figures)
    .map(([k, v]) => `${k}=${show(v)}`)
    .join(' ');
  const head = `${r.pass ? 'PASS' : 'FAIL'} ${r.part.padEnd(11)} ${(r.ms / 1000).toFixed(1).padStart(6)} s  ${figs}`;
  return r.failures.length === 0 ? head : `${head}\n${r.failures.map((f) => `       - ${f}`).join('\n')}`;
}
