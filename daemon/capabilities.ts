// What the model of each live session last learned of its system prompt, and the notices that
// keep it right: a reload that changes a session's extension context, or a restart that finds
// the context or the client's instructions changed, adds one `capabilities changed` notice, and
// the system prompt stays the one the model already has (so the provider's cached prefix
// survives) until the next compaction rebuilds it. Kept per kernel and, for restarts and
// unloads, in the session row (known_instructions, known_context, known_tools, known_told*).
import type { Db } from '../storage/db.ts';
import { knownPrompt, saveKnownPrompt, saveKnownTold, type KnownPrompt, type PromptParts } from '../storage/log/known-prompt.ts';
import { findSession } from '../storage/transcript/sessions.ts';
import { appendNotice } from '../storage/transcript/write.ts';
import type { ToolSpec } from '../protocol/prepared.ts';
import { cacheSlot } from '../strategies/harness/kernel-cache.ts';
import { requestTools, type EngineSetup, type Prepared } from '../strategies/prepare.ts';
import { toolsDigest } from './cache-breaks.ts';
import type { ConfigSnapshot } from './config.ts';
import { enabledMemoryTools, toolSpec } from '../strategies/extensions/tools.ts';
import { extensionContext, resolveExtensions } from './engine-setup.ts';
import type { Kernel, SessionKernels } from './kernels.ts';
import type { Logger } from './logger.ts';

interface Known {
  /** The parts of the system prompt the last prepared request carried. */
  system: PromptParts;
  /** A digest of every tool that request carried (`toolsDigest`). */
  tools: string;
  /** What the model last learned of: `system`'s parts, or a later notice's. */
  told: PromptParts;
  /**
   * The session's row holds `system` and `tools` as they are, so sending them again writes
   * nothing. False after adopting a row recorded before instructions were kept.
   */
  stored: boolean;
}

/** What the client sends of a request's prompt. */
export interface ClientPrompt {
  instructions: string;
  tools: readonly ToolSpec[];
}

const KNOWN = cacheSlot<Known>('capabilities.known');

function same(a: PromptParts, b: PromptParts): boolean {
  return a.instructions === b.instructions && a.context === b.context;
}

/**
 * The system prompt's parts this request keeps instead of the current ones, or undefined to
 * send the current ones. A pin holds only while a notice told the model of exactly what the
 * prompt would say now and the request's tools are the same: any other change (an /extensions
 * choice since, changed instructions the model was not told of, a different tool set) misses
 * the cache anyway.
 */
export function pinnedPrompt(kernel: Kernel, setup: EngineSetup, request: ClientPrompt): PromptParts | undefined {
  const k = kernel.cache.get(KNOWN);
  if (k === undefined) return undefined;
  const current = { instructions: request.instructions, context: setup.extensionContext };
  if (same(k.system, current) || !same(k.told, current)) return undefined;
  return k.tools === toolsDigest(requestTools(request.tools, setup.extensionTools)) ? k.system : undefined;
}

/** Records what a request sent to the model: its system prompt's parts and tools. */
export function noteSent(db: Db, sid: number, kernel: Kernel, setup: EngineSetup, request: Pick<ClientPrompt, 'instructions'>, prepared: Prepared): void {
  const system = { instructions: prepared.instructions, context: prepared.extensionContext };
  const tools = toolsDigest(prepared.tools);
  const known = kernel.cache.get(KNOWN);
  if (known?.stored !== true || known.tools !== tools || !same(known.system, system)) saveKnownPrompt(db, sid, system, tools);
  kernel.cache.set(KNOWN, { system, tools, told: { instructions: request.instructions, context: setup.extensionContext }, stored: true });
}

/**
 * Appends one notice telling the model of `told`, carrying the instructions when they are news
 * to it, and records it. `standing` is the instructions an earlier notice told that still
 * stand (null: the model goes by its system prompt's). Stored first: a failed append leaves the
 * record as it was, and the next chance retries.
 */
function tell(db: Db, sid: number, kernel: Kernel, known: Known, told: PromptParts, standing: string | null): void {
  const withInstructions = told.instructions !== known.told.instructions;
  appendNotice(db, sid, { notice: 'capabilities_changed', context: told.context, ...(withInstructions ? { instructions: told.instructions } : {}) });
  saveKnownTold(db, sid, { context: told.context, instructions: withInstructions ? told.instructions : standing });
  kernel.cache.set(KNOWN, { ...known, told });
}

/** The instructions a notice told this kernel's model of that its system prompt lacks, or null. */
function standingInstructions(k: Known): string | null {
  return k.told.instructions === k.system.instructions ? null : k.told.instructions;
}

/**
 * A kernel's first look at a session the daemon served before (a restart, or an unload that
 * dropped its memory). The prompt the model last saw (the client's instructions, the extension
 * context, the tools) is compared with the one this request would send:
 *
 * 1. The system prompt that goes out is the one the model has when the tools are the same
 *    (the pin), else the current one: a changed tool set misses the cache anyway.
 * 2. The model goes by that prompt, except where a notice since told it otherwise (a reload
 *    before the restart); such a notice is still in its history, since a compaction would
 *    have rebuilt the prompt and cleared the record.
 * 3. When what the model goes by differs from the current prompt, one notice tells it: a
 *    pinned change, a stale notice a change back made wrong, or a notice the rebuilt prompt
 *    contradicts. Otherwise (nothing changed, or told already) nothing is appended.
 *
 * Instructions recorded before they were kept count as unchanged. Returns whether a notice was
 * appended.
 */
function adoptKnown(kernel: Kernel, db: Db, config: ConfigSnapshot, sid: number, known: KnownPrompt, request: ClientPrompt): boolean {
  const resolution = resolveExtensions(db, config, sid);
  const current = { instructions: request.instructions, context: extensionContext(config, resolution) };
  const tools = toolsDigest(requestTools(request.tools, enabledMemoryTools(config.modules, resolution.enabled).map(toolSpec)));
  const system = { instructions: known.instructions ?? current.instructions, context: known.context };
  const shown = known.toolsHash === tools ? system : current;
  const believed = { instructions: known.told.instructions ?? shown.instructions, context: known.told.context ?? shown.context };
  const k: Known = { system, tools: known.toolsHash, told: believed, stored: known.instructions !== null };
  kernel.cache.set(KNOWN, k);
  if (same(believed, current)) return false;
  tell(db, sid, kernel, k, current, known.told.instructions);
  return true;
}

/**
 * Before a request's head is taken, so that a notice found necessary is part of that request.
 * A kernel that has not sent a request yet adopts what the session row recorded (`adoptKnown`).
 * A live one acts only while a notice about the instructions stands (a restart pinned them):
 * the client sending others now would leave that notice contradicting the prompt, so one more
 * notice tells the model of these, and the pin holds. Without such a notice, changed
 * instructions go out in the system prompt as they are. Returns whether a notice was appended.
 */
export function tellPromptChanges(kernel: Kernel, db: Db, config: ConfigSnapshot, sid: number, request: ClientPrompt): boolean {
  const k = kernel.cache.get(KNOWN);
  if (k === undefined) {
    const known = knownPrompt(db, sid);
    return known !== undefined && adoptKnown(kernel, db, config, sid, known, request);
  }
  const standing = standingInstructions(k);
  if (standing === null || standing === request.instructions) return false;
  tell(db, sid, kernel, k, { instructions: request.instructions, context: k.told.context }, standing);
  return true;
}

/**
 * Records that a notice told the model of `context`; false (nothing recorded) when the kernel
 * has sent no request or the model already knows exactly that.
 */
export function noteTold(kernel: Kernel, context: string): boolean {
  const known = kernel.cache.get(KNOWN);
  if (known === undefined || known.told.context === context) return false;
  kernel.cache.set(KNOWN, { ...known, told: { ...known.told, context } });
  return true;
}

/**
 * After a configuration change: every live session that has sent a request from its kernel and
 * whose extension context now differs from what its model last learned gets one notice with
 * the new context, appended while neither of its lanes runs. Returns how many were told.
 * A session that fails is logged and skipped; the others still get theirs.
 */
export async function tellCapabilities(d: { db: Db; kernels: SessionKernels; log: Logger; config(): ConfigSnapshot }): Promise<number> {
  let told = 0;
  await Promise.all(
    d.kernels.loadedSessions().map((session) =>
      d.kernels
        .run(
          session,
          (kernel) => {
            const s = findSession(d.db, session);
            const known = kernel.cache.get(KNOWN);
            if (known === undefined || s === undefined) return;
            const config = d.config();
            const context = extensionContext(config, resolveExtensions(d.db, config, s.sid));
            if (context === known.told.context) return;
            // Stored first: a failed append leaves the record as it was, and the next reload retries.
            appendNotice(d.db, s.sid, { notice: 'capabilities_changed', context });
            saveKnownTold(d.db, s.sid, { context, instructions: standingInstructions(known) });
            noteTold(kernel, context);
            told += 1;
          },
          'all',
        )
        .catch((err: unknown) => d.log.error({ err, session, method: 'reload' }, 'could not tell the session of its changed capabilities'))
    ),
  );
  return told;
}
