// lcm's section of extensions.json: the same names as rolling's (the strategy itself is not in
// this build yet; its settings are validated so a file written for it is checked today).
import { windowSection } from '../harness/settings.ts';

export const LcmSettings = windowSection({ tailPercent: 25 });
