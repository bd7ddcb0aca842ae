// lcm's section of extensions.json: the same window names as rolling's. Without a window (here
// or in the catalog) automatic compaction is off and /compact still forces it.
import { windowSection } from '../harness/settings.ts';

export const LcmSettings = windowSection({ tailPercent: 25 });
