// Commander argument parsers the verbs share (cli/verbs/), apart from the program that loads
// the verbs: a verb module imports these, the program imports the verb modules.
import { InvalidArgumentError } from 'commander';

/** A commander argument parser for counts and offsets. */
export function nonNegativeInt(value: string): number {
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new InvalidArgumentError('expected a whole number');
  return Number(value);
}

export function positiveInt(value: string): number {
  const v = nonNegativeInt(value);
  if (v === 0) throw new InvalidArgumentError('expected a number above 0');
  return v;
}
