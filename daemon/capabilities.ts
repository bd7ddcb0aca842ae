// What the model of each live session last learned about its extensions, and the step a
// reload adds: a session whose extension context changed gets one `capabilities changed`
// notice, and its system prompt stays the one the model already has (so the provider's cached
// prefix survives) until its next compaction rebuilds it. Kept per kernel and, for restarts and
// unloads, in the session row (known_context, known_tools): a kernel that adopts the session
// compares the current prompt with the one the model last saw (`adoptKnown`).
import { createHash } from 'node:crypto';
import type { Db } from '../storage/db.ts';
import { knownPrompt, saveKnownPrompt, saveKnownTold } from '../storage/engine-log.ts';
import { findSession } from '../storage/sessions.ts';
import { appendNotice } from '../storage/transcript.ts';
import { cacheSlot } from '../strategies/harness/kernel-cache.ts';
import type { EngineSetup, Prepared } from '../strategies/prepare.ts';
import type { ConfigSnapshot } from './config.ts';
import { enabledMemoryTools } from '../strategies/extensions/tools.ts';
import { extensionContext, resolveExtensions } from './engine.ts';
import type { Kernel, SessionKernels } from './kernels.ts';
import type { Logger } from './logger.ts';

interface Known {
  /** The extension context the last prepared system prompt carried. */
  system: string;
  /** Names of the extension tools that request carried. */
  tools: string[];
  /** The extension context the model last learned of: `system`, or a later notice's. */
  told: string;
}

const KNOWN = cacheSlot<Known>('capabilities.known');

function toolNames(setup: Pick<EngineSetup, 'extensionTools'>): string[] {
  return setup.extensionTools.map((t) => t.name);
}

/**
 * The extension context this request keeps in its system prompt instead of the current one,
 * or undefined to send the current one. A pin holds only while a notice told the model of
 * exactly what is enabled now and the extension tools are the same: any other change (an
 * /extensions choice since, a different tool set) misses the cache anyway.
 */
export function pinnedContext(kernel: Kernel, setup: EngineSetup): string | undefined {
  const k = kernel.cache.get(KNOWN);
  if (k === undefined || k.told === k.system || k.told !== setup.extensionContext) return undefined;
  const tools = toolNames(setup);
  return tools.length === k.tools.length && tools.every((t, i) => t === k.tools[i]) ? k.system : undefined;
}

function toolsHash(names: readonly string[]): string {
  return createHash('sha256').update(JSON.stringify(names)).digest('hex');
}

/** Records what a request sent to the model: its system prompt's extension context and tools. */
export function noteSent(db: Db, sid: number, kernel: Kernel, setup: EngineSetup, prepared: Prepared): void {
  const tools = toolNames(setup);
  kernel.cache.set(KNOWN, { system: prepared.extensionContext, tools, told: setup.extensionContext });
  saveKnownPrompt(db, sid, prepared.extensionContext, toolsHash(tools));
}

/**
 * A kernel's first look at a session the daemon served before (a restart, or an unload that
 * dropped its memory): the prompt the model last saw is compared with the current one. The
 * same: nothing to do. The extension context changed but the tools did not: the old system
 * prompt stays pinned and one `capabilities changed` notice tells the model, as a reload does,
 * so the provider's cached prefix survives until the next compaction. The tools changed: the
 * cache misses anyway, and the current prompt goes out. Call it before the request's head is
 * taken, so that the notice is part of that request. Returns whether a notice was appended.
 */
export function adoptKnown(kernel: Kernel, db: Db, config: ConfigSnapshot, sid: number): boolean {
  if (kernel.cache.get(KNOWN) !== undefined) return false;
  const known = knownPrompt(db, sid);
  if (known === undefined) return false;
  const resolution = resolveExtensions(db, config, sid);
  const context = extensionContext(resolution);
  const tools = enabledMemoryTools(resolution.enabled).map((t) => t.name);
  if (known.context === context) {
    kernel.cache.set(KNOWN, { system: context, tools, told: context });
    return false;
  }
  if (known.toolsHash !== toolsHash(tools)) return false;
  kernel.cache.set(KNOWN, { system: known.context, tools, told: context });
  // Told already (by a reload, or at an adoption before an unload): the pin holds, no second notice.
  if (known.told === context) return false;
  appendNotice(db, sid, { notice: 'capabilities_changed', context });
  saveKnownTold(db, sid, context);
  return true;
}

/**
 * Records that a notice told the model of `context`; false (nothing recorded) when the kernel
 * has sent no request or the model already knows exactly that.
 */
export function noteTold(kernel: Kernel, context: string): boolean {
  const known = kernel.cache.get(KNOWN);
  if (known === undefined || known.told === context) return false;
  kernel.cache.set(KNOWN, { ...known, told: context });
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
            const context = extensionContext(resolveExtensions(d.db, d.config(), s.sid));
            if (context === known.told) return;
            // Stored first: a failed append leaves the record as it was, and the next reload retries.
            appendNotice(d.db, s.sid, { notice: 'capabilities_changed', context });
            saveKnownTold(d.db, s.sid, context);
            noteTold(kernel, context);
            told += 1;
          },
          'all',
        )
        .catch((err: unknown) => d.log.error({ err, session, method: 'reload' }, 'could not tell the session of its changed capabilities')),
    ),
  );
  return told;
}
