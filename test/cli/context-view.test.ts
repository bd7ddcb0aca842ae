// The context inspector on observations a live daemon rarely shows on demand: over the trigger,
// a learned token ratio, a failed compaction with the latch set, configuration errors, and an
// unknown window. (test/e2e/cli.test.ts shows it on a real daemon's observations.)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderContext } from '../../cli/context-view.ts';
import { makeStyle } from '../../cli/io.ts';
import { Observation } from '../../protocol/prepared.ts';

const plain = { style: makeStyle(false), columns: 62, now: Date.UTC(2026, 0, 1, 12, 5) };

function observation(over: Partial<Observation> = {}): Observation {
  return Observation.parse({
    session: 's',
    strategy: 'rolling',
    model: 'claude-sonnet-4-5',
    window: 10_000,
    window_source: 'catalog',
    trigger_percent: 80,
    tail_percent: 25,
    due: true,
    compacted: false,
    estimated_input_tokens: 7_000,
    provider_input_tokens: 9_100,
    provider_cached_tokens: null,
    token_ratio: 1.3,
    calibrated_input_tokens: 9_100,
    prepared_id: null,
    head: 40,
    sections: [
      { name: 'system', source: 'instructions (~1000 tokens) + 2 tool schema(s)', estimated_tokens: 2_000 },
      { name: 'summary', source: 'rolling summary of 10 user message(s) before #20, by client', estimated_tokens: 1_000 },
      { name: 'tail', source: 'rows #20-#40 (21 rows, verbatim)', estimated_tokens: 4_000 },
    ],
    last_compaction: {
      at: Date.UTC(2026, 0, 1, 12, 0),
      strategy: 'rolling',
      forced: false,
      ok: false,
      duration_ms: 1_500,
      backend: 'client',
      summarizer_tokens_in: 3_000,
      summarizer_tokens_out: 0,
      tokens_before: 9_000,
      tokens_after: 9_000,
      evicted_rows: 0,
      error: 'summarizer timed out',
    },
    failure: 'summarizer client: timed out after 60000 ms',
    auto_failures: 3,
    latched: true,
    notes: ['summarizer client: written by connection 4 (pi 1.2)'],
    config_errors: [{ file: 'models.json', message: 'models.0.context_window: expected a number' }],
    ...over,
  });
}

test("a proxied agent's own system prompt is its own row, apart from the tools and the extension context", () => {
  const o = observation({ sections: [{ name: 'system', source: "the agent's own system prompt (~4232 tokens) + extension context + 12 tool schema(s)", estimated_tokens: 10_000 }] });
  const text = renderContext(o, plain);
  assert.match(text, /^ {2}system +~5,502 .*the agent's own prompt$/m);
  assert.match(text, /^ {2}tools +~7,499 .*12 tool schema\(s\) \+ extension context$/m);
});

test('over the trigger: calibrated tokens per section, a negative free row, the failure, the latch and config errors', () => {
  const text = renderContext(observation(), plain);
  // 60 cells for 10k tokens: system 1000×1.3 -> 8 cells, tools 8, summary 8, tail 31; nothing free.
  const bar = /^\[(.*)\]$/m.exec(text)?.[1] ?? '';
  assert.equal(bar, `${'S'.repeat(8)}${'T'.repeat(8)}${'Σ'.repeat(8)}${'t'.repeat(31)}|    `);
  assert.match(text, /^ {2}system +~1,300 +13\.0% {2}instructions$/m);
  assert.match(text, /^ {2}tools +~1,300 +13\.0% {2}2 tool schema\(s\)$/m);
  assert.match(text, /^ {2}tail +~5,200 +52\.0% {2}rows #20-#40/m);
  assert.match(text, /^ {2}free +-1,100 +0\.0% {2}over the trigger: compaction is due$/m);
  assert.match(text, /^ {2}total +~9,100 +91\.0% {2}estimate ~7,000 × learned ratio 1\.30$/m);
  assert.match(text, /^estimate ~7,000 · provider measured 9,100$/m);
  assert.match(text, /^last compaction {2}2026-01-01T12:00:00\.000Z \(5 min ago\) · rolling · failed$/m);
  assert.match(text, /^ {2}backend client · ~9,000 -> ~9,000 tokens \(0%\) · 1,500 ms · 0 rows evicted$/m);
  assert.match(text, /summarizer ~3,000 in \/ ~0 out · summarizer timed out$/m);
  assert.match(text, /^failure {2}summarizer client: timed out after 60000 ms$/m);
  assert.match(text, /^automatic failures {2}3 in a row$/m);
  assert.match(text, /^latched {2}automatic compaction is paused; albedo reload/m);
  assert.match(text, /^config error {2}models\.json: models\.0\.context_window: expected a number$/m);
  assert.match(text, /^note {2}summarizer client: written by connection 4/m);
});

test('an unknown window: no shares, no trigger mark, the bar scaled to the request', () => {
  const text = renderContext(observation({ window: null, window_source: 'unknown', due: false, latched: false, auto_failures: 0, failure: null, last_compaction: null, config_errors: [] }), plain);
  assert.match(text, /^window unknown: no automatic compaction · trigger 80% · tail 25%$/m);
  const bar = /^\[(.*)\]$/m.exec(text)?.[1] ?? '';
  assert.ok(!bar.includes('|') && !bar.includes('·'), bar);
  assert.match(text, /^ {2}tail +~5,200 {10}rows/m);
  assert.doesNotMatch(text, /latched|failure|last compaction|^ {2}free/m);
});

test('colour wraps the glyphs and names without moving the columns', () => {
  const coloured = renderContext(observation(), { ...plain, style: makeStyle(true) });
  assert.ok(coloured.includes('\u001b[32mΣΣΣΣΣΣΣΣ\u001b[39m'), 'the summary cells are green');
  const stripped = coloured
    .split('\u001b[')
    .map((part, i) => (i === 0 ? part : part.replace(/^\d+m/, '')))
    .join('');
  assert.equal(stripped, renderContext(observation(), plain));
});
