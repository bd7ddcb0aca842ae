import { test } from 'node:test';
import assert from 'node:assert/strict';
import { extractIdentifiers, retainedShare } from '../../../scripts/eval/identifiers.ts';

test('paths, symbols, numbers, errors and hashes are found once, each with its kind', () => {
  const ids = extractIdentifiers(
    'Edited src/strategies/lcm.ts and README.md: renamed planCut to plan_cut in CutPlanner; ' +
      'the test threw TypeError (ENOENT on ./data/x.json) at port 8080, v1.2.3, commit 3fa9c1d. planCut again.',
  );
  assert.equal(ids.get('src/strategies/lcm.ts'), 'path');
  assert.equal(ids.get('README.md'), 'path');
  assert.equal(ids.get('./data/x.json'), 'path');
  assert.equal(ids.get('planCut'), 'symbol');
  assert.equal(ids.get('plan_cut'), 'symbol');
  assert.equal(ids.get('CutPlanner'), 'symbol');
  assert.equal(ids.get('TypeError'), 'error');
  assert.equal(ids.get('ENOENT'), 'error');
  assert.equal(ids.get('8080'), 'number');
  assert.equal(ids.get('1.2.3'), 'number');
  assert.equal(ids.get('3fa9c1d'), 'hash');
  // A path is one identifier, not also a symbol or a file name inside it.
  assert.equal(ids.has('lcm.ts'), false);
  assert.equal(ids.has('strategies'), false);
});

test('prose is not identifiers: and/or, sentence ends, short numbers, plain words', () => {
  const ids = extractIdentifiers('Tests pass and/or fail. Then it ran 12 times, e.g. twice. Done.Next step is 1/2 of it.');
  assert.deepEqual([...ids.keys()], []);
});

test('two capitalized words joined by a slash are prose or two symbols, not a path', () => {
  const ids = extractIdentifiers('Update/add tests for SessionLive/SubagentLive; Add/update docs in src/strategies and Sources/App.swift.');
  assert.equal(ids.has('Update/add'), false);
  assert.equal(ids.has('Add/update'), false);
  assert.equal(ids.has('SessionLive/SubagentLive'), false);
  assert.equal(ids.get('SessionLive'), 'symbol');
  assert.equal(ids.get('SubagentLive'), 'symbol');
  assert.equal(ids.get('src/strategies'), 'path');
  assert.equal(ids.get('Sources/App.swift'), 'path');
});

test('retainedShare counts verbatim occurrences', () => {
  assert.deepEqual(retainedShare(['a.ts', 'fooBar', 'ENOENT'], 'kept a.ts and ENOENT only'), { kept: 2, total: 3, share: 2 / 3 });
  assert.equal(retainedShare([], 'x').share, 1);
});
