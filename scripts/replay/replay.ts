// Replays an imported transcript into a real daemon turn by turn, the way an agent CLI drives
// it: before every assistant row (a model call) the rows not yet appended go in, then `prepare`,
// then `usage.report` with a measured count of 1.3x the estimate (or what the caller's `usage`
// says: the eval adds the cached prefix). Collects what each prepared
// request would have been: its size against the window, compaction state, unanswered calls and
// whether the request prefix stayed stable between compactions.
import { isDeepStrictEqual } from 'node:util';
import type { AlbedoClient } from '../../protocol/client.ts';
import { DomainCode } from '../../protocol/errors.ts';
import type { Result } from '../../protocol/methods.ts';
import type { PlainInput, ToolSpec } from '../../protocol/prepared.ts';
import type { RowIn } from '../../protocol/rows.ts';
import { RpcRemoteError } from '../../protocol/rpc-message.ts';
import type { ImportedTranscript } from '../../cli/import/index.ts';
import { REPLAY_INSTRUCTIONS, REPLAY_TOOLS } from './prompt.ts';

export const DEFAULT_MODEL = 'claude-sonnet-4-5';

export interface ReplayOptions {
  /** The context window the daemon was configured with (extensions.json), in tokens. */
  window: number;
  /** Model id for prepare; default the transcript's, else claude-sonnet-4-5. */
  model?: string;
  /** Provider for prepare; default the transcript's. */
  provider?: string;
  /** System prompt; default the transcript's own, else a realistic ~2k-character one. */
  instructions?: string;
  tools?: ToolSpec[];
  /** Measured input tokens reported per estimated token. Default 1.3. */
  measuredRatio?: number;
  /** Rows per append call at most. Default 200. */
  batchRows?: number;
  /** Bytes of row JSON per append call at most. Default 8 MB. */
  batchBytes?: number;
  /** Called after each prepare (progress, debugging). */
  onPrepare?: (p: PrepareRecord, index: number) => void;
  /**
   * What `usage.report` says for a prepared request; default measuredRatio x the estimate,
   * nothing cached. `previous` is the request before it in this replay.
   */
  usage?: (p: PreparedRequest, previous: PreparedRequest | null) => { input_tokens: number; cached_tokens?: number };
  /**
   * Sees each whole prepared request after its usage report, with the number of transcript
   * rows appended before it; awaited before the next rows go in (the eval reads state here).
   */
  inspect?: (p: PreparedRequest, rec: PrepareRecord, appended: number) => Promise<void> | void;
}

/** What `prepare` answers. */
export type PreparedRequest = Result<'prepare'>;

export interface PrepareRecord {
  /** Index of the assistant row this model call produced. */
  row: number;
  head: number;
  estimated: number;
  /** observation.calibrated_input_tokens, or the estimate when the daemon sends none. */
  calibrated: number;
  compacted: boolean;
  due: boolean;
  latched: boolean;
  failure: string | null;
  /** tool_call parts not answered by a tool_result in the next input. */
  calls_without_results: number;
  /** tool_result parts whose call is not in the previous input. */
  results_without_calls: number;
  /** Versus the previous prepare, when this one did not compact: was the previous request a prefix? */
  prefix_stable: boolean | null;
  ms: number;
}

export interface ReplayStats {
  rows: { total: number; accepted: number; rejected: number; rejected_by_code: Record<string, number> };
  prepares: number;
  /** Index of the first prepare that was due (or compacted); null when none was. */
  first_due: number | null;
  /** Prepares whose calibrated tokens exceed the window. */
  over_window: number;
  /** The same from the first due prepare on (inclusive). */
  over_window_after_due: number;
  prepares_after_due: number;
  /** Largest calibrated request, as a multiple of the window. */
  max_calibrated_ratio: number;
  /** Largest estimate x measuredRatio (what the provider would count), as a multiple of the window. */
  max_measured_ratio: number;
  compactions: number;
  /** Prepares that reported a failure other than the latch notice. */
  failures: number;
  failure_reasons: string[];
  latched: number;
  /** Unanswered tool calls summed over all prepared requests, and the requests that had any. */
  calls_without_results: number;
  prepares_with_unanswered_calls: number;
  results_without_calls: number;
  /** Consecutive non-compacting prepares whose earlier request was not a prefix of the later. */
  prefix_breaks: number;
  prefix_checks: number;
  wall_ms: number;
  prepare_ms_total: number;
  records: PrepareRecord[];
}

type Prepared = PreparedRequest;

/** Pairing as a provider checks it: every call is answered in the next input, every result follows its call. */
export function unpairedParts(inputs: readonly PlainInput[]): { calls: number; results: number } {
  let calls = 0;
  let results = 0;
  for (let i = 0; i < inputs.length; i++) {
    const next = new Set(inputs[i + 1]?.content.flatMap((p) => (p.type === 'tool_result' ? [p.call_id] : [])) ?? []);
    for (const p of inputs[i]!.content) {
      if (p.type === 'tool_call' && !next.has(p.id)) calls++;
      if (p.type === 'tool_result' && !(inputs[i - 1]?.content.some((q) => q.type === 'tool_call' && q.id === p.call_id) ?? false)) results++;
    }
  }
  return { calls, results };
}

/** Whether (system, inputs) of `earlier` is an element-wise prefix of `later`. */
export function isPrefix(earlier: Pick<Prepared, 'system' | 'inputs'>, later: Pick<Prepared, 'system' | 'inputs'>): boolean {
  if (earlier.system !== later.system || earlier.inputs.length > later.inputs.length) return false;
  return earlier.inputs.every((x, i) => isDeepStrictEqual(x, later.inputs[i]));
}

function domainCode(err: unknown): string | null {
  if (!(err instanceof RpcRemoteError)) return null;
  const data = err.data as { code?: unknown } | undefined;
  if (typeof data?.code === 'string') return data.code;
  return Object.values(DomainCode).includes(err.code as never) ? String(err.code) : null;
}

/**
 * Drives `client` through `imported` in session `session` (opened here). Returns the stats; a
 * non-domain failure of the daemon (a lost socket, an internal error) is thrown.
 */
export async function replayTranscript(client: AlbedoClient, session: string, imported: ImportedTranscript, opts: ReplayOptions): Promise<ReplayStats> {
  const t0 = performance.now();
  const measured = opts.measuredRatio ?? 1.3;
  const batchRows = opts.batchRows ?? 200;
  const batchBytes = opts.batchBytes ?? 8 * 1024 * 1024;
  const model = opts.model ?? imported.model ?? DEFAULT_MODEL;
  const provider = opts.provider ?? imported.provider;
  const instructions = opts.instructions ?? (imported.instructions !== undefined && imported.instructions.trim() !== '' ? imported.instructions : REPLAY_INSTRUCTIONS);
  const tools = opts.tools ?? REPLAY_TOOLS;
  const rows = imported.rows;

  const stats: ReplayStats = {
    rows: { total: rows.length, accepted: 0, rejected: 0, rejected_by_code: {} },
    prepares: 0,
    first_due: null,
    over_window: 0,
    over_window_after_due: 0,
    prepares_after_due: 0,
    max_calibrated_ratio: 0,
    max_measured_ratio: 0,
    compactions: 0,
    failures: 0,
    failure_reasons: [],
    latched: 0,
    calls_without_results: 0,
    prepares_with_unanswered_calls: 0,
    results_without_calls: 0,
    prefix_breaks: 0,
    prefix_checks: 0,
    wall_ms: 0,
    prepare_ms_total: 0,
    records: [],
  };
  const reject = (code: string): void => {
    stats.rows.rejected++;
    stats.rows.rejected_by_code[code] = (stats.rows.rejected_by_code[code] ?? 0) + 1;
  };

  await client.call('session.open', { session });

  /** Appends one batch; on a domain error its rows are retried one by one so none of the rest is lost. */
  const appendBatch = async (batch: RowIn[]): Promise<void> => {
    try {
      await client.call('transcript.append', { session, rows: batch });
      stats.rows.accepted += batch.length;
      return;
    } catch (err) {
      const code = domainCode(err);
      if (code === null && !(err instanceof RpcRemoteError && err.code === -32602)) throw err;
      if (batch.length === 1) {
        reject(code ?? 'invalid_params');
        return;
      }
    }
    for (const row of batch) await appendBatch([row]);
  };

  let appended = 0;
  const appendUpTo = async (end: number): Promise<void> => {
    while (appended < end) {
      const batch: RowIn[] = [];
      let bytes = 0;
      while (appended < end && batch.length < batchRows) {
        const size = JSON.stringify(rows[appended]).length;
        if (batch.length > 0 && bytes + size > batchBytes) break;
        batch.push(rows[appended]!);
        bytes += size;
        appended++;
      }
      await appendBatch(batch);
    }
  };

  let previous: Prepared | null = null;
  for (let i = 0; i < rows.length; i++) {
    if (rows[i]!.kind !== 'assistant') continue;
    await appendUpTo(i);
    const p0 = performance.now();
    const p = await client.call('prepare', { session, model, ...(provider === undefined ? {} : { provider }), instructions, tools });
    const ms = performance.now() - p0;
    const usage = opts.usage?.(p, previous) ?? { input_tokens: Math.round(measured * p.observation.estimated_input_tokens) };
    await client.call('usage.report', { session, prepared_id: p.prepared_id, ...usage });

    const o = p.observation;
    const unpaired = unpairedParts(p.inputs);
    const prefix = previous !== null && !p.compacted ? isPrefix(previous, p) : null;
    const rec: PrepareRecord = {
      row: i,
      head: p.head,
      estimated: o.estimated_input_tokens,
      calibrated: o.calibrated_input_tokens ?? o.estimated_input_tokens,
      compacted: p.compacted,
      due: o.due,
      latched: o.latched,
      failure: o.failure,
      calls_without_results: unpaired.calls,
      results_without_calls: unpaired.results,
      prefix_stable: prefix,
      ms,
    };
    const index = stats.records.length;
    stats.records.push(rec);
    opts.onPrepare?.(rec, index);
    await opts.inspect?.(p, rec, appended);
    previous = p;
  }
  await appendUpTo(rows.length);

  for (const [index, r] of stats.records.entries()) {
    stats.prepares++;
    stats.prepare_ms_total += r.ms;
    if ((r.due || r.compacted) && stats.first_due === null) stats.first_due = index;
    const over = r.calibrated > opts.window;
    if (over) stats.over_window++;
    if (stats.first_due !== null) {
      stats.prepares_after_due++;
      if (over) stats.over_window_after_due++;
    }
    stats.max_calibrated_ratio = Math.max(stats.max_calibrated_ratio, r.calibrated / opts.window);
    stats.max_measured_ratio = Math.max(stats.max_measured_ratio, (measured * r.estimated) / opts.window);
    if (r.compacted) stats.compactions++;
    if (r.latched) stats.latched++;
    if (r.failure !== null && !r.latched) {
      stats.failures++;
      if (!stats.failure_reasons.includes(r.failure) && stats.failure_reasons.length < 5) stats.failure_reasons.push(r.failure);
    }
    stats.calls_without_results += r.calls_without_results;
    if (r.calls_without_results > 0) stats.prepares_with_unanswered_calls++;
    stats.results_without_calls += r.results_without_calls;
    if (r.prefix_stable !== null) {
      stats.prefix_checks++;
      if (!r.prefix_stable) stats.prefix_breaks++;
    }
  }
  stats.wall_ms = performance.now() - t0;
  return stats;
}
