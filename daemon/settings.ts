// Process limits and switches from the environment (ALBEDO_MAX_LINE_BYTES, ALBEDO_MAX_IMAGE_BYTES,
// ALBEDO_SHUTDOWN_GRACE_MS, ALBEDO_CONFIG_WATCH, ALBEDO_SEARCH_INDEXER, ALBEDO_LEAN_HEAP, the
// proxy's ALBEDO_PROXY_PORT and ALBEDO_ANTHROPIC_UPSTREAM, and
// ALBEDO_FAULT for recovery tests), parsed with zod so a typo stops the start instead of being
// ignored.
import { z } from 'zod';
import type { DaemonSettings } from './context.ts';
import { StartupError } from './home.ts';

const PositiveInt = z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER);

const EnvSettings = z.object({
  ALBEDO_MAX_LINE_BYTES: PositiveInt.optional(),
  ALBEDO_MAX_IMAGE_BYTES: PositiveInt.optional(),
  ALBEDO_SHUTDOWN_GRACE_MS: PositiveInt.optional(),
  /** `off`: the configuration files are read at start, /reload and SIGHUP only. */
  ALBEDO_CONFIG_WATCH: z.enum(['on', 'off']).optional(),
  ALBEDO_SEARCH_INDEXER: z.enum(['on', 'off']).optional(),
  /** `off`: V8 keeps its default heap sizing (faster collections, a larger resident set). */
  ALBEDO_LEAN_HEAP: z.enum(['on', 'off']).optional(),
  /** Recovery tests only: a crash to stage (see DaemonSettings.fault). */
  ALBEDO_FAULT: z.enum(['kill-before-elision', 'proxy-prepare-fails', 'proxy-store-held']).optional(),
  /** The proxy's port on 127.0.0.1: a number (0 picks a free one) or `off`; wins over extensions.json. */
  ALBEDO_PROXY_PORT: z.union([z.literal('off'), z.coerce.number().int().min(0).max(65535)]).optional(),
  /** Where the proxy forwards Anthropic Messages requests; wins over extensions.json. */
  ALBEDO_ANTHROPIC_UPSTREAM: z.url().optional(),
  /** Where the proxy forwards OpenAI Responses and Chat Completions requests; wins over extensions.json. */
  ALBEDO_OPENAI_UPSTREAM: z.url().optional(),
});

export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): Partial<DaemonSettings> {
  const parsed = EnvSettings.safeParse(env);
  if (!parsed.success) {
    throw new StartupError(`invalid environment: ${z.prettifyError(parsed.error).replaceAll('\n', '; ')}`);
  }
  const e = parsed.data;
  const out: Partial<DaemonSettings> = {};
  if (e.ALBEDO_MAX_LINE_BYTES !== undefined) out.maxLineBytes = e.ALBEDO_MAX_LINE_BYTES;
  if (e.ALBEDO_MAX_IMAGE_BYTES !== undefined) out.maxImageBytes = e.ALBEDO_MAX_IMAGE_BYTES;
  if (e.ALBEDO_SHUTDOWN_GRACE_MS !== undefined) out.shutdownGraceMs = e.ALBEDO_SHUTDOWN_GRACE_MS;
  if (e.ALBEDO_CONFIG_WATCH !== undefined) out.watchConfig = e.ALBEDO_CONFIG_WATCH === 'on';
  if (e.ALBEDO_SEARCH_INDEXER !== undefined) out.searchIndexer = e.ALBEDO_SEARCH_INDEXER === 'on';
  if (e.ALBEDO_LEAN_HEAP !== undefined) out.leanHeap = e.ALBEDO_LEAN_HEAP === 'on';
  if (e.ALBEDO_FAULT !== undefined) out.fault = e.ALBEDO_FAULT;
  if (e.ALBEDO_PROXY_PORT !== undefined) out.proxyPort = e.ALBEDO_PROXY_PORT;
  if (e.ALBEDO_ANTHROPIC_UPSTREAM !== undefined) out.anthropicUpstream = e.ALBEDO_ANTHROPIC_UPSTREAM;
  if (e.ALBEDO_OPENAI_UPSTREAM !== undefined) out.openaiUpstream = e.ALBEDO_OPENAI_UPSTREAM;
  return out;
}
