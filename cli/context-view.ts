// `albedo context` for a terminal: the prepared request drawn as one bar over the context
// window, split by section, with the free space up to the trigger and the headroom past it,
// then each section's tokens and share, the estimate beside what the provider measured, the
// last compaction, failures and the latch, and configuration errors. It reads only the
// Observation the daemon sends for /context (protocol/prepared.ts); the daemon's own plain text
// rendering (daemon/context-text.ts) is what agent UIs show.
import type { CompactionRecord, Observation, Section } from '../protocol/prepared.ts';
import { ago, bytes, n, type Style, type StyleName } from './io.ts';

interface Slice {
  name: string;
  source: string;
  /** Calibrated tokens: the estimate times the session's learned token ratio. */
  tokens: number;
  glyph: string;
  colour: StyleName;
}

/** Glyph (for a bar without colour) and colour of each section kind, in request order. */
const LOOK: Record<string, { glyph: string; colour: StyleName }> = {
  system: { glyph: 'S', colour: 'blue' },
  tools: { glyph: 'T', colour: 'cyan' },
  notes: { glyph: 'N', colour: 'magenta' },
  'artifact ledger': { glyph: 'L', colour: 'magenta' },
  folds: { glyph: 'F', colour: 'yellow' },
  frames: { glyph: 'F', colour: 'yellow' },
  summary: { glyph: 'Σ', colour: 'green' },
  recap: { glyph: 'R', colour: 'magenta' },
  tail: { glyph: 't', colour: 'grey' },
  history: { glyph: 'h', colour: 'grey' },
};
const OTHER = { glyph: '?', colour: 'red' as StyleName };

/**
 * The engine reports the pinned prompt as one `system` section whose source reads
 * "instructions (~N tokens) … + K tool schema(s)" (for a proxied agent, "the agent's own system
 * prompt (~N tokens) …"). Splitting it here shows what the tools cost; when the source does not
 * read that way the section stays whole.
 */
function splitSystem(s: Section): Section[] {
  const m = /^(instructions|the agent's own system prompt) \(~(\d+) tokens\)(.*?)(?: \+ (\d+) tool schema\(s\))?$/.exec(s.source);
  if (m === null) return [s];
  const label = m[1] === 'instructions' ? 'instructions' : "the agent's own prompt";
  const instructions = Math.min(Number(m[2]), s.estimated_tokens);
  const extension = (m[3] ?? '').includes('extension context');
  const tools = Number(m[4] ?? 0);
  if (tools === 0 && !extension) return [{ ...s, source: label }];
  const rest = s.estimated_tokens - instructions;
  const what = [tools > 0 ? `${tools} tool schema(s)` : '', extension ? 'extension context' : ''].filter((x) => x !== '').join(' + ');
  return [
    { name: 'system', source: label, estimated_tokens: instructions },
    { name: 'tools', source: what, estimated_tokens: rest },
  ];
}

function slices(o: Observation): Slice[] {
  const ratio = o.token_ratio;
  return o.sections.flatMap((s) => (s.name === 'system' ? splitSystem(s) : [s])).map((s) => ({
    name: s.name,
    source: s.source,
    tokens: Math.ceil(s.estimated_tokens * ratio),
    ...(LOOK[s.name] ?? OTHER),
  }));
}

/** Cells of a bar `width` wide for `tokens` of `scale`; anything non-zero gets at least one. */
function cells(tokens: number, scale: number, width: number): number {
  if (tokens <= 0 || scale <= 0) return 0;
  return Math.max(1, Math.round((tokens / scale) * width));
}

function bar(o: Observation, parts: Slice[], total: number, width: number, st: Style): string {
  const scale = o.window ?? Math.max(total, 1);
  let used = 0;
  let out = '';
  for (const p of parts) {
    const c = Math.min(cells(p.tokens, scale, width), width - used);
    used += c;
    out += st[p.colour](p.glyph.repeat(c));
  }
  if (o.window !== null) {
    const triggerAt = Math.min(width, Math.round((o.trigger_percent / 100) * width));
    if (used < triggerAt) {
      out += st.dim('·'.repeat(triggerAt - used));
      used = triggerAt;
    }
    if (used < width) out += `${st.bold('|')}${st.dim(' '.repeat(Math.max(0, width - used - 1)))}`;
  }
  return `[${out}]`;
}

function pct(tokens: number, window: number | null): string {
  return window === null ? '' : `${((tokens * 100) / window).toFixed(1)}%`;
}

function compactionLine(c: CompactionRecord, st: Style, now: number): string[] {
  const saved = c.tokens_before === 0 ? '' : ` (${Math.round(((c.tokens_after - c.tokens_before) * 100) / c.tokens_before)}%)`;
  const state = c.ok ? st.green('ok') : st.red('failed');
  return [
    `${st.bold('last compaction')}  ${new Date(c.at).toISOString()} (${ago(c.at, now)}) · ${c.strategy}${c.forced ? ' (forced)' : ''} · ${state}`,
    `  backend ${c.backend ?? 'none'} · ~${n(c.tokens_before)} -> ~${n(c.tokens_after)} tokens${saved} · ${n(c.duration_ms)} ms · ${n(c.evicted_rows)} rows evicted`,
    `  summarizer ~${n(c.summarizer_tokens_in)} in / ~${n(c.summarizer_tokens_out)} out${c.error === null ? '' : ` · ${st.red(c.error)}`}`,
  ];
}

export interface ViewOptions {
  style: Style;
  /** Terminal width; the bar takes what the frame leaves. */
  columns: number;
  now?: number;
}

/** Images in the request and what elision freed in the session. */
function imagesLine(i: Observation['images']): string {
  const freed = i.elided === 0 ? 'none elided yet' : `${n(i.elided)} elided so far · ${n(i.payloads_deleted)} payloads deleted · ${bytes(i.bytes_freed)} freed`;
  return `images ${n(i.count)} in the request (~${n(i.estimated_tokens)} tokens) · ${freed}`;
}

export function renderContext(o: Observation, opts: ViewOptions): string {
  const st = opts.style;
  const now = opts.now ?? Date.now();
  const parts = slices(o);
  const total = o.calibrated_input_tokens ?? Math.ceil(o.estimated_input_tokens * o.token_ratio);
  const trigger = o.window === null ? null : Math.floor((o.window * o.trigger_percent) / 100);
  const lines: string[] = [];

  lines.push(`${st.bold(`session ${o.session}`)} · strategy ${o.strategy ?? st.yellow('none')} · model ${o.model ?? 'unknown (not prepared yet)'}`);
  const window = o.window === null ? st.yellow('unknown: no automatic compaction') : `${n(o.window)} tokens (${o.window_source})`;
  const triggerText = trigger === null ? `${o.trigger_percent}%` : `${o.trigger_percent}% = ${n(trigger)} tokens`;
  lines.push(`window ${window} · trigger ${triggerText} · tail ${o.tail_percent}%`);
  lines.push('');

  const width = Math.max(20, Math.min(100, opts.columns - 2));
  lines.push(bar(o, parts, total, width, st));
  const legend = [...new Map(parts.map((p) => [p.name, p])).values()].map((p) => `${st[p.colour](p.glyph)} ${p.name}`);
  if (o.window !== null) legend.push(`${st.dim('·')} free before trigger`, `${st.bold('|')} trigger`);
  lines.push(` ${legend.join('  ')}`);
  lines.push('');

  const nameWidth = Math.max(7, ...parts.map((p) => p.name.length));
  // Columns are padded before they are coloured: escape codes have no width.
  const pad = (name: string) => name.padEnd(nameWidth);
  const row = (name: string, tokens: string, share: string, source: string) => `  ${name}  ${tokens.padStart(10)}  ${share.padStart(6)}  ${source}`;
  lines.push(st.dim(row(pad('section'), 'tokens', 'window', 'source')));
  for (const p of parts) lines.push(row(st[p.colour](pad(p.name)), `~${n(p.tokens)}`, pct(p.tokens, o.window), p.source));
  if (trigger !== null) {
    const free = trigger - total;
    const tokens = free >= 0 ? `~${n(free)}` : `-${n(-free)}`;
    lines.push(row(pad('free'), free >= 0 ? tokens : st.red(tokens.padStart(10)), pct(Math.max(0, free), o.window), free >= 0 ? 'before the trigger' : 'over the trigger: compaction is due'));
  }
  const how = o.token_ratio === 1 ? 'estimated' : `estimate ~${n(o.estimated_input_tokens)} × learned ratio ${o.token_ratio.toFixed(2)}`;
  lines.push(row(st.bold(pad('total')), `~${n(total)}`, pct(total, o.window), how));
  lines.push('');

  const measured = o.provider_input_tokens === null
    ? st.dim('not reported yet (usage.report)')
    : `${n(o.provider_input_tokens)}${o.provider_cached_tokens === null ? '' : ` (${n(o.provider_cached_tokens)} cached, ${((o.provider_cached_tokens * 100) / Math.max(1, o.provider_input_tokens)).toFixed(0)}%)`}`;
  lines.push(`estimate ~${n(o.estimated_input_tokens)} · provider measured ${measured}${o.prepared_id === null ? '' : st.dim(` · request ${o.prepared_id}`)}`);
  const due = o.due ? st.yellow('due') : 'not due';
  lines.push(`compaction ${due}${o.compacted ? ' · compacted for this request' : ''} · head #${o.head}`);
  lines.push(imagesLine(o.images));

  if (o.last_compaction !== null) {
    lines.push('');
    lines.push(...compactionLine(o.last_compaction, st, now));
  }
  if (o.failure !== null || o.auto_failures > 0 || o.latched) {
    lines.push('');
    if (o.failure !== null) lines.push(`${st.red('failure')}  ${o.failure}`);
    if (o.auto_failures > 0) lines.push(`${st.yellow('automatic failures')}  ${o.auto_failures} in a row`);
    if (o.latched) lines.push(`${st.red('latched')}  automatic compaction is paused; albedo reload (or a configuration change) gives it another chance`);
  }
  if (o.notes.length > 0) {
    lines.push('');
    for (const note of o.notes) lines.push(`${st.dim('note')}  ${note}`);
  }
  if (o.cache_breaks.length > 0) {
    lines.push('');
    lines.push(st.bold('cache breaks') + st.dim('  (what last changed the prefix the provider had cached)'));
    for (const b of o.cache_breaks) lines.push(`  ${new Date(b.at).toISOString()}  ${st.yellow(b.part.padEnd(10))}  ${b.detail}`);
  }
  if (o.config_errors.length > 0) {
    lines.push('');
    for (const e of o.config_errors) lines.push(`${st.red('config error')}  ${e.file}: ${e.message}`);
  }
  return lines.join('\n');
}
