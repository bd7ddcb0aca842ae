// ConfigStore over real files in a temp dir and a real pino logger: defaults, good and bad
// files, one log line per distinct bad content, recovery, and hot reload through the folder watcher.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { SummarizerConfig } from '../../strategies/summarizer/types.ts';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, test } from 'node:test';
import pino from 'pino';
import { ConfigStore, ExtensionsFile, parseExtensionsText, type ConfigSnapshot } from '../../daemon/config.ts';
import { createRegistry } from '../../strategies/extensions/catalog.ts';
import { BUILTIN_SET, type ExtensionSet } from '../../strategies/index.ts';

const roots: string[] = [];
after(() => {
  for (const r of roots) fs.rmSync(r, { recursive: true, force: true });
});

function tempHome(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-config-'));
  roots.push(dir);
  return dir;
}

type LogLine = { level: number; msg: string; file?: string } & Record<string, unknown>;

/** A real pino logger whose JSON lines land in `lines`; `waitFor` resolves on a matching line. */
function captureLog() {
  const lines: LogLine[] = [];
  const waiters: Array<{ pred: (l: LogLine) => boolean; done: (l: LogLine) => void }> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const raw of chunk.toString('utf8').split('\n')) {
        if (raw === '') continue;
        const line = JSON.parse(raw) as LogLine;
        lines.push(line);
        for (const w of [...waiters]) {
          if (w.pred(line)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.done(line);
          }
        }
      }
      cb();
    },
  });
  const log = pino({ level: 'debug' }, sink);
  return {
    log,
    lines,
    errors: () => lines.filter((l) => l.level >= 50),
    waitFor: (pred: (l: LogLine) => boolean) => new Promise<LogLine>((done) => waiters.push({ pred, done })),
  };
}

function setup(opts: { modules?: ExtensionSet } = {}) {
  const home = tempHome();
  const cap = captureLog();
  const changes: ConfigSnapshot[] = [];
  let waiting: ((c: ConfigSnapshot) => void) | undefined;
  const store = new ConfigStore({
    extensionsPath: path.join(home, 'extensions.json'),
    modelsPath: path.join(home, 'models.json'),
    modules: opts.modules ?? BUILTIN_SET,
    log: cap.log,
    onChange: (c) => {
      changes.push(c);
      const w = waiting;
      waiting = undefined;
      w?.(c);
    },
  });
  return {
    home,
    store,
    cap,
    changes,
    write: (name: 'extensions.json' | 'models.json', content: unknown) => fs.writeFileSync(path.join(home, name), typeof content === 'string' ? content : JSON.stringify(content)),
    /** Resolves on the next onChange call. Set it up before causing the change. */
    nextChange: () => new Promise<ConfigSnapshot>((done) => (waiting = done)),
  };
}

const DEFAULTS = ExtensionsFile.parse({});

test('missing files load as defaults without problems', () => {
  const { store, cap, changes } = setup();
  store.load();
  assert.deepEqual(store.current.extensions, DEFAULTS);
  assert.deepEqual(DEFAULTS.rolling, { triggerPercent: 80, tailPercent: 25 });
  assert.deepEqual(DEFAULTS.snapcompact, { triggerPercent: 90, tailPercent: 10, archivePercent: 20 });
  assert.equal(DEFAULTS.notes.budgetTokens, 2000);
  assert.equal(store.current.version, 1);
  assert.equal(store.current.models.lookup('claude-sonnet-4-5')?.context_window, 200000);
  assert.deepEqual(store.problems(), []);
  assert.equal(cap.errors().length, 0);
  assert.equal(changes.length, 1);
});

test('valid files load: settings, selection and a user model', () => {
  const { store, write } = setup({
    modules: { ...BUILTIN_SET, registry: createRegistry(BUILTIN_SET.defs.map((d) => ({ ...d, available: true }))) },
  });
  write('extensions.json', {
    extensions: { enable: ['lcm'], disable: ['notes'] },
    rolling: { contextWindowTokens: 100000, triggerPercent: 70 },
    summarizer: { provider: 'extractive' },
  });
  write('models.json', { models: [{ id: 'local-7b', provider: 'ollama', context_window: 8192, input: ['text'] }] });
  store.load();
  const cfg = store.current;
  assert.deepEqual(cfg.extensions.extensions, { enable: ['lcm'], disable: ['notes'] });
  assert.deepEqual(cfg.extensions.rolling, { contextWindowTokens: 100000, triggerPercent: 70, tailPercent: 25 });
  assert.deepEqual(cfg.extensions.summarizer, { provider: 'extractive', timeoutMs: 60000, maxRetries: 2 });
  assert.equal(cfg.models.lookup('local-7b')?.context_window, 8192);
  assert.deepEqual(store.problems(), []);
});

test('invalid JSON keeps the last good config with one problem and one log line, however often it is read', () => {
  const { store, cap, write } = setup();
  write('extensions.json', { rolling: { triggerPercent: 60 } });
  store.load();
  const version = store.current.version;
  for (let i = 0; i < 4; i++) {
    write('extensions.json', '{ "rolling": { "triggerPercent": ');
    store.load();
  }
  assert.equal(store.current.extensions.rolling.triggerPercent, 60);
  assert.equal(store.current.version, version);
  const problems = store.problems();
  assert.equal(problems.length, 1);
  assert.equal(problems[0]?.file, 'extensions.json');
  assert.match(problems[0]?.message ?? '', /invalid JSON/);
  const errors = cap.errors();
  assert.equal(errors.length, 1);
  assert.ok(String(errors[0]?.file).endsWith('extensions.json'));
  // A different bad content is a new problem and is logged again.
  write('extensions.json', { rolling: { triggerPercent: 101 } });
  store.load();
  assert.equal(cap.errors().length, 2);
  assert.match(store.problems()[0]?.message ?? '', /triggerPercent/);
});

test('fixing a bad file clears the problem, bumps the version and logs the reload at info', () => {
  const { store, cap, write, changes } = setup();
  write('models.json', { models: [{ id: 'm', provider: 'p', context_window: 'big', input: ['text'] }] });
  store.load();
  assert.equal(store.problems().length, 1);
  assert.equal(store.problems()[0]?.file, 'models.json');
  assert.equal(store.current.models.lookup('m'), undefined);
  const version = store.current.version;
  write('models.json', { models: [{ id: 'm', provider: 'p', context_window: 4096, input: ['text'] }] });
  store.load();
  assert.deepEqual(store.problems(), []);
  assert.equal(store.current.version, version + 1);
  assert.equal(store.current.models.lookup('m')?.context_window, 4096);
  assert.equal(changes.at(-1)?.version, version + 1);
  assert.ok(cap.lines.some((l) => l.level === 30 && l.cleared === true && String(l.file).endsWith('models.json')));
});

test('restoring the exact last good content after a bad write still clears the problem', () => {
  const { store, write } = setup();
  write('extensions.json', { notes: { budgetTokens: 500 } });
  store.load();
  write('extensions.json', 'nope');
  store.load();
  assert.equal(store.problems().length, 1);
  const version = store.current.version;
  write('extensions.json', { notes: { budgetTokens: 500 } });
  store.load();
  assert.deepEqual(store.problems(), []);
  assert.equal(store.current.version, version + 1);
});

test('reloading unchanged files changes nothing', () => {
  const { store, write, changes } = setup();
  write('extensions.json', { notes: { budgetTokens: 500 } });
  store.load();
  assert.equal(store.load(), false);
  assert.equal(store.current.version, 1);
  assert.equal(changes.length, 1);
});

// Every built-in extension is available in this build, so a file cannot name an unavailable
// one; selection.test.ts checks that rule against registries that lack one.
test('unknown keys and unknown extension names are file problems', () => {
  const { store, write } = setup();
  const cases: Array<[unknown, RegExp]> = [
    [{ rollling: {} }, /rollling/],
    [{ rolling: { trigger: 80 } }, /trigger/],
    [{ extensions: { enable: ['lcmm'] } }, /unknown extension "lcmm"/],
    [{ extensions: { disable: ['rolling'] } }, /enable another to replace rolling/],
    [{ rolling: { triggerPercent: 20, tailPercent: 25 } }, /tailPercent/],
  ];
  for (const [content, pattern] of cases) {
    write('extensions.json', content);
    store.load();
    assert.equal(store.problems().length, 1, JSON.stringify(content));
    assert.match(store.problems()[0]?.message ?? '', pattern);
    assert.deepEqual(store.current.extensions, DEFAULTS);
  }
});

test('an old snapcompact enabled key is accepted and ignored', () => {
  const parsed = parseExtensionsText(JSON.stringify({ snapcompact: { enabled: true, maxFrames: 30 } }), BUILTIN_SET);
  assert.ok(parsed.ok);
  assert.deepEqual(parsed.value.snapcompact, { triggerPercent: 90, tailPercent: 10, archivePercent: 20, maxFrames: 30 });
  assert.ok(!('enabled' in parsed.value.snapcompact));
  assert.deepEqual(parsed.value.extensions, { enable: [], disable: [] });
});

test('extensions.example.json parses and shows every default', () => {
  const file = new URL('../../extensions.example.json', import.meta.url);
  const parsed = parseExtensionsText(fs.readFileSync(file, 'utf8'), BUILTIN_SET);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.message);
  const { summarizer, ...sections } = parsed.value;
  assert.deepEqual(sections, DEFAULTS);
  // The summarizer section shows its schema defaults; without a provider the backend is chosen per connection.
  assert.deepEqual(summarizer, SummarizerConfig.parse({}));
});

test('an empty file counts as an empty object', () => {
  const { store, write } = setup();
  write('extensions.json', '  \n');
  store.load();
  assert.deepEqual(store.problems(), []);
  assert.deepEqual(store.current.extensions, DEFAULTS);
});

test('hot reload through the watcher: create, break, fix and delete a file', { timeout: 30_000 }, async () => {
  const { store, cap, write, home, nextChange } = setup();
  store.load();
  await store.watch();
  try {
    let changed = nextChange();
    write('extensions.json', { rolling: { triggerPercent: 75 } });
    let cfg = await changed;
    assert.equal(cfg.extensions.rolling.triggerPercent, 75);

    const logged = cap.waitFor((l) => l.level >= 50);
    write('extensions.json', '{ broken');
    await logged;
    assert.equal(store.problems().length, 1);
    assert.equal(store.current.extensions.rolling.triggerPercent, 75);

    changed = nextChange();
    write('extensions.json', { rolling: { triggerPercent: 65 } });
    cfg = await changed;
    assert.equal(cfg.extensions.rolling.triggerPercent, 65);
    assert.deepEqual(store.problems(), []);

    changed = nextChange();
    write('models.json', { models: [{ id: 'hot-model', provider: 'p', context_window: 1234, input: ['text'] }] });
    cfg = await changed;
    assert.equal(cfg.models.lookup('hot-model')?.context_window, 1234);

    changed = nextChange();
    fs.unlinkSync(path.join(home, 'extensions.json'));
    cfg = await changed;
    assert.deepEqual(cfg.extensions, DEFAULTS);
    assert.equal(cap.errors().length, 1);
  } finally {
    await store.close();
  }
});

test('the notes section: budgetTokens defaults to 2000 and must be a positive integer', () => {
  const ok = parseExtensionsText('{"notes": {"budgetTokens": 500}}', BUILTIN_SET);
  assert.ok(ok.ok && ok.value.notes.budgetTokens === 500);
  const absent = parseExtensionsText('{}', BUILTIN_SET);
  assert.ok(absent.ok && absent.value.notes.budgetTokens === 2000);
  for (const bad of ['{"notes": {"budgetTokens": 0}}', '{"notes": {"budgetTokens": "lots"}}', '{"notes": {"budget": 10}}']) {
    const out = parseExtensionsText(bad, BUILTIN_SET);
    assert.ok(!out.ok && /notes/.test(out.message), bad);
  }
});
