// Command-line flags of `npm run bench`: --quick, --sizes, --only, --json, the lcm section's
// --lcm-rows / --lcm-small-rows / --lcm-nodes, plus --fixtures and --tmp to point at another
// corpus folder or scratch directory. Unknown flags are errors.
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILTIN_SET } from '../../strategies/index.ts';
import { eachFlag, namesFrom } from '../flags.ts';

/** The shared fixtures folder next to the repository (`../shared/fixtures`), read when present. */
export const DEFAULT_FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../shared/fixtures');

export const SECTIONS = ['append', 'read', 'grep', 'prepare', 'compact', 'memory', 'replay', 'lcm', 'frames', 'images', 'startup', 'proxy', 'fairness', 'import'] as const;
export type Section = (typeof SECTIONS)[number];

export interface BenchArgs {
  quick: boolean;
  sizes: number[];
  only: Set<Section>;
  json: string;
  fixtures: string;
  tmp: string;
  /** Timed prepares per size (after warm-up). */
  prepareRuns: number;
  /** A transcript_read run longer than this is stopped and extrapolated (ms). */
  readBudgetMs: number;
  /** Strategies the replay section runs each transcript under. */
  strategies: string[];
  /** lcm section: main-session rows of the large and the small dataset, and nodes in each tree. */
  lcm: { rows: number; smallRows: number; nodes: number };
}

/** Strategies the replay section knows how to configure. */
export const REPLAY_STRATEGIES: readonly string[] = BUILTIN_SET.defs.filter((d) => d.kind === 'strategy').map((d) => d.name);

export const DEFAULT_SIZES = [10_000, 100_000, 1_000_000];
export const QUICK_SIZES = [2_000, 20_000];
export const DEFAULT_LCM = { rows: 1_000_000, smallRows: 10_000, nodes: 10_000 };
export const QUICK_LCM = { rows: 20_000, smallRows: 2_000, nodes: 1_000 };

const USAGE = `usage: npm run bench -- [--quick] [--sizes 10000,100000,1000000] [--only append,read,grep,prepare,compact,memory,replay,lcm,frames,images,startup,proxy,fairness,import]
                        [--lcm-rows 1M] [--lcm-small-rows 10k] [--lcm-nodes 10k]
                        [--json out.json] [--fixtures DIR] [--tmp DIR] [--strategies rolling,lcm,snapcompact]`;

function parseSize(s: string): number {
  const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(s.trim());
  if (m === null) throw new Error(`bad size "${s}"\n${USAGE}`);
  const mult = m[2] === '' ? 1 : m[2]!.toLowerCase() === 'k' ? 1e3 : 1e6;
  const n = Math.round(Number(m[1]) * mult);
  if (n < 100) throw new Error(`size ${n} is too small (at least 100 rows)`);
  return n;
}

export function parseArgs(argv: readonly string[]): BenchArgs {
  let quick = false;
  let sizes: number[] | undefined;
  let only: Set<Section> | undefined;
  let json = '.bench/results.json';
  let fixtures = DEFAULT_FIXTURES;
  let tmp = os.tmpdir();
  let strategies: string[] = [...REPLAY_STRATEGIES];
  const lcm: Partial<BenchArgs['lcm']> = {};
  for (const { name, raw, value } of eachFlag(argv, USAGE)) {
    switch (name) {
      case '--quick':
        quick = true;
        break;
      case '--sizes':
        sizes = value().split(',').filter((s) => s !== '').map(parseSize);
        break;
      case '--only':
        only = new Set(namesFrom(value(), SECTIONS, 'section'));
        break;
      case '--json':
        json = value();
        break;
      case '--fixtures':
        fixtures = value();
        break;
      case '--tmp':
        tmp = value();
        break;
      case '--strategies':
        strategies = namesFrom(value(), REPLAY_STRATEGIES, 'strategy');
        break;
      case '--lcm-rows':
        lcm.rows = parseSize(value());
        break;
      case '--lcm-small-rows':
        lcm.smallRows = parseSize(value());
        break;
      case '--lcm-nodes':
        lcm.nodes = parseSize(value());
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
  return {
    quick,
    sizes: [...new Set(sizes ?? (quick ? QUICK_SIZES : DEFAULT_SIZES))].sort((a, b) => a - b),
    only: only ?? new Set(SECTIONS),
    json,
    fixtures,
    tmp,
    prepareRuns: quick ? 15 : 41,
    readBudgetMs: quick ? 1_000 : 30_000,
    strategies,
    lcm: { ...(quick ? QUICK_LCM : DEFAULT_LCM), ...lcm },
  };
}
