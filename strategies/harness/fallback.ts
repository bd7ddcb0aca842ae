// A strategy with a `fallback` (strategies/contract.ts) as the engine runs it: each call asks
// the strategy's `when` first and, given a reason, goes to the strategy it names instead, with
// the reason in the projection's notes. Built once per build from the strategies' table
// (strategies/index.ts), so no strategy imports the one it falls back to.
import type { Strategy } from '../contract.ts';

/** `primary` with its fallback resolved against `byName`; `primary` itself when it has none. */
export function withFallback(primary: Strategy, byName: Readonly<Record<string, Strategy>>): Strategy {
  const spec = primary.fallback;
  if (spec === undefined) return primary;
  const other = byName[spec.strategy];
  if (other === undefined) throw new Error(`strategy "${primary.name}" falls back to "${spec.strategy}", which this build does not have`);
  if (other.fallback !== undefined) throw new Error(`strategy "${primary.name}" falls back to "${spec.strategy}", which has a fallback of its own`);
  const when = (input: Parameters<typeof spec.when>[0]): string | null => spec.when(input);
  const wrapped: Strategy = {
    ...primary,
    project(input) {
      const why = when(input);
      if (why === null) return primary.project(input);
      const p = other.project(input);
      return { ...p, notes: [why, ...p.notes] };
    },
    compact: (input, projection, opts) => (when(input) === null ? primary : other).compact(input, projection, opts),
  };
  // The optional hooks only where one of the two has them: the engine skips a strategy without.
  if (primary.warm !== undefined || other.warm !== undefined) wrapped.warm = (input) => (when(input) === null ? primary : other).warm?.(input);
  else delete wrapped.warm;
  // Stages need the tail's start from whichever of the two runs; without it from both, no stages.
  if (primary.tailFrom !== undefined && other.tailFrom !== undefined) {
    const [mine, theirs] = [primary.tailFrom.bind(primary), other.tailFrom.bind(other)];
    wrapped.tailFrom = (input) => (when(input) === null ? mine : theirs)(input);
  } else delete wrapped.tailFrom;
  if (primary.adopt !== undefined || other.adopt !== undefined) {
    // The state the fallback keeps may need its one-time upkeep whichever of the two runs next.
    wrapped.adopt = (input) => {
      primary.adopt?.(input);
      other.adopt?.(input);
    };
  } else delete wrapped.adopt;
  if (primary.plan !== undefined && other.plan !== undefined) {
    const [mine, theirs] = [primary.plan.bind(primary), other.plan.bind(other)];
    wrapped.plan = (input, projection, forced) => (when(input) === null ? mine : theirs)(input, projection, forced);
  } else delete wrapped.plan;
  return wrapped;
}
