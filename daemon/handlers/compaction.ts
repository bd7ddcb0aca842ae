// The compaction methods: prepare (every model call), usage.report, compact (/compact),
// context (/context) and frames. Each runs on the session's kernel queue, so one session never
// prepares and compacts at the same time. `prepare` is the pipeline (../prepare-pipeline.ts);
// the engine itself lives in strategies/prepare.ts.
import type { Result } from '../../protocol/methods.ts';
import { randomUUID } from 'node:crypto';
import { EncodedJson } from '../../protocol/rpc-message.ts';
import type { Observation } from '../../protocol/prepared.ts';
import { commitOwed, durable, type Db } from '../../storage/db.ts';
import { lastTurnMemoryCalls, proxySession, recentMemoryCalls } from '../../storage/log/proxy-state.ts';
import { lastPrompt, latestPrepared, reportUsage } from '../../storage/log/prepared-requests.ts';
import { learnTokenRatio, tokenRatio } from '../../storage/log/token-ratios.ts';
import { requireSession } from '../../storage/transcript/sessions.ts';
import type { Resolution } from '../../strategies/extensions/selection.ts';
import { inspectRequest, planCompaction, prepareRequest, previewRequest, warmRequest } from '../../strategies/prepare.ts';
import { cacheBreaks, noteCompaction, noteUsage } from '../cache-breaks.ts';
import { noteSent } from '../capabilities.ts';
import type { EncodingHandler, Handler } from '../context.ts';
import { renderObservation } from '../context-text.ts';
import { chooseStrategy, previewStrategy } from '../engine-setup.ts';
import { elideLeftBehind, finished, preparationFor, preparedRequest, savePreparation, summarizerNotes } from '../prepare-pipeline.ts';

export const prepare: EncodingHandler<'prepare'> = (params, ctx) => ctx.daemon.kernels.run(params.session, async (kernel) => new EncodedJson<Result<'prepare'>>((await preparedRequest(params, ctx, kernel)).bytes()));

/** The proxy reports every answer's usage through this: its commit is owed and paid off the loop before the reply (storage/db.ts commitOwed). */
export const usageReport: Handler<'usage.report'> = (params, { daemon }) =>
  daemon.kernels.run(params.session, async (kernel) => {
    const s = requireSession(daemon.db, params.session);
    const model = commitOwed(daemon.db, () => {
      const prepared = reportUsage(daemon.db, s.sid, params.prepared_id, params.input_tokens, params.cached_tokens ?? null);
      learnTokenRatio(daemon.db, s.sid, prepared.model, prepared.estimate, params.input_tokens);
      return prepared.model;
    });
    await durable(daemon.db);
    noteUsage(kernel, params.prepared_id, params.cached_tokens ?? null, tokenRatio(daemon.db, s.sid, model));
    return { ok: true as const };
  });

export const compact: Handler<'compact'> = (params, ctx) =>
  ctx.daemon.kernels.run(params.session, async (kernel) => {
    const { db } = ctx.daemon;
    const s = requireSession(db, params.session);
    const config = ctx.daemon.config();
    // A dry run plans with the named strategy as if chosen, storing nothing; the real run chooses it first.
    let resolution: Resolution | undefined;
    if (params.strategy !== undefined) {
      if (params.dry_run) resolution = previewStrategy(db, config, s.sid, params.strategy);
      else chooseStrategy(db, config, s.sid, params.strategy);
    }
    const p = preparationFor(ctx, kernel, s, lastPrompt(db, s.sid), { method: 'compact', force: true, focus: params.focus, readOnly: params.dry_run, resolution });
    if (params.dry_run) {
      await warmRequest(p.setup, p.args);
      const { dryRun, observation } = planCompaction(p.setup, p.args);
      const reason = p.setup.strategy === null ? 'no compaction strategy is enabled' : dryRun === null ? `${p.setup.strategy.name} has no dry run` : dryRun.reason;
      return { compacted: false, strategy: p.setup.strategy?.name ?? null, reason, plan: dryRun?.plan ?? null, observation };
    }
    const prepared = await prepareRequest(p.setup, p.args);
    const elision = await elideLeftBehind(ctx, p, 'compact', prepared);
    // Its compaction rebuilt the system prompt: the next request sends the current one.
    if (prepared.compacted) {
      noteSent(db, s.sid, kernel, p.setup, p.args, prepared);
      noteCompaction(kernel, prepared.observation);
    }
    // A manual compaction sends no provider request: its snapshot only has the estimate.
    const observation = finished(prepared.observation, { preparedId: randomUUID(), elision, notes: summarizerNotes(p, prepared) });
    savePreparation(ctx, p, observation);
    return { compacted: prepared.compacted, strategy: p.setup.strategy?.name ?? null, reason: prepared.reason, plan: null, observation };
  });

/** What /context says of a session the proxy keeps: its agent and the side requests it forwarded. */
function proxyNote(db: Db, sid: number): string | null {
  const p = proxySession(db, sid);
  if (p === undefined) return null;
  const side = p.side_requests === 0
    ? 'no side requests yet'
    : `${p.side_requests} side request(s) forwarded as they came and not recorded (~${p.side_input_tokens} input and ${p.side_output_tokens} output tokens as the upstream counted them)`;
  const passed = p.passed_through === 0 ? '' : `; ${p.passed_through} request(s) forwarded uncompacted (${p.passed_through_reason ?? 'no reason kept'})`;
  const own = p.client_compactions === 0 ? '' : `; the agent ran its own compaction ${p.client_compactions} time(s)`;
  return `proxy session (${p.wire}) of ${p.agent ?? 'an agent that sent no user-agent'}: ${side}${passed}${own}`;
}

/** A memory-tool call's arguments in a few words: its pattern or query, else its JSON. */
function callGist(name: string, args: string): string {
  let v: unknown;
  try {
    v = JSON.parse(args);
  } catch {
    v = args;
  }
  const o = typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};
  const key = ['pattern', 'query', 'node_id', 'id'].find((k) => o[k] !== undefined);
  const gist = key === undefined ? args : JSON.stringify(o[key]);
  return `${name}(${gist.length > 60 ? `${gist.slice(0, 57)}...` : gist})`;
}

/** What /context says of the memory tools the proxy ran: the last turn's rounds and cost, and the newest calls. */
function memoryToolNotes(db: Db, sid: number): string[] {
  const turn = lastTurnMemoryCalls(db, sid);
  if (turn.length === 0) return [];
  const rounds = new Map(turn.map((c) => [c.round, c]));
  const input = [...rounds.values()].reduce((n, c) => n + c.input_tokens, 0);
  const output = [...rounds.values()].reduce((n, c) => n + c.output_tokens, 0);
  const failed = turn.filter((c) => c.is_error === 1).length;
  const recent = recentMemoryCalls(db, sid, 5).map((c) => callGist(c.name, c.arguments));
  return [
    `memory tools run by the proxy in the last turn that used them: ${rounds.size} round(s), ${turn.length} call(s)${
      failed === 0 ? '' : ` (${failed} answered with an error)`
    }, ~${input} input and ${output} output tokens upstream for those rounds`,
    `last memory-tool calls, newest first: ${recent.join(', ')}`,
  ];
}

export const context: Handler<'context'> = (params, ctx) =>
  ctx.daemon.kernels.run(params.session, async (kernel) => {
    const { db } = ctx.daemon;
    const s = requireSession(db, params.session);
    const latest = latestPrepared(db, s.sid);
    let observation: Observation;
    if (latest !== undefined) {
      // Breaks found since that request (a provider miss, a /compact) are the kernel's.
      const breaks = cacheBreaks(kernel);
      observation = finished(latest.observation, { configErrors: ctx.daemon.configProblems(), cacheBreaks: breaks.length > 0 ? breaks : latest.observation.cache_breaks });
    } else {
      const p = preparationFor(ctx, kernel, s, lastPrompt(db, s.sid), { method: 'context', force: false, focus: undefined, readOnly: true });
      await warmRequest(p.setup, p.args);
      observation = inspectRequest(p.setup, p.args);
    }
    const proxied = proxyNote(db, s.sid);
    if (proxied !== null) observation = finished(observation, { notes: [proxied, ...memoryToolNotes(db, s.sid)] });
    return { observation, text: params.format === 'text' ? renderObservation(observation) : null };
  });

/**
 * The frames the session's next request would show, for the last model it prepared for (or the
 * one named): a read-only projection, nothing compacts. Each frame's caption is the text input
 * that precedes its image in the request.
 */
export const frames: Handler<'frames'> = (params, ctx) =>
  ctx.daemon.kernels.run(params.session, async (kernel) => {
    const { db } = ctx.daemon;
    const s = requireSession(db, params.session);
    const prompt = lastPrompt(db, s.sid);
    const model = params.model ?? prompt.model;
    const p = preparationFor(ctx, kernel, s, { ...prompt, model }, { method: 'frames', force: false, focus: undefined, readOnly: true });
    await warmRequest(p.setup, p.args);
    const { inputs } = previewRequest(p.setup, p.args);
    const out: Result<'frames'>['frames'] = [];
    for (const input of inputs) {
      const [caption, image] = input.content;
      if (caption?.type === 'text' && caption.text.startsWith('[archive frame ') && image?.type === 'image') {
        out.push({ hash: image.hash, width: image.width, height: image.height, caption: caption.text });
      }
    }
    return { model, frames: out };
  });
