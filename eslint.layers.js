// The layer map, checked by `npm run lint` (eslint.config.js adds these blocks). The house runs
// one way: protocol and render at the bottom, then storage, strategies, daemon; the CLI is a
// client and reaches only protocol and render (and its own importers); scripts and tests may
// reach anything. A strategy's folder never imports another's: what two strategies share
// lives in strategies/harness/. Type-only imports count too: a type from a higher layer ties
// the lower one to it all the same.

/** Folders and what each may not import, by the top-level room (or strategy folder) the path names. */
const LAYERS = [
  { files: 'protocol', forbidden: ['storage', 'strategies', 'render', 'daemon', 'cli', 'scripts', 'test'] },
  { files: 'render', forbidden: ['storage', 'strategies', 'daemon', 'cli', 'scripts', 'test'] },
  { files: 'storage', forbidden: ['strategies', 'daemon', 'cli', 'scripts', 'test'] },
  { files: 'strategies', forbidden: ['daemon', 'cli', 'scripts', 'test'] },
  { files: 'daemon', forbidden: ['cli', 'scripts', 'test'] },
  { files: 'cli', forbidden: ['storage', 'strategies', 'daemon', 'scripts', 'test'] },
];

/** The strategies, each a folder that imports no other one. */
const STRATEGIES = ['rolling', 'lcm', 'snapcompact', 'notes'];

/** An import path naming one of `rooms` as a folder, at any depth of `../`. */
function naming(rooms) {
  return `^(\\.\\./)+(${rooms.join('|')})/`;
}

export const layerRules = [
  ...LAYERS.map(({ files, forbidden }) => ({
    files: [`${files}/**/*.ts`],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: naming(forbidden), message: `${files}/ sits below these rooms and may not import them (eslint.layers.js)` }] }],
    },
  })),
  ...STRATEGIES.map((name) => ({
    files: [`strategies/${name}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: naming(['daemon', 'cli', 'scripts', 'test']), message: 'strategies/ sits below these rooms and may not import them (eslint.layers.js)' },
            { regex: `^\\.\\./(${STRATEGIES.filter((s) => s !== name).join('|')})/`, message: 'a strategy imports no other strategy; what two share goes into strategies/harness/ (eslint.layers.js)' },
          ],
        },
      ],
    },
  })),
];
