// The verb modules, in the order `albedo --help` lists them. A feature with daemon methods of
// its own adds one module here, using `run` and the Output helpers.
import type { VerbModule } from '../program.ts';
import { compactionVerbs } from './compaction.ts';
import { daemonVerbs } from './daemon.ts';
import { frameVerbs } from './frames.ts';
import { lcmVerbs } from './lcm.ts';
import { toolVerbs } from './tools.ts';
import { mcpVerbs } from './mcp.ts';
import { proxyVerbs } from './proxy.ts';
import { transferVerbs } from './transfer.ts';
import { transcriptVerbs } from './transcripts.ts';

export const verbModules: readonly VerbModule[] = [daemonVerbs, transcriptVerbs, compactionVerbs, lcmVerbs, toolVerbs, frameVerbs, transferVerbs, proxyVerbs, mcpVerbs];
