// How big a stress run is: `full` by hand (the figures in docs/reliability.md), `quick` for a
// look in about a minute, `ci` for the run inside `npm test` (test/scripts/stress.test.ts).
// Each part picks its counts with byScale; what the counts are is the part's business.
export const SCALES = ['full', 'quick', 'ci'] as const;
export type Scale = (typeof SCALES)[number];

export function byScale<T>(scale: Scale, full: T, quick: T, ci: T): T {
  return scale === 'full' ? full : scale === 'quick' ? quick : ci;
}
