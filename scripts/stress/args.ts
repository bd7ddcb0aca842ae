// Command-line flags of `npm run stress`: --only, --quick, --ci, --seed, --json, --tmp. Unknown
// flags are errors. The counts each part runs with are chosen in the parts from the scale.
import os from 'node:os';
import { eachFlag, namesFrom } from '../flags.ts';
import type { Scale } from './scale.ts';

export const PARTS = ['crash', 'fuzz', 'load', 'slow-reader', 'half-close', 'startup', 'summarizer'] as const;
export type Part = (typeof PARTS)[number];

export interface StressArgs {
  /** --quick: small counts; --ci: the smallest, for the run inside `npm test`; else full. */
  scale: Scale;
  only: Part[];
  /** Seed of every PRNG of the run; printed so a run can be repeated. */
  seed: number;
  json: string;
  tmp: string;
}

const USAGE = `usage: npm run stress -- [--quick | --ci] [--only ${PARTS.join(',')}] [--seed N] [--json out.json] [--tmp DIR]`;

export function parseArgs(argv: readonly string[]): StressArgs {
  let scale: Scale = 'full';
  let only: Part[] = [...PARTS];
  let seed = Math.floor(Math.random() * 2 ** 31);
  let json = '.bench/stress.json';
  let tmp = os.tmpdir();
  for (const { name, raw, value } of eachFlag(argv, USAGE)) {
    switch (name) {
      case '--quick':
        scale = 'quick';
        break;
      case '--ci':
        scale = 'ci';
        break;
      case '--only': {
        const names = namesFrom(value(), PARTS, 'part');
        only = PARTS.filter((p) => names.includes(p));
        break;
      }
      case '--seed': {
        const n = Number(value());
        if (!Number.isSafeInteger(n) || n < 0) throw new Error(`--seed takes a non-negative integer\n${USAGE}`);
        seed = n;
        break;
      }
      case '--json':
        json = value();
        break;
      case '--tmp':
        tmp = value();
        break;
      case '--help':
      case '-h':
        console.log(USAGE);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown flag "${raw}"\n${USAGE}`);
    }
  }
  return { scale, only, seed, json, tmp };
}
