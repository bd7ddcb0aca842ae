// The prepare pipeline: the one path a model call's request takes, whether it came over the
// socket (`prepare`) or through the proxy, which parses its wire into the same params first.
// It runs on the session's kernel, in this order (`preparedRequest`):
//
//   1. admit       the session, a notice the pinned prompt owes the model, the image limits
//   2. fit images  the session's images resized to what the target takes (image-fit.ts)
//   3. set up      the engine's setup and arguments for this session (`preparationFor`)
//   4. prepare     project, compact when due, project again (strategies/prepare.ts)
//   5. elide       the tool-output images a compaction left behind (image-elision.ts)
//   6. note        what was sent and its prefix, for the cache-break detector (cache-breaks.ts)
//   7. reply       the same reply again when nothing changed, else a new one (`LAST_REPLY`)
//   8. record      the prepared request saved once the reply is out (`saveAfterReply`)
//
// /compact, /context, the frames view and the proxy's count_tokens run steps 3 to 5 of it
// (handlers/compaction.ts). Whatever the daemon adds to the engine's observation is added in
// `finished`.
import type { Params, Result } from '../protocol/methods.ts';
import { randomUUID } from 'node:crypto';
import type { ByteChunks } from '../protocol/byte-chunks.ts';
import type { CacheBreak, Observation, PlainInput } from '../protocol/prepared.ts';
import { yieldToEventLoop } from '../protocol/time-slice.ts';
import { durable, readTogether, type Db } from '../storage/db.ts';
import { elisionStats, type ElisionStats } from '../storage/images/elision.ts';
import { getPayload } from '../storage/images/payloads.ts';
import { savePrepared } from '../storage/log/prepared-requests.ts';
import { headSeq } from '../storage/transcript/history.ts';
import { requireSession, type SessionRecord } from '../storage/transcript/sessions.ts';
import type { Resolution } from '../strategies/extensions/selection.ts';
import { cacheSlot } from '../strategies/harness/kernel-cache.ts';
import { adoptSession, composeSystem, openRequest, prepareRequest, previewRequest, sentAtOnce, warmRequest, type EngineSetup, type PrepareArgs, type Prepared } from '../strategies/prepare.ts';
import { noteSent, pinnedPrompt, tellPromptChanges } from './capabilities.ts';
import { notePrefix, renameLastPrepared } from './cache-breaks.ts';
import type { CallContext } from './context.ts';
import { engineSetup, summarizerNote } from './engine-setup.ts';
import { fitSessionImages, imagesWithinAtOnce, limitsForPrepare } from './image-fit.ts';
import { finishElision } from './image-elision.ts';
import type { Kernel } from './kernels.ts';
import { encodePrepareReply } from './prepare-reply.ts';

/** What a request's system prompt and tools start from: the client's. */
export interface ClientRequest {
  model: string | null;
  instructions: string;
  tools: PrepareArgs['tools'];
}

/** One preparation as the daemon runs it: the engine's setup and arguments. */
export interface Preparation {
  setup: EngineSetup;
  args: PrepareArgs;
  /** Where a client summary went, said in the observation once the summarizer was called. */
  summarizerNote: string | null;
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

/** Step 3: everything one preparation needs, with the kernel's one-time adoption done first. */
export function preparationFor(
  ctx: CallContext,
  kernel: Kernel,
  s: SessionRecord,
  prompt: ClientRequest,
  opts: {
    /** The RPC method the preparation serves, for the log. */
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
  // Client summaries go to the session's agent connection when the caller (a CLI) cannot write them.
  const via = ctx.daemon.summarizeRoutes.route(session, ctx.conn);
  const config = ctx.daemon.config();
  const chosen = engineSetup({ db, config, configErrors: ctx.daemon.configProblems(), sid: s.sid, modelId: prompt.model, conn: via, resolution: opts.resolution });
  // A proxy request brings its own: the upstream it came for, unless the config names a backend.
  const configured = config.extensions.summarizer?.provider;
  const own = ctx.summarizer !== undefined && (configured === undefined || configured === 'upstream') ? ctx.summarizer : undefined;
  // A layer that fails never fails the turn (the observation says so); the log says it once.
  const onLayerError = (layer: string, err: unknown): void => {
    ctx.daemon.log.warn({ err, session, method: opts.method, layer }, `layer ${layer} failed; the request went out without its update`);
  };
  const setup: EngineSetup = { ...chosen, summarizer: own ?? chosen.summarizer, onLayerError };
  const args: PrepareArgs = {
    db,
    session: { sid: s.sid, name: s.name },
    head: headSeq(db, s.sid),
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
  return { setup, args, summarizerNote: own !== undefined ? null : summarizerNote(config, via, ctx.conn) };
}

/** What the daemon adds to an observation the engine made. */
export interface Finish {
  preparedId?: string;
  /** The session's elision totals, when a job finished after the engine observed them (step 5). */
  elision?: ElisionStats | undefined;
  cacheBreaks?: CacheBreak[];
  configErrors?: Observation['config_errors'];
  /** Said after the engine's notes, in this order. */
  notes?: readonly string[];
}

/** The one place an observation is finished after the engine: the fields `add` names, the rest kept. */
export function finished(observation: Observation, add: Finish): Observation {
  const e = add.elision;
  return {
    ...observation,
    prepared_id: add.preparedId ?? observation.prepared_id,
    cache_breaks: add.cacheBreaks ?? observation.cache_breaks,
    config_errors: add.configErrors ?? observation.config_errors,
    images: e === undefined ? observation.images : { ...observation.images, elided: e.imagesElided, payloads_deleted: e.payloadsDeleted, bytes_freed: e.bytesFreed },
    notes: add.notes === undefined || add.notes.length === 0 ? observation.notes : [...observation.notes, ...add.notes],
  };
}

/** The note of where a client summary went, when this preparation called the summarizer. */
export function summarizerNotes(p: Preparation, prepared: Pick<Prepared, 'summarizerCalls'>): string[] {
  return p.summarizerNote !== null && prepared.summarizerCalls > 0 ? [p.summarizerNote] : [];
}

/**
 * Step 5: finishes the image elision a compaction just scheduled before the request goes out,
 * so the prefix this request records already reflects the rewritten rows. Answers the session's
 * elision totals when rows were elided. A request that did not compact schedules nothing and
 * costs nothing here (a job a crash left is the start's to finish).
 */
export async function elideLeftBehind(ctx: CallContext, p: Preparation, method: string, prepared: Pick<Prepared, 'compacted'>): Promise<ElisionStats | undefined> {
  if (!prepared.compacted) return undefined;
  const { sid, name: session } = p.args.session;
  if (ctx.daemon.settings.fault === 'kill-before-elision') process.kill(process.pid, 'SIGKILL');
  const t = await finishElision(ctx.daemon.db, sid);
  if (t.rows === 0) return undefined;
  ctx.daemon.log.info({ session, method, ...t }, 'elided tool-output images the compacted request no longer carries');
  return elisionStats(ctx.daemon.db, sid);
}

/** Stores a finished observation as the session's prepared request (and the prompt it went out with). */
export function savePreparation(ctx: CallContext, p: Preparation, observation: Observation, prompt?: Omit<ClientRequest, 'model'>): void {
  savePrepared(ctx.daemon.db, {
    id: observation.prepared_id ?? '',
    sid: p.args.session.sid,
    head: p.args.head,
    model: p.setup.modelId,
    estimate: observation.estimated_input_tokens,
    observation,
    prompt,
  });
}

/**
 * Step 8: saves a prepare's record once its response is out: a task of its own on the
 * session's engine lane, after a turn of the event loop, so the write is not part of the round
 * trip and every later task of the session (the usage report naming this id, /context,
 * /compact) still finds it. A failed save is logged; the usage report for that id then gets
 * unknown_prepared.
 */
function saveAfterReply(ctx: CallContext, p: Preparation, observation: Observation, prompt: Omit<ClientRequest, 'model'>): void {
  const session = p.args.session.name;
  ctx.daemon.kernels
    .run(session, async () => {
      await yieldToEventLoop();
      savePreparation(ctx, p, observation, prompt);
      // A changed prompt's record is owed its fsync (savePrepared): paid before the session's next task.
      await durable(ctx.daemon.db);
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

/** Step 6: what was sent and its prefix noted, and the id the reply goes out under (the last one's, when it may be that one again). */
function noteReply(db: Db, kernel: Kernel, params: Params<'prepare'>, p: Preparation, prepared: Prepared) {
  noteSent(db, p.args.session.sid, kernel, p.setup, p.args, prepared);
  const last = kernel.cache.get(LAST_REPLY);
  const reuse = !prepared.compacted && last?.head === p.args.head ? last.id : undefined;
  const firstId = reuse ?? randomUUID();
  const cacheBreaks = notePrefix(kernel, db, p.args.session.sid, {
    preparedId: firstId,
    instructions: prepared.instructions,
    context: prepared.extensionContext,
    tools: prepared.tools,
    model: p.setup.modelId,
    provider: params.provider ?? p.setup.model?.provider,
    inputs: prepared.inputs,
    compacted: prepared.compacted,
    observation: prepared.observation,
  });
  return { last, reuse, cacheBreaks, firstId };
}

/**
 * The pipeline on a session's kernel: what the socket's `prepare` answers and what the proxy
 * forwards. Answers the result and its reply bytes, encoded when first asked for (the proxy
 * writes the result in its wire's shape and asks only to compare two replies).
 */
export async function preparedRequest(params: Params<'prepare'>, ctx: CallContext, kernel: Kernel, extraNotes?: ExtraNotes): Promise<{ result: Result<'prepare'>; bytes: () => ByteChunks }> {
  const prompt = { model: params.model, instructions: params.instructions, tools: params.tools };
  const { db } = ctx.daemon;
  ctx.daemon.summarizeRoutes.notePrepare(params.session, ctx.conn);

  // 1. Admit. Both before the head is taken: a notice the prompt needs (a pin found at
  // adoption) is part of this request, and the request must read the fitted images (docs/images.md).
  // The usual request has no image to fit and nothing to wait for: steps 1 to 6 are then one
  // stretch of reads (readTogether), as each stretch's start costs about what a dozen of its
  // reads do.
  const begin = (s: SessionRecord) => {
    // 3. Set up.
    const p = preparationFor(ctx, kernel, s, prompt, { method: 'prepare', force: params.force, focus: undefined, provider: params.provider, upstream: params.upstream });
    // 4. Prepare: the engine's opening, which may already be the request.
    const setup = { ...p.setup, pinnedPrompt: pinnedPrompt(kernel, p.setup, p.args) };
    const opening = openRequest(setup, p.args);
    const sent = sentAtOnce(opening);
    // 6. (for a request made at once; step 5 has nothing to do without a compaction)
    return { p, setup, opening, sent, noted: sent === undefined ? undefined : noteReply(db, kernel, params, p, sent) };
  };
  const admitted = readTogether(db, () => {
    const s = requireSession(db, params.session);
    tellPromptChanges(kernel, db, ctx.daemon.config(), s.sid, prompt);
    const limits = limitsForPrepare(db, ctx.daemon.config(), { sid: s.sid, model: params.model, provider: params.provider, upstream: params.upstream });
    const fitting = limits !== null && !imagesWithinAtOnce({ db, kernel, sid: s.sid, limits });
    return { s, limits, begun: fitting ? undefined : begin(s) };
  });
  // 2. Fit images.
  const { s, limits } = admitted;
  const fit = admitted.begun === undefined && limits !== null ? await fitSessionImages({ db, log: ctx.daemon.log, kernel, session: params.session, sid: s.sid, method: 'prepare', limits }) : null;
  const begun = admitted.begun ?? readTogether(db, () => begin(s));
  const p = begun.p;
  const prepared = begun.sent ?? (await prepareRequest(begun.setup, p.args, begun.opening));
  // 5. Elide.
  const elision = await elideLeftBehind(ctx, p, 'prepare', prepared);
  // 6. Note what was sent and its prefix. A prepare from the same head as the one before may
  // be that one again: it then gets the same id and nothing is written (see LAST_REPLY).
  const { last, reuse, cacheBreaks, firstId } = begun.noted ?? readTogether(db, () => noteReply(db, kernel, params, p, prepared));

  // 7. Reply: the last one again when it is byte for byte the same, else a new one under a new id.
  const notes = [...(fit?.notes ?? []), ...(extraNotes?.(prepared) ?? []), ...summarizerNotes(p, prepared)];
  // Inline images are attached while the reply is encoded, which keeps their bytes between replies.
  const encoding = params.images === 'inline' ? { inlineImages: (hash: string) => getPayload(db, hash)?.data } : {};
  const answer = (preparedId: string) => {
    const observation = finished(prepared.observation, { preparedId, elision, cacheBreaks, notes });
    const result: Result<'prepare'> = { prepared_id: preparedId, head: p.args.head, system: prepared.system, inputs: prepared.inputs, tools: prepared.tools, compacted: prepared.compacted, observation };
    return { observation, result, bytes: once(() => encodePrepareReply(result, encoding)) };
  };
  let reply = answer(firstId);
  if (reuse !== undefined && last !== undefined && reply.bytes().equals(last.bytes())) return { result: reply.result, bytes: last.bytes };
  if (reuse !== undefined) {
    const id = randomUUID();
    renameLastPrepared(kernel, id);
    reply = answer(id);
  }

  // 8. Record, after the reply.
  saveAfterReply(ctx, p, reply.observation, prompt);
  kernel.cache.set(LAST_REPLY, { head: p.args.head, id: reply.result.prepared_id, bytes: reply.bytes });
  if (prepared.compacted) ctx.daemon.log.info({ session: params.session, method: ctx.method ?? 'prepare', tokens: reply.observation.last_compaction }, 'compacted');
  return { result: reply.result, bytes: reply.bytes };
}

/**
 * The request the session's stored history makes now, read-only: no compaction, no summarizer,
 * nothing written (the proxy's count_tokens). Its system, history inputs and observation.
 */
export async function previewPrepared(params: Params<'prepare'>, ctx: CallContext, kernel: Kernel): Promise<{ system: string; inputs: PlainInput[]; observation: Observation }> {
  const { db } = ctx.daemon;
  const s = requireSession(db, params.session);
  const p = preparationFor(ctx, kernel, s, { model: params.model, instructions: params.instructions, tools: params.tools }, { method: ctx.method ?? 'preview', force: false, focus: undefined, provider: params.provider, readOnly: true });
  await warmRequest(p.setup, p.args);
  const { inputs, observation } = previewRequest(p.setup, p.args);
  return { system: composeSystem(p.args.instructions, p.setup.extensionContext), inputs, observation };
}
