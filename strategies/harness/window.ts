// Which context window a strategy works against, where that number came from, and whether
// the settings make sense for it. Shared by every strategy; none keeps its own copy.
import type { ModelEntry } from '../catalog/models.ts';

export interface WindowSettings {
  /** Explicit window in tokens; wins over the catalog. */
  contextWindowTokens?: number | undefined;
  /** Compact when the estimate reaches this share of the window, in percent. */
  triggerPercent: number;
  /** Keep about this share of the window verbatim, in percent. */
  tailPercent: number;
  /**
   * A tool output or user paste estimated above this many tokens is sent as head and tail;
   * default a tenth of the window.
   */
  maxToolOutputTokens?: number | undefined;
}

export interface WindowInfo {
  /** Tokens; null when neither the settings nor the catalog know it. */
  window: number | null;
  source: 'config' | 'catalog' | 'unknown';
  triggerPercent: number;
  tailPercent: number;
  /**
   * Provider-measured tokens per estimated token for this session and model (1 until the first
   * usage report). Every comparison against the window goes through `calibrated`.
   */
  ratio: number;
  /**
   * Estimated tokens the layers may add to any request (the notes at their cap). Triggers never
   * count them; fitting a request under the whole window does (`roomUnderWindow`).
   */
  reserved?: number;
}

/** Share of the window a single tool output may take before it is sent as head and tail. */
export const TOOL_OUTPUT_SHARE_PERCENT = 10;

export function resolveWindow(settings: WindowSettings, model: ModelEntry | undefined, ratio = 1): WindowInfo {
  const base = { triggerPercent: settings.triggerPercent, tailPercent: settings.tailPercent, ratio };
  if (settings.contextWindowTokens !== undefined) return { ...base, window: settings.contextWindowTokens, source: 'config' };
  if (model !== undefined) return { ...base, window: model.context_window, source: 'catalog' };
  return { ...base, window: null, source: 'unknown' };
}

/**
 * Problems that make automatic compaction useless or impossible, as readable sentences for
 * `/context`. An empty list means the window is usable.
 */
export function validateWindow(info: WindowInfo, pinnedTokens: number): string[] {
  const problems: string[] = [];
  if (info.window === null) {
    problems.push('context window unknown: set contextWindowTokens or use a catalogued model; automatic compaction is off');
    return problems;
  }
  if (info.tailPercent >= info.triggerPercent) {
    problems.push(
      `tailPercent (${info.tailPercent}) is not below triggerPercent (${info.triggerPercent}): a compaction could not bring the request under the trigger`,
    );
  }
  if (calibrated(pinnedTokens, info) * 100 >= info.window * info.triggerPercent) {
    problems.push(
      `the system prompt and tools alone (~${pinnedTokens} tokens) reach the trigger of a ${info.window}-token window`,
    );
  }
  return problems;
}

/** An estimate in the provider's measure: estimate × ratio, rounded up. */
export function calibrated(estimate: number, info: WindowInfo): number {
  return Math.ceil(estimate * info.ratio);
}

/** The request reached the trigger of a known window, measured as the provider would. */
export function isDue(estimate: number, info: WindowInfo): boolean {
  return info.window !== null && calibrated(estimate, info) * 100 >= info.window * info.triggerPercent;
}

/** The request is over the whole window, measured as the provider would. */
export function overWindow(estimate: number, info: WindowInfo): boolean {
  return info.window !== null && calibrated(estimate, info) > info.window;
}

/**
 * Tokens of tail to keep, in estimated tokens: tailPercent of the window (of `min(window, size)`
 * when forced), converted from the provider's measure by the ratio.
 */
export function tailBudget(info: WindowInfo, historyTokens: number, forced: boolean): number {
  const window = info.window === null ? null : Math.floor(info.window / info.ratio);
  const basis = window === null ? historyTokens : forced ? Math.min(window, historyTokens) : window;
  return Math.floor((basis * info.tailPercent) / 100);
}

/**
 * Estimated tokens left under the trigger once `fixed` tokens (pinned prompt, summary, recap)
 * are paid; null for an unknown window.
 */
export function roomUnderTrigger(info: WindowInfo, fixed: number): number | null {
  if (info.window === null) return null;
  return Math.floor((info.window * info.triggerPercent) / 100 / info.ratio) - fixed;
}

/** Estimated tokens left under the whole window once `fixed` tokens and the layers' reserve are paid; null when unknown. */
export function roomUnderWindow(info: WindowInfo, fixed: number): number | null {
  if (info.window === null) return null;
  return Math.floor(info.window / info.ratio) - fixed - (info.reserved ?? 0);
}

/**
 * The output cap every projection applies: the configured size, else a tenth of the window,
 * else none. Uses the raw window, not the ratio, so the bytes of a capped row never change
 * while the ratio is learned (the prompt cache keeps its prefix).
 */
export function toolOutputCap(settings: WindowSettings, info: WindowInfo): number | null {
  if (settings.maxToolOutputTokens !== undefined) return settings.maxToolOutputTokens;
  return info.window === null ? null : Math.floor((info.window * TOOL_OUTPUT_SHARE_PERCENT) / 100);
}
