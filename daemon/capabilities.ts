// What the model of each live session last learned about its extensions, and the step a
// reload adds: a session whose extension context changed gets one `capabilities changed`
// notice, and its system prompt stays the one the model already has (so the provider's cached
// prefix survives) until its next compaction rebuilds it. Kept per kernel: a restart or an
// unload forgets it, and the next request then sends the current prompt.
import type { Db } from '../storage/db.ts';
import { findSession } from '../storage/sessions.ts';
import { appendNotice } from '../storage/transcript.ts';
import { cacheSlot } from '../strategies/harness/kernel-cache.ts';
import type { EngineSetup, Prepared } from '../strategies/prepare.ts';
import type { ConfigSnapshot } from './config.ts';
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

/** Records what a request sent to the model: its system prompt's extension context and tools. */
export function noteSent(kernel: Kernel, setup: EngineSetup, prepared: Prepared): void {
  kernel.cache.set(KNOWN, { system: prepared.extensionContext, tools: toolNames(setup), told: setup.extensionContext });
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
