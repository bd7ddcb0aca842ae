// rolling: one running summary of everything evicted so far, a short recap of the latest
// evicted user requests, then the verbatim tail. The implementation is running-summary.ts;
// rolling adds its name and its settings section. snapcompact falls back to it, by name, for a
// model that reads no images (its `fallback`, which the engine resolves).
import type { Strategy } from '../contract.ts';
import { runningSummary } from './running-summary.ts';
import { RollingSettings } from './settings.ts';

export { RECAP_HEADER, RECAP_MESSAGES, RECAP_CHARS, SUMMARY_HEADER, summaryCap } from './running-summary.ts';

export const rolling: Strategy = { name: 'rolling', settings: RollingSettings, ...runningSummary };
