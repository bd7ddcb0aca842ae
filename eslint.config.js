// ESLint flat config: typescript-eslint's type-checked recommendations over the TypeScript
// sources, tuned to the house rules (no floating promises, no `any`); the layer map
// (eslint.layers.js); the plain-JS entry shims linted without type information. `npm run lint`
// allows no warnings, and also checks that no import cycle runs between modules
// (scripts/lint/import-cycles.ts).
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';
import { layerRules } from './eslint.layers.js';

export default defineConfig(
  globalIgnores(['node_modules/', 'dist/', '.bench/']),
  {
    files: ['{protocol,storage,strategies,render,daemon,cli,scripts,test}/**/*.ts'],
    extends: [js.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: true,
        // import.meta.dirname needs Node 20.11; the engines field allows 20.9.
        tsconfigRootDir: dirname(fileURLToPath(import.meta.url)),
      },
    },
    rules: {
      // `void p` marks a promise deliberately left running (its outcome is handled in its own
      // .then/.catch); node:test's test() and describe() return promises the runner awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          ignoreVoid: true,
          allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite'] }],
        },
      ],
      // Unused on purpose: `_`-prefixed names (omitted rest siblings, ignored loop values, parameters).
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
        },
      ],
      // Numbers and nullish values read fine in messages ("exited with null"); any, booleans and
      // regexps are spelled out.
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowNullish: true, allowAny: false, allowBoolean: false, allowRegExp: false, allowNever: false },
      ],
      // Passing on a caught error or an AbortSignal's reason is right; like `throw`
      // (only-throw-error), only a literal non-Error reason is reported.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      // `async` is how we implement promise-returning interfaces (summarizers, test fakes): a throw
      // becomes a rejection. Forgotten awaits are caught by no-floating-promises instead.
      '@typescript-eslint/require-await': 'off',
    },
  },
  ...layerRules,
  {
    files: ['bin/*.js', 'storage/*.js', 'eslint.config.js', 'eslint.layers.js'],
    extends: [js.configs.recommended],
  },
);
