// The settings every strategy shares, as a zod schema each strategy extends for its own section
// of extensions.json: the window, the trigger, the tail and the output cap. Percentages are of
// the context window (tokens). What the numbers mean at run time is window.ts.
import { z } from 'zod';

export const Percent = z.number().int().min(1).max(100);

/** The fields of a window section, with the tail default a strategy picks. */
export function windowFields(defaults: { tailPercent: number }) {
  return {
    /** Tokens; without it the catalog's window for the current model is used. */
    contextWindowTokens: z.number().int().positive().optional(),
    /** Compact when the request (as the provider counts it) reaches this share of the window. */
    triggerPercent: Percent.default(80),
    /** Share of the window the verbatim tail keeps. */
    tailPercent: Percent.default(defaults.tailPercent),
    /** Tokens; a larger tool output goes into requests as head and tail (default: 10% of the window). */
    maxToolOutputTokens: z.number().int().min(64).optional(),
  };
}

/** The check every window section makes: a tail at or above the trigger could never settle. */
export function tailBelowTrigger(s: { triggerPercent: number; tailPercent: number }): boolean {
  return s.tailPercent < s.triggerPercent;
}
export const TAIL_BELOW_TRIGGER = { message: 'tailPercent must be below triggerPercent', path: ['tailPercent'] };

/** A window section with nothing of its own (rolling, lcm). Unknown keys are errors. */
export function windowSection(defaults: { tailPercent: number }) {
  return z.strictObject(windowFields(defaults)).refine(tailBelowTrigger, TAIL_BELOW_TRIGGER);
}
