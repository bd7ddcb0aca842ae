// rolling's section of extensions.json: the shared window settings, tail 25% by default.
import { windowSection } from '../harness/settings.ts';

export const RollingSettings = windowSection({ tailPercent: 25 });
