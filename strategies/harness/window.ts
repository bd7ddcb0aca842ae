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
}

export interface WindowInfo {
  /** Tokens; null when neither the settings nor the catalog know it. */
  window: number | null;
  source: 'config' | 'catalog' | 'unknown';
  triggerPercent: number;
  tailPercent: number;
}

export function resolveWindow(settings: WindowSettings, model: ModelEntry | undefined): WindowInfo {
  const base = { triggerPercent: settings.triggerPercent, tailPercent: settings.tailPercent };
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
  if (pinnedTokens * 100 >= info.window * info.triggerPercent) {
    problems.push(
      `the system prompt and tools alone (~${pinnedTokens} tokens) reach the trigger of a ${info.window}-token window`,
    );
  }
  return problems;
}

/** Tokens of tail to keep: tailPercent of the window, or of `min(window, size)` when forced. */
export function tailBudget(info: WindowInfo, historyTokens: number, forced: boolean): number {
  const basis = info.window === null ? historyTokens : forced ? Math.min(info.window, historyTokens) : info.window;
  return Math.floor((basis * info.tailPercent) / 100);
}
