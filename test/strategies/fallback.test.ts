// A strategy's fallback as the engine resolves it (strategies/harness/fallback.ts): each call
// goes to the named strategy when `when` gives a reason, with the reason in the notes; a name
// the build lacks, or a chain of fallbacks, is refused when the tables are built.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Projection, Strategy, StrategyInput } from '../../strategies/contract.ts';
import { withFallback } from '../../strategies/harness/fallback.ts';
import { windowSection } from '../../strategies/harness/settings.ts';

/** A strategy that only says who it is, and records which of its hooks ran. */
function named(name: string, calls: string[], extra: Partial<Strategy> = {}): Strategy {
  const projection = (note: string): Projection => ({ inputs: [], sections: [], estimate: 0, due: false, notes: [note] });
  return {
    name,
    settings: windowSection({ tailPercent: 30 }),
    project: () => (calls.push(`${name}.project`), projection(name)),
    compact: () => (calls.push(`${name}.compact`), Promise.resolve({ compacted: false, reason: name, backend: null, evictedRows: 0 })),
    plan: () => (calls.push(`${name}.plan`), { plan: { evict_rows: 0, evict_from_seq: null, evict_to_seq: null, tail_rows: 0, estimated_tokens_before: 0, estimated_tokens_after: 0 }, reason: name }),
    ...extra,
  };
}

test('each call goes to the fallback exactly when `when` gives a reason, the reason first in the notes', async () => {
  const calls: string[] = [];
  let reason: string | null = null;
  const text = named('text', calls, { adopt: () => void calls.push('text.adopt') });
  const pictures = named('pictures', calls, { fallback: { strategy: 'text', when: () => reason } });
  const run = withFallback(pictures, { text, pictures });
  const input = {} as StrategyInput;
  assert.deepEqual(run.project(input).notes, ['pictures']);
  reason = 'the model reads no images';
  assert.deepEqual(run.project(input).notes, ['the model reads no images', 'text']);
  assert.equal((await run.compact(input, run.project(input), { forced: true, focus: undefined, summarizer: undefined as never, signal: undefined })).reason, 'text');
  assert.equal(run.plan?.(input, run.project(input), true).reason, 'text');
  reason = null;
  assert.equal(run.plan?.(input, run.project(input), true).reason, 'pictures');
  // The fallback's one-time upkeep runs whichever of the two serves next; no warm where neither has one.
  run.adopt?.(input);
  assert.ok(calls.includes('text.adopt'));
  assert.equal('warm' in run, false);
  assert.equal(withFallback(text, { text }), text, 'a strategy without a fallback is itself');
});

test('a fallback the build does not have, or one with a fallback of its own, is refused', () => {
  const calls: string[] = [];
  const a = named('a', calls, { fallback: { strategy: 'missing', when: () => null } });
  assert.throws(() => withFallback(a, { a }), /falls back to "missing", which this build does not have/);
  const b = named('b', calls, { fallback: { strategy: 'c', when: () => null } });
  const c = named('c', calls, { fallback: { strategy: 'b', when: () => null } });
  assert.throws(() => withFallback(b, { b, c }), /which has a fallback of its own/);
});
