// Renders a /context observation for a terminal: the request's sections in order with their
// sources and estimates, then the compaction status. The JSON form is the observation itself.
import type { Observation } from '../protocol/prepared.ts';

function n(x: number): string {
  return x.toLocaleString('en-US');
}

export function renderObservation(o: Observation): string {
  const lines: string[] = [];
  const window = o.window === null ? 'unknown (no automatic compaction)' : `${n(o.window)} tokens (${o.window_source})`;
  lines.push(`session ${o.session} · strategy ${o.strategy ?? 'none'} · model ${o.model ?? 'unknown'}`);
  lines.push(`window ${window} · trigger ${o.trigger_percent}% · tail ${o.tail_percent}%`);
  const provider = o.provider_input_tokens === null ? 'not reported yet' : `${n(o.provider_input_tokens)}${o.provider_cached_tokens === null ? '' : ` (${n(o.provider_cached_tokens)} cached)`}`;
  const calibrated = o.calibrated_input_tokens ?? o.estimated_input_tokens;
  const share = o.window === null ? '' : ` (${Math.round((calibrated * 100) / o.window)}% of window)`;
  const ratio = o.token_ratio === 1 ? '' : ` × ${o.token_ratio.toFixed(2)} = ~${n(calibrated)}`;
  lines.push(`estimated input ~${n(o.estimated_input_tokens)} tokens${ratio}${share} · provider measured ${provider}`);
  lines.push(`due ${o.due ? 'yes' : 'no'}${o.compacted ? ' · compacted for this request' : ''}${o.latched ? ` · automatic compaction paused after ${o.auto_failures} failures` : ''}`);
  lines.push('');
  lines.push('sections:');
  const width = Math.max(...o.sections.map((s) => s.name.length), 4);
  for (const s of o.sections) lines.push(`  ${s.name.padEnd(width)}  ~${n(s.estimated_tokens).padStart(9)}  ${s.source}`);
  const c = o.last_compaction;
  if (c !== null) {
    lines.push('');
    lines.push(
      `last compaction: ${new Date(c.at).toISOString()} · ${c.strategy}${c.forced ? ' (forced)' : ''} · ${c.ok ? 'ok' : 'failed'} · ${c.duration_ms} ms · backend ${c.backend ?? 'none'}`,
    );
    lines.push(
      `  summarizer ~${n(c.summarizer_tokens_in)} in / ~${n(c.summarizer_tokens_out)} out · request ~${n(c.tokens_before)} -> ~${n(c.tokens_after)} tokens · ${c.evicted_rows} rows evicted`,
    );
  }
  const im = o.images;
  lines.push(`images: ${n(im.count)} in the request (~${n(im.estimated_tokens)} tokens); ${im.elided} elided so far, ${im.payloads_deleted} payloads deleted, ${im.bytes_freed} bytes freed`);
  if (o.failure !== null) lines.push(`failure: ${o.failure}`);
  for (const note of o.notes) lines.push(`note: ${note}`);
  for (const b of o.cache_breaks) lines.push(`cache break ${new Date(b.at).toISOString()} (${b.part}): ${b.detail}`);
  for (const e of o.config_errors) lines.push(`config error in ${e.file}: ${e.message}`);
  return lines.join('\n');
}
