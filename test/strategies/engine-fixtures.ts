// Test helpers for the compaction engine: a session filled with realistic turns, an engine
// setup for rolling with a given window, and summarizers that record, fail or answer fixed text.
import assert from 'node:assert/strict';
import type { PlainInput } from '../../protocol/prepared.ts';
import type { RowIn } from '../../protocol/rows.ts';
import { AlbedoError } from '../../protocol/errors.ts';
import type { Db } from '../../storage/db.ts';
import { snapshot } from '../../storage/transcript/history.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import type { PrepareArgs, EngineSetup } from '../../strategies/prepare.ts';
import type { FoldPlugin, Layer, Strategy, StrategyInput } from '../../strategies/contract.ts';
import { plainTarget, type ProjectionTarget } from '../../strategies/projection.ts';
import { rolling } from '../../strategies/rolling/rolling.ts';
import type { Summarizer, SummaryRequest, SummaryResult } from '../../strategies/summarizer/types.ts';
import { assistant, toolResult, user } from '../storage/factories.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';

/** A summarizer that answers `summary #n` (plus a marker of what it read) and keeps every request. */
export class RecordingSummarizer implements Summarizer {
  readonly backend = 'client' as const;
  readonly model = 'test';
  readonly calls: SummaryRequest[] = [];
  failWith: string | undefined;
  /** Text to answer; default a short numbered summary. */
  answer: ((req: SummaryRequest, n: number) => string) | undefined;

  async summarize(req: SummaryRequest): Promise<SummaryResult> {
    this.calls.push(req);
    if (this.failWith !== undefined) {
      throw new AlbedoError('summarizer_failed', this.failWith, { backend: 'client', reason: 'remote_error' });
    }
    const text = this.answer?.(req, this.calls.length) ?? `summary #${this.calls.length}`;
    return { text, backend: 'client', model: 'test', outputTokens: Math.ceil(text.length / 4) };
  }
}

export function setupFor(opts: { window?: number; trigger?: number; tail?: number; maxToolOutput?: number; summarizer?: Summarizer; strategy?: Strategy | null; layers?: Layer[]; folds?: FoldPlugin[] }): EngineSetup {
  return {
    strategy: opts.strategy === undefined ? rolling : opts.strategy,
    settings: { contextWindowTokens: opts.window, triggerPercent: opts.trigger ?? 80, tailPercent: opts.tail ?? 25, maxToolOutputTokens: opts.maxToolOutput },
    modelId: 'test-model',
    model: undefined,
    extensionContext: '',
    extensionTools: [],
    summarizer: opts.summarizer ?? new RecordingSummarizer(),
    configErrors: [],
    layers: opts.layers ?? [],
    folds: opts.folds ?? [],
  };
}

export function argsFor(db: Db, session: string, opts: { force?: boolean; focus?: string; cache?: KernelCache; instructions?: string } = {}): PrepareArgs {
  const snap = snapshot(db, session);
  return {
    db,
    session: { sid: snap.sid, name: session },
    head: snap.head,
    instructions: opts.instructions ?? 'You are a coding agent.',
    tools: [],
    force: opts.force ?? false,
    focus: opts.focus,
    cache: opts.cache ?? new KernelCache(),
    signal: undefined,
  };
}

/**
 * What a strategy is given for session `s` at its head: a 100k-token window, no pinned prompt,
 * the plain target unless another is given. For tests of the harness below the engine.
 */
export function strategyInput(db: Db, cache: KernelCache, target: ProjectionTarget = plainTarget('s')): StrategyInput {
  const a = argsFor(db, 's');
  return {
    db,
    session: a.session,
    head: a.head,
    window: { window: 100_000, source: 'config', triggerPercent: 80, tailPercent: 25, ratio: 1 },
    settings: { triggerPercent: 80, tailPercent: 25 },
    pinnedTokens: 0,
    folds: [],
    target,
    cache,
  };
}

/**
 * One turn: a user request, an assistant reply with a tool call, its result, and a closing
 * assistant message. About `size` characters of text per row.
 */
export function turn(i: number, size = 200): RowIn[] {
  const pad = (s: string) => (s + ' ').repeat(Math.max(1, Math.ceil(size / (s.length + 1)))).slice(0, size);
  return [
    user(`request ${i}: please fix src/module${i}.ts ${pad('details')}`),
    assistant(`reading src/module${i}.ts`, [`call-${i}`]),
    toolResult(`call-${i}`, `contents of module ${i}: ${pad('code')}`),
    assistant(`fixed module ${i} ${pad('explanation')}`),
  ];
}

export async function sessionWithTurns(db: Db, name: string, turns: number, size = 200): Promise<void> {
  openSession(db, { session: name });
  for (let i = 0; i < turns; i++) await appendRows(db, name, turn(i, size));
}

/** Every tool call in the inputs is answered in the next input, and every result follows its call. */
export function assertCallsPaired(inputs: readonly PlainInput[]): void {
  for (let i = 0; i < inputs.length; i++) {
    const calls = inputs[i]!.content.flatMap((p) => (p.type === 'tool_call' ? [p.id] : []));
    if (calls.length > 0) {
      const results = inputs[i + 1]?.content.flatMap((p) => (p.type === 'tool_result' ? [p.call_id] : [])) ?? [];
      assert.deepEqual(results, calls, `call(s) ${calls.join(',')} at input ${i} are answered next`);
    }
    for (const p of inputs[i]!.content) {
      if (p.type === 'tool_result') {
        assert.ok(inputs[i - 1]?.content.some((q) => q.type === 'tool_call' && q.id === p.call_id), `result ${p.call_id} follows its call`);
      }
    }
  }
}
