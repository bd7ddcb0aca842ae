// rolling: one running summary of everything evicted so far, a short recap of the latest
// evicted user requests, then the verbatim tail. The implementation is the harness's running
// summary (strategies/harness/running-summary.ts), which snapcompact also falls back to for a
// model that reads no images; rolling adds its name and its settings section.
import type { Strategy } from '../contract.ts';
import { runningSummary } from '../harness/running-summary.ts';
import { RollingSettings } from './settings.ts';

export { RECAP_HEADER, RECAP_MESSAGES, RECAP_CHARS, SUMMARY_HEADER, summaryCap } from '../harness/running-summary.ts';

export const rolling: Strategy = { name: 'rolling', settings: RollingSettings, ...runningSummary };
