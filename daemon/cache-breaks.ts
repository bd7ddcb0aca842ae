// Which part of a request broke the provider's cached prefix. The daemon builds every request,
// so it knows what changed between two of a session's requests without comparing their bytes:
// the system prompt and tools are compared as strings, and everything else that can change the
// history part is an event the engine reports (a compaction, a notes rewrite, rows rewritten
// in place, a model or provider switch). A usage report whose cached tokens fall far below the
// prefix that stayed identical is the provider's own doing (expiry, eviction). The last few
// breaks are kept per kernel and shown in /context.
import { createHash } from 'node:crypto';
import type { CacheBreak, Observation, PlainInput, ToolSpec } from '../protocol/prepared.ts';
import type { Db } from '../storage/db.ts';
import { sessionRewrites } from '../storage/transcript/user-rows.ts';
import { cacheSlot } from '../strategies/harness/kernel-cache.ts';
import type { Kernel } from './kernels.ts';
import { TextKeyedMap } from './text-keyed-map.ts';

/** Breaks kept per session. */
export const KEPT_BREAKS = 8;
/** A usage report whose cached tokens are below this share of the identical prefix is a break. */
export const PROVIDER_MISS_SHARE = 0.5;

/**
 * The last request of a session, its long texts as digests: the breaks only ask whether they
 * changed, and a copy of the instructions, tools and notes of every loaded session would be tens
 * of kilobytes a kernel held for that one comparison.
 */
interface Last {
  preparedId: string;
  instructions: string;
  context: string;
  tools: string;
  model: string | null;
  provider: string | undefined;
  rewrites: number;
  notes: string | undefined;
  /** Estimated tokens of this request that stayed byte-identical from the one before. */
  kept: number;
  estimate: number;
}

const LAST = cacheSlot<Last>('cache.last');
const BREAKS = cacheSlot<CacheBreak[]>('cache.breaks');

/** The text of the notes input, when the request starts with one (the notes layer's header). */
function notesText(inputs: readonly PlainInput[], observation: Observation): string | undefined {
  if (!observation.sections.some((s) => s.name === 'notes')) return undefined;
  const first = inputs[0]?.content[0];
  return first?.type === 'text' ? first.text : undefined;
}

/**
 * Recent digests by text. An agent sends the same instructions and tools on every turn, as new
 * strings: finding the digest by content (text-keyed-map.ts) costs a fraction of computing it.
 * Bounded in entries; the texts it keys on are a session's prompt, tens of kilobytes each.
 */
const DIGESTS_KEPT = 16;
const digests = new TextKeyedMap<string>();

/** A digest of `text` (sha256, base64url), found again without hashing while it stays recent. */
export function digest(text: string): string {
  let d = digests.get(text);
  if (d !== undefined) return d;
  d = createHash('sha256').update(text).digest('base64url');
  digests.set(text, d);
  if (digests.size > DIGESTS_KEPT) digests.shift();
  return d;
}

const toolDigests = new WeakMap<readonly ToolSpec[], string>();

/**
 * A digest of a request's tools, kept by the list: a session's requests share one list while
 * their tools stay the same (strategies/prepare.ts), so the schemas are serialized and hashed
 * once, not on every turn.
 */
export function toolsDigest(tools: readonly ToolSpec[]): string {
  let d = toolDigests.get(tools);
  if (d === undefined) toolDigests.set(tools, d = digest(JSON.stringify(tools)));
  return d;
}

function push(kernel: Kernel, b: CacheBreak): void {
  const list = kernel.cache.getOrSet(BREAKS, () => []);
  list.push(b);
  if (list.length > KEPT_BREAKS) list.splice(0, list.length - KEPT_BREAKS);
}

/**
 * Records a prepared request and, when it cannot share the cached prefix of the one before,
 * why. Returns the session's breaks so far, for the request's observation.
 */
export function notePrefix(
  kernel: Kernel,
  db: Db,
  sid: number,
  req: { preparedId: string; instructions: string; context: string; tools: readonly ToolSpec[]; model: string | null; provider: string | undefined; inputs: readonly PlainInput[]; compacted: boolean; observation: Observation },
  now = Date.now(),
): CacheBreak[] {
  const last = kernel.cache.get(LAST);
  const instructions = digest(req.instructions);
  const context = digest(req.context);
  const tools = toolsDigest(req.tools);
  const notesFull = notesText(req.inputs, req.observation);
  const notes = notesFull === undefined ? undefined : digest(notesFull);
  const rewrites = sessionRewrites(db, sid);
  const pinned = req.observation.sections.find((s) => s.name === 'system')?.estimated_tokens ?? 0;
  let kept = req.observation.estimated_input_tokens;
  if (last !== undefined) {
    const found: Array<Omit<CacheBreak, 'at'>> = [];
    if (last.model !== req.model) found.push({ part: 'model', detail: `model switch from ${last.model ?? 'none'} to ${req.model ?? 'none'}` });
    else if (last.provider !== req.provider) found.push({ part: 'model', detail: `provider switch from ${last.provider ?? 'unknown'} to ${req.provider ?? 'unknown'}` });
    if (last.instructions !== instructions) found.push({ part: 'system', detail: "the client's instructions changed" });
    if (last.context !== context) found.push({ part: 'system', detail: 'the extension context in the system prompt changed' });
    if (last.tools !== tools) found.push({ part: 'tools', detail: 'the tool schemas changed' });
    if (req.compacted) {
      const c = req.observation.last_compaction;
      found.push({ part: 'compaction', detail: `${c?.strategy ?? req.observation.strategy ?? 'the strategy'} compacted the history (~${c?.tokens_before ?? '?'} -> ~${c?.tokens_after ?? '?'} tokens)` });
    }
    if (!req.compacted && last.notes !== notes) found.push({ part: 'notes', detail: 'the session notes were rewritten' });
    if (!req.compacted && last.rewrites !== rewrites) found.push({ part: 'history', detail: 'rows already sent were rewritten in place (a late tool result settled beside its call)' });
    for (const b of found) push(kernel, { at: now, ...b });
    // What stayed: nothing after a system or tools change, the pinned prompt after a history change.
    if (found.some((b) => b.part === 'system' || b.part === 'tools' || b.part === 'model')) kept = 0;
    else if (found.length > 0) kept = pinned;
    else kept = Math.min(last.estimate, req.observation.estimated_input_tokens);
  } else {
    kept = 0;
  }
  kernel.cache.set(LAST, { preparedId: req.preparedId, instructions, context, tools, model: req.model, provider: req.provider, rewrites, notes, kept, estimate: req.observation.estimated_input_tokens });
  return [...(kernel.cache.get(BREAKS) ?? [])];
}

/** The latest request got another prepared id than the one notePrefix was given (see the prepare handler). */
export function renameLastPrepared(kernel: Kernel, preparedId: string): void {
  const last = kernel.cache.get(LAST);
  if (last !== undefined) last.preparedId = preparedId;
}

/**
 * A usage report for the latest request: cached tokens far below the prefix the daemon kept
 * identical (calibrated by the session's ratio) mean the provider dropped its cache.
 */
export function noteUsage(kernel: Kernel, preparedId: string, cachedTokens: number | null, ratio: number, now = Date.now()): void {
  const last = kernel.cache.get(LAST);
  if (last === undefined || last.preparedId !== preparedId || cachedTokens === null || last.kept === 0) return;
  const expected = Math.round(last.kept * ratio);
  if (cachedTokens < expected * PROVIDER_MISS_SHARE) {
    push(kernel, { at: now, part: 'provider', detail: `the provider reported ${cachedTokens} cached tokens where ~${expected} were unchanged since the request before (its cache expired or was evicted)` });
  }
}

/** A compaction outside a prepare (/compact): the next request cannot share the history's prefix. */
export function noteCompaction(kernel: Kernel, observation: Observation, now = Date.now()): void {
  const c = observation.last_compaction;
  push(kernel, { at: now, part: 'compaction', detail: `/compact: ${c?.strategy ?? observation.strategy ?? 'the strategy'} compacted the history (~${c?.tokens_before ?? '?'} -> ~${c?.tokens_after ?? '?'} tokens)` });
}

/** The session's breaks so far (for /context). */
export function cacheBreaks(kernel: Kernel): CacheBreak[] {
  return [...(kernel.cache.get(BREAKS) ?? [])];
}
