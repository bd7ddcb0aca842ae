// The eval (scripts/eval/): its arithmetic on hand-made cases, and its invariants on a small
// transcript replayed into real daemons (the eval's own entry, with the baselines registered):
// no pairing violation, every request within the window, every evicted identifier recoverable.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import type { PlainInput } from '../../../protocol/prepared.ts';
import type { RowIn } from '../../../protocol/rows.ts';
import type { ImportedTranscript } from '../../../cli/import/index.ts';
import { EVAL_DEFAULT_PRICES, priceFor } from '../../../scripts/eval/prices.ts';
import { cachedTokens, commonPrefixBytes, percentile, requestCost, serializeRequest, summarizerCost } from '../../../scripts/eval/request.ts';
import { EvictionTracker } from '../../../scripts/eval/retention.ts';
import { relateToNone, runEval, type RunMetrics } from '../../../scripts/eval/run.ts';
import { renderProbeSvg, renderProbeTables, renderSvg, renderTable } from '../../../scripts/eval/report.ts';

const text = (role: PlainInput['role'], t: string): PlainInput => ({ role, content: [{ type: 'text', text: t }] });

describe('eval arithmetic', () => {
  test('the cached-prefix share of three known requests', () => {
    const system = 'sys';
    const r1 = serializeRequest({ system, tools: [], inputs: [text('user', 'hello')] });
    const r2 = serializeRequest({ system, tools: [], inputs: [text('user', 'hello'), text('assistant', 'hi there')] });
    // A compaction: the first input changed, so only the system prompt and tools stay cached.
    const r3 = serializeRequest({ system, tools: [], inputs: [text('user', 'summary'), text('assistant', 'hi there')] });
    const head = Buffer.byteLength('"sys"\n[]\n');
    assert.equal(commonPrefixBytes(r1, r2), r1.length, 'a request that only grew keeps all of the previous one');
    // The first input's JSON agrees up to the first byte of its text ("hello" vs "summary").
    const firstInput = Buffer.byteLength('{"role":"user","content":[{"type":"text","text":"');
    assert.equal(commonPrefixBytes(r2, r3), head + firstInput);
    const shares = [0, commonPrefixBytes(r1, r2) / r2.length, commonPrefixBytes(r2, r3) / r3.length];
    assert.equal(r1.length, head + Buffer.byteLength('{"role":"user","content":[{"type":"text","text":"hello"}]}'));
    assert.ok(Math.abs(shares[1]! - r1.length / r2.length) < 1e-12);
    assert.ok(shares[2]! < 0.5 && shares[2]! > 0);
    // Tokens by the same tokens-per-byte as the request's input tokens.
    assert.equal(cachedTokens(1000, 250, 1000), 250);
    assert.equal(cachedTokens(1300, r1.length, r2.length), Math.round((1300 * r1.length) / r2.length));
    assert.equal(cachedTokens(500, 0, 0), 0);
  });

  test('longest common prefix past the 8-byte stride, and for equal and empty buffers', () => {
    const a = Buffer.from('0123456789abcdefXYZ');
    const b = Buffer.from('0123456789abcdefXYq');
    assert.equal(commonPrefixBytes(a, b), 18);
    assert.equal(commonPrefixBytes(a, a), a.length);
    assert.equal(commonPrefixBytes(a, Buffer.alloc(0)), 0);
  });

  test('a request costs its cached part at the cache-read price and the rest at the cache-write price', () => {
    const p = { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 };
    // 1M tokens, 800k cached: 0.8 x 0.30 + 0.2 x 3.75 = 0.24 + 0.75.
    assert.ok(Math.abs(requestCost(1_000_000, 800_000, p) - 0.99) < 1e-9);
    // Without cache prices, everything at the input price.
    assert.ok(Math.abs(requestCost(2_000_000, 500_000, { input: 1.25, output: 10 }) - 2.5) < 1e-9);
    assert.ok(Math.abs(summarizerCost(10_000, 1_000, p) - (0.03 + 0.015)) < 1e-12);
  });

  test('prices: the eval table by model prefix, the fallback labelled as such', () => {
    const known = priceFor('claude-sonnet-4-5-20250929');
    assert.ok(known.source === 'catalog' || (known.source === 'eval-default' && known.model === 'claude-sonnet-4-5'));
    const unknown = priceFor('some-local-model');
    assert.equal(unknown.source, 'eval-fallback');
    assert.deepEqual(unknown.price, EVAL_DEFAULT_PRICES['claude-sonnet-4-5']);
  });

  test('percentiles are nearest-rank', () => {
    const xs = Array.from({ length: 100 }, (_, i) => 100 - i);
    assert.equal(percentile(xs, 50), 50);
    assert.equal(percentile(xs, 99), 99);
    assert.equal(percentile([7], 99), 7);
    assert.equal(percentile([], 50), 0);
  });

  test('eviction: rows leave once, recognised by call id (a result by the start of its text too) or exact text', () => {
    const rows: RowIn[] = [
      { kind: 'user', origin: 'user', content: [{ type: 'text', text: 'fix src/a.ts' }] },
      { kind: 'assistant', content: [{ type: 'tool_call', id: 'c1', name: 'read', arguments: { path: 'src/a.ts' } }] },
      { kind: 'tool_result', call_id: 'c1', is_error: false, content: [{ type: 'text', text: 'export const x = 1;' }] },
      { kind: 'assistant', content: [{ type: 'text', text: 'done' }] },
    ];
    const t = new EvictionTracker(rows);
    const full: PlainInput[] = [
      text('user', 'fix src/a.ts'),
      { role: 'assistant', content: [{ type: 'tool_call', id: 'c1', name: 'read', arguments: {} }] },
      { role: 'tool', content: [{ type: 'tool_result', call_id: 'c1', is_error: false, content: [{ type: 'text', text: 'export const x = 1;' }] }] },
    ];
    assert.deepEqual(t.evict(3, full), []);
    // A result whose text was replaced (masking's placeholder) has left, though its call id is there.
    const masked = new EvictionTracker(rows);
    const placeholder: PlainInput = { role: 'tool', content: [{ type: 'tool_result', call_id: 'c1', is_error: false, content: [{ type: 'text', text: '[tool output elided by masking]' }] }] };
    assert.deepEqual(masked.evict(3, [full[0]!, full[1]!, placeholder]), [2]);
    const compacted: PlainInput[] = [text('user', 'Summary: read src/a.ts'), text('user', 'fix src/a.ts'), text('assistant', 'done')];
    assert.deepEqual(t.evict(4, compacted), [1, 2]);
    assert.deepEqual(t.evict(4, [text('assistant', 'done')]), [0], 'a row already gone is not counted again');
  });
});

/**
 * A small coding session: a few prompts (each with a constraint), a plan, reads with identifiers
 * in them, and an edit per prompt.
 */
function smallTranscript(): ImportedTranscript {
  const rows: RowIn[] = [];
  let call = 0;
  for (let u = 0; u < 3; u++) {
    rows.push({ kind: 'user', origin: 'user', content: [{ type: 'text', text: `Step ${u}: fix parseOrder${u} in src/orders/parse${u}.ts and run the tests. Never change the signature of loadItem${u}.` }] });
    const todos = [0, 1, 2].map((k) => ({ content: `Fix step ${k} of the orders work`, status: k < u ? 'completed' : k === u ? 'in_progress' : 'pending' }));
    rows.push({ kind: 'assistant', content: [{ type: 'tool_call', id: `call_${++call}`, name: 'TodoWrite', arguments: { todos } }] });
    rows.push({ kind: 'tool_result', call_id: `call_${call}`, is_error: false, content: [{ type: 'text', text: 'Todos updated.' }] });
    for (let k = 0; k < 4; k++) {
      const id = `call_${++call}`;
      rows.push({ kind: 'assistant', content: [{ type: 'text', text: `Reading src/orders/file${u}_${k}.ts.` }, { type: 'tool_call', id, name: 'read', arguments: { path: `src/orders/file${u}_${k}.ts` } }] });
      const body = Array.from({ length: 40 }, (_, i) => `${String(i + 1).padStart(4)}\texport function loadItem${u}x${k}x${i}(items: Item[]): number { return items.length * ${100 + i}; }`).join('\n');
      rows.push({ kind: 'tool_result', call_id: id, is_error: false, content: [{ type: 'text', text: body }] });
    }
    rows.push({ kind: 'assistant', content: [{ type: 'tool_call', id: `call_${++call}`, name: 'Edit', arguments: { file_path: `/repo/src/orders/parse${u}.ts`, old_string: 'a', new_string: 'b' } }] });
    rows.push({ kind: 'tool_result', call_id: `call_${call}`, is_error: false, content: [{ type: 'text', text: `Edited /repo/src/orders/parse${u}.ts.` }] });
    rows.push({ kind: 'assistant', content: [{ type: 'text', text: `Fixed parseOrder${u}; commit a1b2c3d${u} holds it. Shall I go on with step ${u + 1}?` }] });
  }
  return { format: 'claude-code', rows, model: 'claude-sonnet-4-5', skipped: {} };
}

describe('eval runs on a small transcript', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-eval-test-'));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const runs: RunMetrics[] = [];

  test('rolling and the baselines: pairing 0, within the window, recoverable 100%', async () => {
    const imported = smallTranscript();
    const window = 8000;
    const got = await Promise.all(['rolling', 'none', 'single-summary', 'masking'].map((s) => runEval('small', imported, s, { window, summarizer: { provider: 'extractive' }, tmp, recoverySample: 60 })));
    runs.push(...got);
    for (const r of got) {
      assert.equal(r.rejected_rows, 0, r.strategy);
      assert.equal(r.pairing_violations, 0, r.strategy);
      assert.equal(r.within_window_pct, 100, `${r.strategy}: largest ${r.max_window_ratio}`);
      assert.ok(r.retention.identifiers > 0, `${r.strategy} evicted something`);
      assert.equal(r.retention.recoverable_share, 1, r.strategy);
      assert.equal(r.turns.length, r.prepares);
      for (const [kind, p] of Object.entries(r.probes)) {
        // Masking keeps every message: no decision leaves the request, so none is probed.
        if (r.strategy === 'masking' && kind === 'decision') {
          assert.equal(p.requests, 0);
          continue;
        }
        assert.ok(p.requests > 0 && p.probes > 0, `${r.strategy}: ${kind} probes were scored`);
        assert.ok(p.retrieval_checked > 0, `${r.strategy}: ${kind} probes were looked for`);
        assert.equal(p.retrievable_share, 1, `${r.strategy}: every ${kind} probe's source row is found by transcript_grep`);
      }
    }
    const by = (s: string): RunMetrics => got.find((r) => r.strategy === s)!;
    assert.equal(by('none').compactions, 0);
    assert.ok(by('rolling').compactions > 0 && by('single-summary').compactions > 0);
    assert.ok(by('rolling').summarizer_tokens_in > 0);
    // With the notes layer on, every modified file and where the work stood are in every request.
    assert.equal(by('rolling').probes.artifact.kept_share, 1);
    assert.equal(by('rolling').probes.continuation.kept_share, 1);
    assert.equal(by('rolling').probes.continuation.complete, by('rolling').probes.continuation.requests);
    // Masking compacts with no model call, and its masked outputs count as evicted.
    assert.ok(by('masking').compactions > 0);
    assert.equal(by('masking').summarizer_tokens_in, 0);
    assert.ok(by('masking').probes.recall.requests > 0);
    // Between compactions rolling's requests only grow: its cache breaks are its compactions.
    assert.equal(by('rolling').cache_breaks, by('rolling').compactions);
    // none drops its oldest exchanges once full, which breaks the prefix on every such turn.
    assert.ok(by('none').cache_breaks > 0);
    relateToNone(runs);
    assert.equal(by('none').cost.vs_none, 1);
    assert.match(renderTable(runs), /\| small \| single-summary \|/);
    assert.match(renderSvg(runs), /<polyline[^>]+stroke="#d62728"/);
    const tables = renderProbeTables(runs);
    for (const kind of ['recall', 'artifact', 'continuation', 'decision']) assert.match(tables, new RegExp(`\\*\\*${kind}\\*\\* probes`));
    assert.match(tables, /\| small \| rolling \| \d+ \| 100% of \d+ \|/);
    assert.match(renderProbeSvg(runs), /<rect x="[\d.]+" y="[\d.]+" width="9" height="9" fill="#1f77b4"\/>/, 'rolling has an artifact mark');
  });
});
