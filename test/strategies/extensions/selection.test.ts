// Extension selection rules, one test per rule: defaults, strategy displacement, scope order,
// requirements, the one-strategy guard, custom registries, and rejected names.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlbedoError } from '../../../protocol/errors.ts';
import { createRegistry, type ExtensionDef } from '../../../strategies/extensions/catalog.ts';
import { BUILTIN_SET } from '../../../strategies/index.ts';

const BUILTIN_EXTENSIONS = BUILTIN_SET.defs;
const BUILTIN_REGISTRY = BUILTIN_SET.registry;
import { applySelection, globalChoices, resolve, validateSelection, type Choice } from '../../../strategies/extensions/selection.ts';

/** The built-ins as they will be once every implementation has landed. */
const ALL_AVAILABLE = createRegistry(BUILTIN_EXTENSIONS.map((d) => ({ ...d, available: true })));

function g(name: string, enabled: boolean, at = 0): Choice {
  return { name, enabled, scope: 'global', at };
}
function s(name: string, enabled: boolean, at = 0): Choice {
  return { name, enabled, scope: 'session', at };
}
function def(name: string, kind: ExtensionDef['kind'], extra: Partial<ExtensionDef> = {}): ExtensionDef {
  return { name, kind, defaultEnabled: false, available: true, requires: [], description: name, ...extra };
}
function rejects(fn: () => void, code: string, pattern?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof AlbedoError, String(err));
    assert.equal(err.code, code);
    if (pattern !== undefined) assert.match(err.message, pattern);
    return true;
  });
}

test('with no choices a session uses rolling, and unavailable defaults stay off', () => {
  const r = resolve(BUILTIN_REGISTRY, [], []);
  assert.equal(r.strategy, 'rolling');
  assert.deepEqual(r.enabled, ['rolling', 'notes', 'lcm-memory', 'snapcompact-memory', 'models']);
  assert.equal(r.explicit.rolling, 'default');
});

test('with every built-in available the defaults are rolling plus the layers, memories and catalog', () => {
  const r = resolve(ALL_AVAILABLE, [], []);
  assert.equal(r.strategy, 'rolling');
  assert.deepEqual(r.enabled, ['rolling', 'notes', 'lcm-memory', 'snapcompact-memory', 'models']);
});

test('selecting lcm disables rolling in the same resolution', () => {
  const r = resolve(ALL_AVAILABLE, [], [s('lcm', true, 5)]);
  assert.equal(r.strategy, 'lcm');
  assert.ok(!r.enabled.includes('rolling'));
  assert.equal(r.explicit.lcm, 'session');
  assert.equal(r.explicit.rolling, 'session');
});

test('an explicit global rolling choice survives a registry where another strategy became default', () => {
  const registry = createRegistry([
    def('rolling', 'strategy'),
    def('fancy', 'strategy', { defaultEnabled: true }),
  ]);
  assert.equal(resolve(registry, [], []).strategy, 'fancy');
  const r = resolve(registry, [g('rolling', true, 1)], []);
  assert.equal(r.strategy, 'rolling');
  assert.deepEqual(r.enabled, ['rolling']);
  assert.equal(r.explicit.fancy, 'global');
});

test('a session choice beats a global one, even an older session choice against a newer global one', () => {
  const r = resolve(ALL_AVAILABLE, [g('snapcompact', true, 100)], [s('lcm', true, 1)]);
  assert.equal(r.strategy, 'lcm');
  const off = resolve(ALL_AVAILABLE, [g('notes', true, 100)], [s('notes', false, 1)]);
  assert.ok(!off.enabled.includes('notes'));
  assert.equal(off.explicit.notes, 'session');
});

test('a global choice applies when the session made none', () => {
  const r = resolve(ALL_AVAILABLE, globalChoices({ enable: ['lcm'], disable: ['notes'] }), []);
  assert.equal(r.strategy, 'lcm');
  assert.ok(!r.enabled.includes('notes'));
  assert.equal(r.explicit.notes, 'global');
});

test('later choices in the same scope win', () => {
  const r = resolve(ALL_AVAILABLE, [], [s('snapcompact', true, 2), s('lcm', true, 1)]);
  assert.equal(r.strategy, 'snapcompact');
});

test('enabling snapcompact pulls in snapcompact-memory even when it was disabled', () => {
  const r = resolve(ALL_AVAILABLE, [g('snapcompact-memory', false, 1)], [s('snapcompact', true, 2)]);
  assert.equal(r.strategy, 'snapcompact');
  assert.ok(r.enabled.includes('snapcompact-memory'));
  assert.equal(r.explicit['snapcompact-memory'], 'session');
});

test('choices that would leave no strategy keep the first default one', () => {
  const r = resolve(ALL_AVAILABLE, [g('rolling', false, 1)], []);
  assert.equal(r.strategy, 'rolling');
  assert.equal(r.explicit.rolling, 'default');
});

test('with no default strategy the first usable strategy is kept', () => {
  const registry = createRegistry([def('broken', 'strategy', { available: false }), def('a', 'strategy'), def('b', 'strategy')]);
  assert.equal(resolve(registry, [], []).strategy, 'a');
});

test('two default strategies resolve to the first in registry order', () => {
  const registry = createRegistry([
    def('a', 'strategy', { defaultEnabled: true }),
    def('b', 'strategy', { defaultEnabled: true }),
  ]);
  const r = resolve(registry, [], []);
  assert.equal(r.strategy, 'a');
  assert.deepEqual(r.enabled, ['a']);
});

test('a custom registry with no strategy resolves to a null strategy', () => {
  const registry = createRegistry([def('models', 'catalog', { defaultEnabled: true })]);
  const r = resolve(registry, [], []);
  assert.equal(r.strategy, null);
  assert.deepEqual(r.enabled, ['models']);
  validateSelection(registry, r, { disable: ['models'] });
});

/** The built-ins as a build without lcm would register them. */
const WITHOUT_LCM = createRegistry(BUILTIN_EXTENSIONS.map((d) => (d.name === 'lcm' ? { ...d, available: false } : d)));

test('choices naming unknown or unavailable extensions are skipped when resolving', () => {
  const r = resolve(WITHOUT_LCM, [g('ghost', true)], [s('lcm', true, 1)]);
  assert.equal(r.strategy, 'rolling');
  assert.ok(!('ghost' in r.explicit));
});

test('cannot disable the last strategy without enabling another', () => {
  const current = resolve(ALL_AVAILABLE, [], []);
  rejects(
    () => validateSelection(ALL_AVAILABLE, current, { disable: ['rolling'] }),
    'invalid_config',
    /a session keeps one compaction strategy; enable another to replace rolling/,
  );
  validateSelection(ALL_AVAILABLE, current, { enable: ['lcm'], disable: ['rolling'] });
  validateSelection(ALL_AVAILABLE, current, { disable: ['lcm'] });
});

test('enabling two strategies at once is rejected', () => {
  const current = resolve(ALL_AVAILABLE, [], []);
  rejects(() => validateSelection(ALL_AVAILABLE, current, { enable: ['lcm', 'snapcompact'] }), 'invalid_config');
});

test('a name both enabled and disabled is rejected', () => {
  const current = resolve(ALL_AVAILABLE, [], []);
  rejects(() => validateSelection(ALL_AVAILABLE, current, { enable: ['notes'], disable: ['notes'] }), 'invalid_config');
});

test('disabling a requirement of an enabled extension is rejected', () => {
  const current = resolve(ALL_AVAILABLE, [], [s('snapcompact', true)]);
  rejects(
    () => validateSelection(ALL_AVAILABLE, current, { disable: ['snapcompact-memory'] }),
    'invalid_config',
    /required|requires/,
  );
  validateSelection(ALL_AVAILABLE, current, { enable: ['rolling'], disable: ['snapcompact-memory'] });
});

test('an unknown extension name is rejected', () => {
  const current = resolve(BUILTIN_REGISTRY, [], []);
  rejects(() => validateSelection(BUILTIN_REGISTRY, current, { enable: ['lcmm'] }), 'unknown_extension', /unknown extension "lcmm"/);
  rejects(() => validateSelection(BUILTIN_REGISTRY, current, { disable: ['nope'] }), 'unknown_extension');
});

test('enabling an extension this build lacks is rejected as not available', () => {
  const current = resolve(WITHOUT_LCM, [], []);
  rejects(
    () => validateSelection(WITHOUT_LCM, current, { enable: ['lcm'] }),
    'unknown_extension',
    /not available in this build/,
  );
  // A strategy whose required memory extension is missing from the build is not usable either.
  const halfway = createRegistry(
    BUILTIN_EXTENSIONS.map((d) => d.name === 'snapcompact' ? { ...d, available: true } : d.name === 'snapcompact-memory' ? { ...d, available: false } : d),
  );
  rejects(
    () => validateSelection(halfway, resolve(halfway, [], []), { enable: ['snapcompact'] }),
    'unknown_extension',
    /snapcompact-memory.*not available in this build/,
  );
});

test('applySelection replaces earlier choices for the same names and appends the new ones', () => {
  const before: Choice[] = [s('lcm', true, 1), s('notes', false, 2)];
  const current = resolve(ALL_AVAILABLE, [], before);
  const after = applySelection(ALL_AVAILABLE, current, before, { enable: ['snapcompact', 'notes'] }, 10);
  assert.deepEqual(after, [s('lcm', true, 1), s('snapcompact', true, 10), s('notes', true, 10)]);
  const r = resolve(ALL_AVAILABLE, [], after);
  assert.equal(r.strategy, 'snapcompact');
  assert.ok(r.enabled.includes('notes') && r.enabled.includes('snapcompact-memory'));
});

test('applySelection validates before changing anything', () => {
  const current = resolve(ALL_AVAILABLE, [], []);
  rejects(() => applySelection(ALL_AVAILABLE, current, [], { disable: ['rolling'] }, 1), 'invalid_config');
});

test('a registry rejects duplicate names, unknown requirements and required strategies', () => {
  assert.throws(() => createRegistry([def('a', 'layer'), def('a', 'memory')]), /duplicate/);
  assert.throws(() => createRegistry([def('a', 'layer', { requires: ['b'] })]), /unknown/);
  assert.throws(() => createRegistry([def('a', 'layer', { requires: ['b'] }), def('b', 'strategy')]), /strategy/);
});
