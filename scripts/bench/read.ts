// transcript_read: the first 20k-grapheme page of the main session, a page in the middle and
// one near the end (offsets estimated from the dataset's character counts), with the event-loop
// stall seen while each is read. Reads that outrun a time budget are stopped and extrapolated.
import { DEFAULT_READ_LIMIT } from '../../protocol/methods.ts';
import { readTranscript } from '../../storage/transcript/read.ts';
import { textPass, type Dataset } from './dataset.ts';
import { nowMs, stats, turn, withLoopMonitor, type Stats } from './timing.ts';

export interface ReadResult {
  page: 'first' | 'middle' | 'near-end';
  offset: number;
  /** Graphemes returned (0 when the read was stopped, -1 when the page reached the end). */
  returned: number;
  /** Completed reads; empty when the first one hit the budget. */
  stats: Stats;
  /**
   * Set when a read was stopped at the budget. A page costs about the rendering before it, so
   * its time is extrapolated linearly in the offset from a read that completed at a smaller
   * offset (an earlier page, or a calibration read at 2% of the session).
   */
  stopped?: { budget_ms: number; basis: { offset: number; ms: number } | null; extrapolated_ms: number | null };
  max_stall_ms: number;
}

class Stopped extends Error {}

/**
 * Diagnostic for the read numbers: Intl.Segmenter's cost per grapheme when one string of a
 * given length is segmented whole, against the same text segmented in 1000-character slices.
 */
export function segmenterProbe(): Array<{ chars: number; whole_us_per_grapheme: number; sliced_us_per_grapheme: number }> {
  const seg = new Intl.Segmenter(undefined, { granularity: 'grapheme' });
  const base = 'The agent read src/index.ts → found the bug; fixed it. ';
  const out: Array<{ chars: number; whole_us_per_grapheme: number; sliced_us_per_grapheme: number }> = [];
  for (const chars of [1_000, 4_000, 16_000, 64_000]) {
    const text = base.repeat(Math.ceil(chars / base.length)).slice(0, chars);
    // Segmenting is the work measured; the base text is one grapheme per character.
    let t0 = nowMs();
    for (const _ of seg.segment(text)) continue;
    const whole = nowMs() - t0;
    t0 = nowMs();
    for (let i = 0; i < text.length; i += 1000) for (const _ of seg.segment(text.slice(i, i + 1000))) continue;
    const sliced = nowMs() - t0;
    out.push({ chars, whole_us_per_grapheme: (whole * 1000) / chars, sliced_us_per_grapheme: (sliced * 1000) / chars });
  }
  return out;
}

/** Reads once; stops (throws Stopped) at the first yield after the deadline. Returns rows paged through. */
async function readOnce(ds: Dataset, offset: number, budgetMs: number): Promise<{ ms: number; graphemes: number; stopped: boolean }> {
  const deadline = nowMs() + budgetMs;
  const yieldEvery = async (): Promise<void> => {
    if (nowMs() > deadline) throw new Stopped();
    await new Promise<void>((r) => setImmediate(r));
  };
  await turn();
  const t0 = nowMs();
  try {
    const r = await readTranscript(ds.db, { session: ds.main.name, offset, limit: DEFAULT_READ_LIMIT }, { yieldEvery });
    // Graphemes taken, from the offsets (segmenting the page here would cost more than the read).
    return { ms: nowMs() - t0, graphemes: r.next_offset === null ? -1 : r.next_offset - r.offset, stopped: false };
  } catch (err) {
    if (!(err instanceof Stopped)) throw err;
    return { ms: nowMs() - t0, graphemes: 0, stopped: true };
  }
}

/**
 * Each page: one read first; fast ones (< 1 s) are repeated (>= 3 runs, >= 300 ms in all),
 * slow ones are reported from that single run, and one that passes `budgetMs` is stopped and
 * its full time extrapolated from the rows it got through.
 */
export async function benchRead(ds: Dataset, opts: { budgetMs: number }, log: (s: string) => void): Promise<{ estimated_graphemes: number; non_ascii_row_share: number; pages: ReadResult[] }> {
  // From the dataset's one pass over the texts (an upper estimate of the rendered length; rows
  // whose text is not ASCII-without-CR take the segmenter path of transcript_read).
  const { mainRendered: total, mainNonAsciiShare: share } = textPass(ds).stats;
  const plan: Array<{ page: ReadResult['page']; offset: number }> = [
    { page: 'first', offset: 0 },
    { page: 'middle', offset: Math.floor(total / 2) },
    { page: 'near-end', offset: Math.max(0, Math.floor(total * 0.98) - DEFAULT_READ_LIMIT) },
  ];
  const pages: ReadResult[] = [];
  for (const p of plan) {
    if (p.page === 'first') { for (let i = 0; i < 2; i++) await readOnce(ds, 0, opts.budgetMs); }
    const mon = await withLoopMonitor(async () => {
      const samples: number[] = [];
      let last = await readOnce(ds, p.offset, opts.budgetMs);
      if (!last.stopped) samples.push(last.ms);
      let sum = last.ms;
      while (!last.stopped && last.ms < 1000 && (samples.length < 3 || sum < 300) && samples.length < 30) {
        last = await readOnce(ds, p.offset, opts.budgetMs);
        samples.push(last.ms);
        sum += last.ms;
      }
      return { samples, last };
    });
    const { samples, last } = mon.value;
    const r: ReadResult = { page: p.page, offset: p.offset, returned: last.graphemes, stats: stats(samples), max_stall_ms: mon.maxStallMs };
    if (last.stopped) {
      let basis: { offset: number; ms: number } | null = null;
      const done = pages.filter((x) => x.offset > 0 && x.stopped === undefined).pop();
      if (done !== undefined) basis = { offset: done.offset, ms: done.stats.median_ms };
      else {
        const offset = Math.floor(total * 0.02);
        const cal = await readOnce(ds, offset, opts.budgetMs);
        if (!cal.stopped) basis = { offset, ms: cal.ms };
      }
      const extrapolated = basis === null ? null : (basis.ms * p.offset) / basis.offset;
      r.stopped = { budget_ms: opts.budgetMs, basis, extrapolated_ms: extrapolated };
      log(`  read ${p.page} @${p.offset}: stopped after ${(last.ms / 1000).toFixed(1)} s; extrapolated ${extrapolated === null ? '?' : `${(extrapolated / 1000).toFixed(0)} s`}; stall ${mon.maxStallMs.toFixed(1)} ms`);
    } else {
      log(`  read ${p.page} @${p.offset}: median ${r.stats.median_ms.toFixed(1)} ms (${r.stats.runs} runs), stall ${mon.maxStallMs.toFixed(1)} ms, ${last.graphemes} graphemes`);
    }
    pages.push(r);
  }
  return { estimated_graphemes: total, non_ascii_row_share: share, pages };
}
