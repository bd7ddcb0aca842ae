// The compaction methods: prepare (every model call), usage.report, compact (/compact) and
// context (/context). Each runs on the session's kernel queue, so one session never prepares
// and compacts at the same time; the engine itself lives in strategies/prepare.ts.
import type { Params, Result } from '../../protocol/methods.ts';
import { randomUUID } from 'node:crypto';
import type { ByteChunks } from '../../protocol/byte-chunks.ts';
import { EncodedJson } from '../../protocol/rpc-message.ts';
import type { Observation, PlainInput } from '../../protocol/prepared.ts';
import { headSeq } from '../../storage/transcript/history.ts';
import { lastPrompt, latestPrepared, reportUsage, savePrepared } from '../../storage/log/prepared-requests.ts';
import { type Db, readTogether } from '../../storage/db.ts';
import { yieldToEventLoop } from '../../protocol/time-slice.ts';
import { lastTurnMemoryCalls, proxySession, recentMemoryCalls } from '../../storage/log/proxy-state.ts';
import { getPayload } from '../../storage/images/payloads.ts';
import { requireSession, type SessionRecord } from '../../storage/transcript/sessions.ts';
import { learnTokenRatio } from '../../storage/log/token-ratios.ts';
import type { Resolution } from '../../strategies/extensions/selection.ts';
import type { Summarizer } from '../../strategies/summarizer/types.ts';
import { adoptSession, composeSystem, inspectRequest, planCompaction, prepareRequest, previewRequest, warmRequest, type EngineSetup, type PrepareArgs } from '../../strategies/prepare.ts';
import type { CallContext, EncodingHandler, Handler } from '../context.ts';
import { renderObservation } from '../context-text.ts';
import { noteSent, pinnedPrompt, tellPromptChanges } from '../capabilities.ts';
import { cacheBreaks, noteCompaction, notePrefix, noteUsage, renameLastPrepared } from '../cache-breaks.ts';
import { tokenRatio } from '../../storage/log/token-ratios.ts';
import { chooseStrategy, engineSetup, previewStrategy, summarizerNote } from '../engine-setup.ts';
import { finishElision } from '../image-elision.ts';
import { elisionStats } from '../../storage/images/elision.ts';
import type { Kernel } from '../kernels.ts';
import { cacheSlot } from '../../strategies/harness/kernel-cache.ts';
import { fitSessionImages, limitsForPrepare } from '../image-fit.ts';
import { encodePrepareReply } from '../prepare-reply.ts';

/** One preparation as a handler runs it: the engine's setup and arguments, and what the summarizer did. */
interface Preparation {
  setup: EngineSetup;
  args: PrepareArgs;
  /** Goes into the observation's notes once the summarizer has been called. */
  summarizerNote: string | null;
  summarized: () => boolean;
}

/**
 * The session's latest prepare reply (its JSON bytes, head and prepared id). An agent that asks
 * again without appending anything (a retried model call, a client that prepares twice) gets
 * the same reply under the same id: the record the usage report names is already stored, so
 * nothing is written. Any difference in what would be sent (system, inputs, tools,
 * observation) makes a new record. The bytes are kept rather than a digest: comparing them is
 * a memcmp where hashing costs as much as encoding (and a piece both replies share, such as an
 * inline frame, is not compared at all), and the kernel cache's byte bound counts them.
 */
const LAST_REPLY = cacheSlot<{ head: number; id: string; bytes: () => ByteChunks }>('compaction.lastReply');

/** Strategies whose one-time adoption already ran in this kernel. */
const ADOPTED = cacheSlot<Set<string>>('compaction.adopted');

/** Everything one preparation needs, with the kernel's one-time adoption done first. */
function preparationFor(
  ctx: CallContext,
  kernel: Kernel,
  s: SessionRecord,
  prompt: { model: string | null; instructions: string; tools: PrepareArgs['tools'] },
  opts: {
    /** The RPC method the frame serves, for the log. */
    method: string;
    force: boolean;
    focus: string | undefined;
    provider?: string | undefined;
    upstream?: PrepareArgs['upstream'];
    readOnly?: boolean;
    /** Plan with these extensions instead of the session's stored ones. */
    resolution?: Resolution;
  },
): Preparation {
  const { db } = ctx.daemon;
  const session = s.name;
  const head = headSeq(db, s.sid);
  // Client summaries go to the session's agent connection when the caller (a CLI) cannot write them.
  const via = ctx.daemon.summarizeRoutes.route(session, ctx.conn);
  const config = ctx.daemon.config();
  const chosen = engineSetup({ db, config, configErrors: ctx.daemon.configProblems(), sid: s.sid, modelId: prompt.model, conn: via, resolution: opts.resolution });
  let calls = 0;
  // A proxy request brings its own: the upstream it came for, unless the config names a backend.
  const configured = config.extensions.summarizer?.provider;
  const own = ctx.summarizer !== undefined && (configured === undefined || configured === 'upstream') ? ctx.summarizer : undefined;
  const inner = own ?? chosen.summarizer;
  const summarizer: Summarizer = {
    backend: inner.backend,
    model: inner.model,
    summarize: (req) => {
      calls += 1;
      return inner.summarize(req);
    },
  };
  // A layer that fails never fails the turn (the observation says so); the log says it once.
  const onLayerError = (layer: string, err: unknown): void => {
    ctx.daemon.log.warn({ err, session, method: opts.method, layer }, `layer ${layer} failed; the request went out without its update`);
  };
  const setup: EngineSetup = { ...chosen, summarizer, onLayerError };
  const args: PrepareArgs = {
    db,
    session: { sid: s.sid, name: s.name },
    head,
    instructions: prompt.instructions,
    clientPrompt: ctx.clientPrompt,
    tools: prompt.tools,
    force: opts.force,
    focus: opts.focus,
    cache: kernel.cache,
    signal: ctx.signal,
    provider: opts.provider,
    upstream: opts.upstream,
  };
  // Adoption may write (it upgrades old state formats): never on a read-only call like /context.
  const adopted = kernel.cache.getOrSet(ADOPTED, () => new Set<string>());
  const name = setup.strategy?.name ?? '';
  if (opts.readOnly !== true && !adopted.has(name)) {
    adoptSession(setup, args);
    adopted.add(name);
  }
  return { setup, args, summarizerNote: own !== undefined ? null : summarizerNote(config, via, ctx.conn), summarized: () => calls > 0 };
}

/** The observation as it goes out: its prepared id, and the summarizer's note when it was called. */
function identified(f: Preparation, observation: Observation, id: string): Observation {
  const notes = f.summarizerNote !== null && f.summarized() ? [...observation.notes, f.summarizerNote] : observation.notes;
  return { ...observation, prepared_id: id, notes };
}

function save(ctx: CallContext, f: Preparation, observation: Observation, prompt?: { instructions: string; tools: PrepareArgs['tools'] }): void {
  savePrepared(ctx.daemon.db, {
    id: observation.prepared_id ?? '',
    sid: f.args.session.sid,
    head: f.args.head,
    model: f.setup.modelId,
    estimate: observation.estimated_input_tokens,
    observation,
    prompt,
  });
}

function record(ctx: CallContext, f: Preparation, observation: Observation, prompt?: { instructions: string; tools: PrepareArgs['tools'] }, id: string = randomUUID()): Observation {
  const withId = identified(f, observation, id);
  save(ctx, f, withId, prompt);
  return withId;
}

/**
 * Finishes the image elision a compaction just scheduled before the request goes out, so the
 * prefix this request records already reflects the rewritten rows. A request that did not
 * compact schedules nothing and costs nothing here (a job a crash left is the start's to finish).
 */
async function elideLeftBehind<P extends { observation: Observation; compacted: boolean }>(ctx: CallContext, session: string, sid: number, method: string, prepared: P): Promise<P> {
  if (!prepared.compacted) return prepared;
  if (ctx.daemon.settings.fault === 'kill-before-elision') process.kill(process.pid, 'SIGKILL');
  const t = await finishElision(ctx.daemon.db, sid);
  if (t.rows === 0) return prepared;
  ctx.daemon.log.info({ session, method, ...t }, 'elided tool-output images the compacted request no longer carries');
  const e = elisionStats(ctx.daemon.db, sid);
  const images = { ...prepared.observation.images, elided: e.imagesElided, payloads_deleted: e.payloadsDeleted, bytes_freed: e.bytesFreed };
  return { ...prepared, observation: { ...prepared.observation, images } };
}

/**
 * Saves a prepare's record once its response is out: a task of its own on the session's engine
 * lane, after a turn of the event loop, so the write is not part of the round trip and every
 * later task of the session (the usage report naming this id, /context, /compact) still finds
 * it. A failed save is logged; the usage report for that id then gets unknown_prepared.
 */
function saveAfterReply(ctx: CallContext, session: string, f: Preparation, observation: Observation, prompt: { instructions: string; tools: PrepareArgs['tools'] }): void {
  ctx.daemon.kernels
    .run(session, async () => {
      await yieldToEventLoop();
      save(ctx, f, observation, prompt);
    })
    .catch((err: unknown) => ctx.daemon.log.error({ err, session, method: 'prepare' }, 'the prepared request could not be recorded'));
}

/** Extra words for a prepared request's observation from its caller (the proxy's, about its own changes). */
export type ExtraNotes = (prepared: { observation: Observation }) => string[];

/** `make`'s value, made the first time it is asked for. */
function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}

/**
 * The prepare pipeline on a session's kernel: what the socket's `prepare` answers and what the
 * proxy forwards. Answers the result and its reply bytes, encoded when first asked for (the
 * proxy writes the result in its wire's shape and asks only to compare two replies).
 */
export async function preparedRequest(params: Params<'prepare'>, ctx: CallContext, kernel: Kernel, extraNotes?: ExtraNotes): Promise<{ result: Result<'prepare'>; bytes: () => ByteChunks }> {
  const prompt = { model: params.model, instructions: params.instructions, tools: params.tools };
  ctx.daemon.summarizeRoutes.notePrepare(params.session, ctx.conn);
  const { db } = ctx.daemon;
  const { s, limits } = readTogether(db, () => {
    const s = requireSession(db, params.session);
    // Before the head is taken: a notice the prompt needs (a pin found at adoption) is part of this request.
    tellPromptChanges(kernel, db, ctx.daemon.config(), s.sid, prompt);
    // Before the head is taken too: the request must read the fitted images (docs/images.md).
    return { s, limits: limitsForPrepare(db, ctx.daemon.config(), { sid: s.sid, model: params.model, provider: params.provider, upstream: params.upstream }) };
  });
  const fit = limits === null ? null : await fitSessionImages({ db, log: ctx.daemon.log, kernel, session: params.session, sid: s.sid, method: 'prepare', limits });
  const f = readTogether(db, () => preparationFor(ctx, kernel, s, prompt, { method: 'prepare', force: params.force, focus: undefined, provider: params.provider, upstream: params.upstream }));
  const prepared = await elideLeftBehind(ctx, params.session, f.args.session.sid, 'prepare', await prepareRequest({ ...f.setup, pinnedPrompt: pinnedPrompt(kernel, f.setup, f.args) }, f.args));
  const { last, reuse, firstId, cache_breaks } = readTogether(db, () => {
    noteSent(db, f.args.session.sid, kernel, f.setup, f.args, prepared);
    // A prepare from the same head as the one before may be that one again: it then gets the
    // same id and nothing is written (see LAST_REPLY).
    const last = kernel.cache.get(LAST_REPLY);
    const reuse = !prepared.compacted && last?.head === f.args.head ? last.id : undefined;
    const firstId = reuse ?? randomUUID();
    const cache_breaks = notePrefix(kernel, db, f.args.session.sid, {
      preparedId: firstId,
      instructions: prepared.instructions,
      context: prepared.extensionContext,
      tools: prepared.tools,
      model: f.setup.modelId,
      provider: params.provider ?? f.setup.model?.provider,
      inputs: prepared.inputs,
      compacted: prepared.compacted,
      observation: prepared.observation,
    });
    return { last, reuse, firstId, cache_breaks };
  });
  let id = firstId;
  const extra = [...(fit?.notes ?? []), ...(extraNotes?.(prepared) ?? [])];
  const notes = extra.length === 0 ? prepared.observation.notes : [...prepared.observation.notes, ...extra];
  // Inline images are attached while the reply is encoded, which keeps their bytes between replies.
  const encoding = params.images === 'inline' ? { inlineImages: (hash: string) => getPayload(ctx.daemon.db, hash)?.data } : {};
  const answer = (preparedId: string) => {
    const observation = identified(f, { ...prepared.observation, cache_breaks, notes }, preparedId);
    const result: Result<'prepare'> = { prepared_id: preparedId, head: f.args.head, system: prepared.system, inputs: prepared.inputs, tools: prepared.tools, compacted: prepared.compacted, observation };
    return { observation, result, bytes: once(() => encodePrepareReply(result, encoding)) };
  };
  let reply = answer(id);
  if (reuse !== undefined && last !== undefined && reply.bytes().equals(last.bytes())) return { result: reply.result, bytes: last.bytes };
  if (reuse !== undefined) {
    id = randomUUID();
    renameLastPrepared(kernel, id);
    reply = answer(id);
  }
  saveAfterReply(ctx, params.session, f, reply.observation, prompt);
  kernel.cache.set(LAST_REPLY, { head: f.args.head, id, bytes: reply.bytes });
  if (prepared.compacted) ctx.daemon.log.info({ session: params.session, method: ctx.method ?? 'prepare', tokens: reply.observation.last_compaction }, 'compacted');
  return { result: reply.result, bytes: reply.bytes };
}

export const prepare: EncodingHandler<'prepare'> = (params, ctx) => ctx.daemon.kernels.run(params.session, async (kernel) => new EncodedJson<Result<'prepare'>>((await preparedRequest(params, ctx, kernel)).bytes()));

export const usageReport: Handler<'usage.report'> = (params, { daemon }) =>
  daemon.kernels.run(params.session, (kernel) => {
    const s = requireSession(daemon.db, params.session);
    const model = daemon.db.transaction(() => {
      const prepared = reportUsage(daemon.db, s.sid, params.prepared_id, params.input_tokens, params.cached_tokens ?? null);
      learnTokenRatio(daemon.db, s.sid, prepared.model, prepared.estimate, params.input_tokens);
      return prepared.model;
    })();
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
    const f = preparationFor(ctx, kernel, s, lastPrompt(db, s.sid), { method: 'compact', force: true, focus: params.focus, readOnly: params.dry_run, resolution });
    if (params.dry_run) {
      await warmRequest(f.setup, f.args);
      const { dryRun, observation } = planCompaction(f.setup, f.args);
      const reason = f.setup.strategy === null ? 'no compaction strategy is enabled' : dryRun === null ? `${f.setup.strategy.name} has no dry run` : dryRun.reason;
      return { compacted: false, strategy: f.setup.strategy?.name ?? null, reason, plan: dryRun?.plan ?? null, observation };
    }
    const prepared = await elideLeftBehind(ctx, params.session, s.sid, 'compact', await prepareRequest(f.setup, f.args));
    // Its compaction rebuilt the system prompt: the next request sends the current one.
    if (prepared.compacted) {
      noteSent(db, s.sid, kernel, f.setup, f.args, prepared);
      noteCompaction(kernel, prepared.observation);
    }
    // A manual compaction sends no provider request: its snapshot only has the estimate.
    const observation = record(ctx, f, prepared.observation);
    return { compacted: prepared.compacted, strategy: f.setup.strategy?.name ?? null, reason: prepared.reason, plan: null, observation };
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
      observation = { ...latest.observation, config_errors: ctx.daemon.configProblems(), cache_breaks: breaks.length > 0 ? breaks : latest.observation.cache_breaks };
    } else {
      const f = preparationFor(ctx, kernel, s, lastPrompt(db, s.sid), { method: 'context', force: false, focus: undefined, readOnly: true });
      await warmRequest(f.setup, f.args);
      observation = inspectRequest(f.setup, f.args);
    }
    const proxied = proxyNote(db, s.sid);
    if (proxied !== null) observation = { ...observation, notes: [...observation.notes, proxied, ...memoryToolNotes(db, s.sid)] };
    return { observation, text: params.format === 'text' ? renderObservation(observation) : null };
  });

/**
 * The request the session's stored history makes now, read-only: no compaction, no summarizer,
 * nothing written (the proxy's count_tokens). Its system, history inputs and observation.
 */
export async function previewPrepared(params: Params<'prepare'>, ctx: CallContext, kernel: Kernel): Promise<{ system: string; inputs: PlainInput[]; observation: Observation }> {
  const { db } = ctx.daemon;
  const s = requireSession(db, params.session);
  const f = preparationFor(ctx, kernel, s, { model: params.model, instructions: params.instructions, tools: params.tools }, { method: ctx.method ?? 'preview', force: false, focus: undefined, provider: params.provider, readOnly: true });
  await warmRequest(f.setup, f.args);
  const { inputs, observation } = previewRequest(f.setup, f.args);
  return { system: composeSystem(f.args.instructions, f.setup.extensionContext), inputs, observation };
}

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
    const f = preparationFor(ctx, kernel, s, { ...prompt, model }, { method: 'frames', force: false, focus: undefined, readOnly: true });
    await warmRequest(f.setup, f.args);
    const { inputs } = previewRequest(f.setup, f.args);
    const out: Result<'frames'>['frames'] = [];
    for (const input of inputs) {
      const [caption, image] = input.content;
      if (caption?.type === 'text' && caption.text.startsWith('[archive frame ') && image?.type === 'image') {
        out.push({ hash: image.hash, width: image.width, height: image.height, caption: caption.text });
      }
    }
    return { model, frames: out };
  });
