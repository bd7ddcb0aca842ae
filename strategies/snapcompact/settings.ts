// snapcompact's section of extensions.json: the window settings (trigger 90% and tail 10% by
// default) plus the frame archive's share of the window and an optional frame cap.
import { z } from 'zod';
import { Percent, TAIL_BELOW_TRIGGER, tailBelowTrigger, windowFields } from '../harness/settings.ts';

export const SnapcompactSettings = z
  .strictObject({
    ...windowFields({ tailPercent: 10 }),
    /** Frames cost no summary, so compacting later is cheap: 90% by default, below 100. */
    triggerPercent: Percent.max(99).default(90),
    /** Share of the window the frame archive may take, at the cost of one full frame each. */
    archivePercent: Percent.default(20),
    /** Frames; replaces the provider image caps when set. */
    maxFrames: z.number().int().positive().optional(),
    /** Left over from when snapcompact had its own switch; accepted and dropped. */
    enabled: z.unknown().optional(),
  })
  .refine(tailBelowTrigger, TAIL_BELOW_TRIGGER)
  .refine((s) => s.tailPercent + s.archivePercent < s.triggerPercent, {
    message: 'tailPercent + archivePercent must be below triggerPercent',
    path: ['archivePercent'],
  })
  .transform(({ enabled: _legacy, ...rest }) => rest);
