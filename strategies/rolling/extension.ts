// The rolling extension: the strategy, its settings section and its line in `albedo extensions`.
import type { ExtensionModule } from '../extensions/module.ts';
import { rolling } from './rolling.ts';

export const rollingExtension = {
  name: 'rolling',
  kind: 'strategy',
  defaultEnabled: true,
  requires: [],
  description: 'one running summary of evicted history, a short recap of recent user messages, then the verbatim tail',
  settings: rolling.settings,
  strategy: rolling,
  tables: ['rolling_state'],
} as const satisfies ExtensionModule;
