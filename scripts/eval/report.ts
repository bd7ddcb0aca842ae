// The eval's output: the markdown table (stdout and docs/eval.md), and one SVG per transcript
// with the provider-counted request size per turn for every strategy, the window and trigger
// lines, and each compaction marked. The SVG is written by hand: no chart dependency.
import { PROBE_KINDS, type ProbeKind } from './probes.ts';
import type { RunMetrics } from './run.ts';

const pct = (x: number): string => `${(100 * x).toFixed(0)}%`;
const usd = (x: number): string => `$${x.toFixed(3)}`;

export function renderTable(runs: readonly RunMetrics[]): string {
  const out: string[] = [];
  out.push(
    '| transcript | strategy | prepares | within window | largest / window | compactions | summarizer tok in/out | cached prefix (all / w/o compactions) | cache breaks | input cost (vs none) | pairing violations | ids kept in next request | ids kept per 1k memory tok | recoverable by tools | prepare p50/p99 ms |',
  );
  out.push('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const r of runs) {
    const t = r.retention;
    out.push(
      [
        r.transcript,
        r.strategy,
        r.prepares,
        `${r.within_window_pct.toFixed(0)}%`,
        `${r.max_window_ratio.toFixed(2)}x${r.max_overshoot_tokens > 0 ? ` (+${r.max_overshoot_tokens})` : ''}`,
        r.compactions,
        `${r.summarizer_tokens_in}/${r.summarizer_tokens_out}`,
        `${pct(r.cached_share)} / ${pct(r.cached_share_no_compaction)}`,
        r.cache_breaks,
        `${usd(r.cost.total_usd)}${r.cost.vs_none === null ? '' : ` (${r.cost.vs_none.toFixed(2)}x)`}`,
        r.pairing_violations,
        t.identifiers === 0 ? 'no eviction' : `${pct(t.kept_share)} of ${t.identifiers}`,
        t.kept_per_1k_memory_tokens === null ? '-' : t.kept_per_1k_memory_tokens.toFixed(1),
        t.recovery_checked === 0 ? '-' : `${pct(t.recoverable_share)} of ${t.recovery_checked}`,
        `${r.latency_ms.p50.toFixed(0)}/${r.latency_ms.p99.toFixed(0)}`,
      ].join(' | ').replace(/^/, '| ').concat(' |'),
    );
  }
  return out.join('\n');
}

const PROBE_MEANING: Readonly<Record<ProbeKind, string>> = {
  recall: 'identifiers that occur in one row only (a tool output or a user message), once that row left the request',
  artifact: 'every file modified so far, named whole, relative to a directory the request names, or by a directory of it',
  continuation: 'the latest user message, the last assistant text before it, the open items of the newest plan',
  decision: 'user sentences that set a constraint (must, never, do not, always, instead), once their row left the request',
};

/** One table per probe kind: the share kept by the requests, the share found again by grep, with cost and cache breaks. */
export function renderProbeTables(runs: readonly RunMetrics[]): string {
  const out: string[] = [];
  for (const kind of PROBE_KINDS) {
    out.push(`**${kind}** probes: ${PROBE_MEANING[kind]}.`, '');
    out.push('| transcript | strategy | requests scored | kept | requests keeping all | worst request | found by transcript_grep | input cost (vs none) | cache breaks |');
    out.push('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const r of runs) {
      const t = r.probes[kind];
      const cells = t.requests === 0
        ? [r.transcript, r.strategy, '0', '-', '-', '-', '-']
        : [r.transcript, r.strategy, String(t.requests), `${pct(t.kept_share)} of ${t.probes}`, `${t.complete}/${t.requests}`, pct(t.worst), t.retrieval_checked === 0 ? '-' : `${pct(t.retrievable_share)} of ${t.retrieval_checked}`];
      cells.push(`${usd(r.cost.total_usd)}${r.cost.vs_none === null ? '' : ` (${r.cost.vs_none.toFixed(2)}x)`}`, String(r.cache_breaks));
      out.push(`| ${cells.join(' | ')} |`);
    }
    out.push('');
  }
  return out.join('\n').trimEnd();
}

/** Where each run's price came from, one line per distinct source. */
export function priceNotes(runs: readonly RunMetrics[]): string[] {
  const seen = new Map<string, string>();
  for (const r of runs) {
    const p = r.cost.price;
    const what = p.source === 'catalog'
      ? `catalog price of ${p.model}`
      : p.source === 'eval-default'
      ? `eval default price of ${p.model} (scripts/eval/prices.ts; the catalog has none)`
      : `eval fallback price of ${p.model} (scripts/eval/prices.ts; neither the catalog nor the eval table knows ${r.model})`;
    seen.set(r.model, `${r.model}: ${what}: $${p.price.input} in, $${p.price.cache_read ?? p.price.input} cache read, $${p.price.cache_write ?? p.price.input} cache write, $${p.price.output} out per Mtok`);
  }
  return [...seen.values()];
}

const COLORS: Readonly<Record<string, string>> = { rolling: '#1f77b4', lcm: '#2ca02c', snapcompact: '#9467bd', none: '#7f7f7f', 'single-summary': '#d62728', masking: '#ff7f0e' };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const SHAPES: Readonly<Record<ProbeKind, (x: number, y: number, color: string) => string>> = {
  recall: (x, y, c) => `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="5" fill="${c}"/>`,
  artifact: (x, y, c) => `<rect x="${(x - 4.5).toFixed(1)}" y="${(y - 4.5).toFixed(1)}" width="9" height="9" fill="${c}"/>`,
  continuation: (x, y, c) => `<path d="M${x.toFixed(1)},${(y - 6).toFixed(1)} L${(x + 5.5).toFixed(1)},${(y + 4).toFixed(1)} L${(x - 5.5).toFixed(1)},${(y + 4).toFixed(1)} Z" fill="${c}"/>`,
  decision: (x, y, c) => `<path d="M${x.toFixed(1)},${(y - 6).toFixed(1)} L${(x + 6).toFixed(1)},${y.toFixed(1)} L${x.toFixed(1)},${(y + 6).toFixed(1)} L${(x - 6).toFixed(1)},${y.toFixed(1)} Z" fill="none" stroke="${c}" stroke-width="2"/>`,
};

/** Probe share kept against input cost, one mark per strategy and probe kind, for one transcript. */
export function renderProbeSvg(runs: readonly RunMetrics[]): string {
  const W = 720;
  const H = 420;
  const m = { l: 64, r: 170, t: 36, b: 44 };
  const maxCost = Math.max(1e-9, ...runs.map((r) => r.cost.total_usd)) * 1.1;
  const x = (usdValue: number): number => m.l + ((W - m.l - m.r) * usdValue) / maxCost;
  const y = (share: number): number => H - m.b - (H - m.t - m.b) * share;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${m.l}" y="20" font-size="14">${esc(runs[0]?.transcript ?? '')}: probes kept against input cost</text>`);
  for (let k = 0; k <= 4; k++) {
    const v = k / 4;
    out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#eee"/>`);
    out.push(`<text x="${m.l - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${pct(v)}</text>`);
    const c = (maxCost * k) / 4;
    out.push(`<text x="${x(c).toFixed(1)}" y="${H - m.b + 16}" text-anchor="middle">${usd(c)}</text>`);
  }
  out.push(`<text x="${(m.l + W - m.r) / 2}" y="${H - 8}" text-anchor="middle">input cost of the session (requests and summarizer)</text>`);
  for (const r of runs) {
    const color = COLORS[r.strategy] ?? '#000';
    for (const kind of PROBE_KINDS) {
      const t = r.probes[kind];
      if (t.requests > 0) out.push(SHAPES[kind](x(r.cost.total_usd), y(t.kept_share), color));
    }
  }
  runs.forEach((r, k) => {
    out.push(`<line x1="${W - m.r + 8}" x2="${W - m.r + 28}" y1="${m.t + 10 + k * 18}" y2="${m.t + 10 + k * 18}" stroke="${COLORS[r.strategy] ?? '#000'}" stroke-width="3"/>`);
    out.push(`<text x="${W - m.r + 32}" y="${m.t + 14 + k * 18}">${esc(r.strategy)}</text>`);
  });
  PROBE_KINDS.forEach((kind, k) => {
    const yy = m.t + 30 + (runs.length + k) * 18;
    out.push(SHAPES[kind](W - m.r + 18, yy, '#444'));
    out.push(`<text x="${W - m.r + 32}" y="${yy + 4}">${kind}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}

/** Request tokens per turn for each strategy of one transcript, against the window and trigger. */
export function renderSvg(runs: readonly RunMetrics[]): string {
  const W = 900;
  const H = 420;
  const m = { l: 64, r: 150, t: 36, b: 40 };
  const window = runs[0]?.window ?? 1;
  const trigger = ((runs[0]?.trigger_percent ?? 80) * window) / 100;
  const turns = Math.max(1, ...runs.map((r) => r.turns.length));
  const top = Math.max(window * 1.1, ...runs.flatMap((r) => r.turns.map((t) => t.tokens)));
  const x = (i: number): number => m.l + ((W - m.l - m.r) * i) / Math.max(1, turns - 1);
  const y = (v: number): number => H - m.b - ((H - m.t - m.b) * v) / top;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${m.l}" y="20" font-size="14">${esc(runs[0]?.transcript ?? '')}: request tokens per turn (provider count), window ${window}</text>`);
  for (let k = 0; k <= 4; k++) {
    const v = Math.round((top * k) / 4);
    out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#eee"/>`);
    out.push(`<text x="${m.l - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${v}</text>`);
  }
  out.push(`<text x="${(m.l + W - m.r) / 2}" y="${H - 8}" text-anchor="middle">model call (turn)</text>`);
  const hline = (v: number, label: string, dash: string): void => {
    out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="black" stroke-dasharray="${dash}"/>`);
    out.push(`<text x="${W - m.r + 4}" y="${(y(v) + 4).toFixed(1)}">${label}</text>`);
  };
  hline(window, 'window', '6 3');
  hline(trigger, `trigger ${runs[0]?.trigger_percent ?? 80}%`, '2 3');
  runs.forEach((r, k) => {
    const color = COLORS[r.strategy] ?? '#000';
    const pts = r.turns.map((t, i) => `${x(i).toFixed(1)},${y(t.tokens).toFixed(1)}`).join(' ');
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${pts}"/>`);
    for (const [i, t] of r.turns.entries()) if (t.compacted) out.push(`<circle cx="${x(i).toFixed(1)}" cy="${y(t.tokens).toFixed(1)}" r="3.5" fill="${color}"/>`);
    out.push(`<line x1="${W - m.r + 4}" x2="${W - m.r + 24}" y1="${m.t + 40 + k * 18}" y2="${m.t + 40 + k * 18}" stroke="${color}" stroke-width="2"/>`);
    out.push(`<text x="${W - m.r + 28}" y="${m.t + 44 + k * 18}">${esc(r.strategy)}</text>`);
  });
  out.push(`<circle cx="${W - m.r + 14}" cy="${m.t + 44 + runs.length * 18}" r="3.5" fill="black"/><text x="${W - m.r + 28}" y="${m.t + 48 + runs.length * 18}">compaction</text>`);
  out.push('</svg>');
  return out.join('\n');
}
