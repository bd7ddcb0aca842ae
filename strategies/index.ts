// The strategies this build implements, by extension name. The engine looks the session's
// resolved strategy up here; an extension without an entry cannot be the active strategy.
import type { Strategy } from './contract.ts';
import { rolling } from './rolling/rolling.ts';

export const STRATEGIES: Readonly<Record<string, Strategy>> = { rolling };
