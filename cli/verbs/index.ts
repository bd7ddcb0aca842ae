// The verb modules, in the order `albedo --help` lists them. A feature with daemon methods of
// its own adds one module here: lcm (list | describe | expand), snapcompact's frames
// (frames <session> --out DIR) and render (render <file> --out DIR) each become a file beside
// these once their methods are in protocol/methods.ts, using `run` and the Output helpers.
import type { VerbModule } from '../program.ts';
import { compactionVerbs } from './compaction.ts';
import { daemonVerbs } from './daemon.ts';
import { transferVerbs } from './transfer.ts';
import { transcriptVerbs } from './transcripts.ts';

export const verbModules: readonly VerbModule[] = [daemonVerbs, transcriptVerbs, compactionVerbs, transferVerbs];
