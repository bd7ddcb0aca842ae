// The notes layer's artifact ledger: read off the tool calls of each agent's own transcripts
// (imported, stored and read back as the layer reads them), Codex patches and shell calls, exit
// statuses and test verdicts as agents print them, and the budget: the oldest files only read go
// first, then changed files are shown by directory, never dropped without it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { importTranscript } from '../../cli/import/index.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { foldSources } from '../../storage/transcript/history.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { textTokens } from '../../strategies/estimate.ts';
import { callActions, emptyLedger, exitStatus, foldLedger, instructionSentences, isTestCommand, patchActions, readLedger, renderLedger, testVerdict, type Ledger } from '../../strategies/notes/ledger.ts';
import { tempDb } from '../storage/factories.ts';

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/transcripts');

/** An agent's transcript as the notes layer reads it: imported, stored, read back. */
async function storedRows(t: test.TestContext, file: string): Promise<StoredRow[]> {
  const db = tempDb(t);
  const imported = importTranscript(fs.readFileSync(path.join(fixtures, file), 'utf8'), { path: file });
  openSession(db, { session: 's' });
  await appendRows(db, 's', imported.rows);
  const out: StoredRow[] = [];
  for (const page of foldSources(db, 's', 1, Number.MAX_SAFE_INTEGER)) out.push(...page);
  return out;
}

const byPath = (l: Ledger, p: string) => l.files.find((f) => f.path === p);

test("Claude Code's Read, Edit and Bash: the file read then changed, the test command and its verdict", async (t) => {
  const l = foldLedger(emptyLedger(), await storedRows(t, 'claude-code.jsonl'));
  const cart = byPath(l, '/home/dev/shop/src/cart.ts');
  assert.ok(cart !== undefined && cart.reads === 1 && cart.changes === 1 && !cart.created, JSON.stringify(l.files));
  assert.ok(l.commands.some((c) => c.command === 'npm test'));
  assert.ok(l.tests.some((x) => x.command === 'npm test'), JSON.stringify(l.tests));
});

test("Codex's apply_patch and shell: the patched file changed, the shell command with the exit status its output states", async (t) => {
  const l = foldLedger(emptyLedger(), await storedRows(t, 'codex-rollout.jsonl'));
  assert.equal(byPath(l, 'lib/llm.ts')?.changes, 1);
  const cat = l.commands.find((c) => c.command === 'cat package.json');
  assert.ok(cat !== undefined, JSON.stringify(l.commands));
  assert.equal(cat.exit, 0);
});

test("pi's read and bash: a file only read, and a command", async (t) => {
  const l = foldLedger(emptyLedger(), await storedRows(t, 'pi-session-v1.jsonl'));
  const main = byPath(l, '/Users/dev/mono/src/main.ts');
  assert.ok(main !== undefined && main.reads === 1 && main.changes === 0);
  assert.ok(l.commands.some((c) => c.command === 'ls src'));
});

test('a Codex patch names what it adds, updates, moves and deletes; a patch run through the shell is a patch', () => {
  const patch = ['*** Begin Patch', '*** Add File: src/new.ts', '+x', '*** Update File: src/old.ts', '*** Move to: src/moved.ts', '@@', '-a', '+b', '*** Delete File: src/gone.ts', '*** End Patch'].join('\n');
  assert.deepEqual(patchActions(patch), [
    { kind: 'create', path: 'src/new.ts' },
    { kind: 'change', path: 'src/old.ts' },
    { kind: 'create', path: 'src/moved.ts' },
    { kind: 'delete', path: 'src/gone.ts' },
  ]);
  assert.deepEqual(callActions('shell', { command: ['apply_patch', patch] }), patchActions(patch));
  assert.deepEqual(callActions('shell', { command: ['bash', '-lc', 'npm test'] }), [{ kind: 'command', command: 'npm test' }]);
  assert.deepEqual(callActions('exec_command', { cmd: 'ls -la' }), [{ kind: 'command', command: 'ls -la' }]);
  // Any other tool naming a file: a write by its name, else a read.
  assert.deepEqual(callActions('mcp__fs__write_file', { path: 'a.txt' }), [{ kind: 'change', path: 'a.txt' }]);
  assert.deepEqual(callActions('view_file', { filename: 'b.txt' }), [{ kind: 'read', path: 'b.txt' }]);
  assert.deepEqual(callActions('TodoWrite', { todos: [] }), []);
});

test('exit statuses and test verdicts as agents print them', () => {
  assert.equal(exitStatus('Exit code: 1\nWall time: 0.2 seconds'), 1);
  assert.equal(exitStatus('Process exited with code 0'), 0);
  assert.equal(exitStatus('{"exit_code": 2}'), 2);
  assert.equal(exitStatus('all good'), null);
  assert.ok(isTestCommand('npm test -- cart') && isTestCommand('cd api && pytest -q') && isTestCommand('go test ./...'));
  assert.ok(!isTestCommand('cat test.txt') && !isTestCommand('npm install'));
  assert.equal(testVerdict(null, true, ''), 'fail');
  assert.equal(testVerdict(0, false, '12 passed in 0.3s'), 'pass');
  assert.equal(testVerdict(null, false, 'Tests: 2 failed, 10 passed'), 'fail');
  assert.equal(testVerdict(null, false, '# pass 4\n# fail 0'), 'pass');
  assert.equal(testVerdict(null, false, 'running...'), 'unknown');
});

test('a write to a file never seen is a creation; a delete after it is a deletion; a later touch is the last one', () => {
  const call = (seq: number, name: string, args: Record<string, unknown>): StoredRow => ({
    session: 's',
    seq,
    row_class: 'other',
    key: null,
    created_at: 0,
    body: { kind: 'assistant', content: [{ type: 'tool_call', id: `c${seq}`, name, arguments: args }] },
  });
  let l = foldLedger(emptyLedger(), [call(1, 'Write', { file_path: 'a.ts' }), call(2, 'Read', { file_path: 'b.ts' }), call(3, 'Write', { file_path: 'b.ts' })]);
  assert.deepEqual([byPath(l, 'a.ts')?.created, byPath(l, 'b.ts')?.created, byPath(l, 'b.ts')?.changes], [true, false, 1]);
  l = foldLedger(l, [call(9, 'apply_patch', { input: '*** Begin Patch\n*** Delete File: a.ts\n*** End Patch' })]);
  assert.deepEqual([byPath(l, 'a.ts')?.deleted, byPath(l, 'a.ts')?.lastSeq], [true, 9]);
  // Saved and read back as the notes keep it.
  assert.deepEqual(readLedger(JSON.stringify(l)), l);
  assert.ok('unreadable' in readLedger('{"files":1}'));
});

test('over its budget the ledger drops the oldest files only read first, then shows changed files by directory, never dropping one unnamed', () => {
  const files = [
    ...Array.from({ length: 60 }, (_, i) => ({ path: `/repo/docs/read-${i}.md`, reads: 1, changes: 0, created: false, deleted: false, lastSeq: i + 1 })),
    ...Array.from({ length: 40 }, (_, i) => ({ path: `/repo/src/${i % 2 === 0 ? 'api' : 'ui'}/file-${i}.ts`, reads: 0, changes: 2, created: false, deleted: false, lastSeq: 100 + i })),
  ];
  const l: Ledger = { ...emptyLedger(), files, commands: [{ command: 'npm test', seq: 200, exit: 1, failed: true }], tests: [{ command: 'npm test', seq: 200, verdict: 'fail' }], through: 200 };
  const roomy = renderLedger(l, 100_000);
  // Paths are shown under the directory they all share.
  assert.ok(roomy.includes('docs/read-0.md') && roomy.includes('src/ui/file-39.ts') && !roomy.includes('/repo/docs/read-0.md'));
  const mid = renderLedger(l, 800);
  assert.ok(textTokens(mid) <= 800, `within the budget (${textTokens(mid)})`);
  assert.ok(!mid.includes('docs/read-0.md') && mid.includes('docs/read-59.md'), 'the oldest read-only files go first');
  assert.ok(mid.includes('src/ui/file-39.ts') && mid.includes('src/api/file-0.ts'), 'changed files stay while read-only ones can go');
  const tight = renderLedger(l, 150);
  assert.ok(textTokens(tight) <= 150, `within the budget (${textTokens(tight)}): ${tight}`);
  // The files only read under docs/ went, so the paths are shown under src/.
  assert.match(tight, /^Paths below are under \/repo\/src\/$/m);
  assert.match(tight, /: api\/ \(20 files changed/);
  assert.match(tight, /; ui\/ \(20 files changed/);
  assert.match(tight, /^Changed \(a directory stands for the files changed under it; transcript_grep it to list them\): /m);
  assert.match(tight, /`npm test` fail/);
  assert.equal(renderLedger(emptyLedger(), 100), '');
});

test('the saved ledger keeps the newest thousand files only read, and every changed file', () => {
  const call = (seq: number, name: string, p: string): StoredRow => ({
    session: 's',
    seq,
    row_class: 'other',
    key: null,
    created_at: 0,
    body: { kind: 'assistant', content: [{ type: 'tool_call', id: `c${seq}`, name, arguments: { file_path: p } }] },
  });
  const rows = [call(1, 'Edit', 'changed-first.ts'), ...Array.from({ length: 1200 }, (_, i) => call(i + 2, 'Read', `read-${i}.ts`))];
  const l = foldLedger(emptyLedger(), rows);
  const paths = l.files.map((f) => f.path);
  assert.equal(paths.length, 1001);
  assert.ok(paths.includes('changed-first.ts') && paths.includes('read-1199.ts') && paths.includes('read-200.ts') && !paths.includes('read-199.ts'));
});

test('where the work stood: the text before the latest user message, the last words, the open plan items, folded in slices', () => {
  const row = (seq: number, body: StoredRow['body']): StoredRow => ({ session: 's', seq, row_class: 'other', key: null, created_at: 0, body });
  const said = (seq: number, text: string): StoredRow => row(seq, { kind: 'assistant', content: [{ type: 'text', text }] });
  const asked = (seq: number, text: string): StoredRow => row(seq, { kind: 'user', origin: 'user', content: [{ type: 'text', text }] });
  const todo = (seq: number, todos: Array<{ content: string; status: string }>): StoredRow => row(seq, { kind: 'assistant', content: [{ type: 'tool_call', id: `t${seq}`, name: 'TodoWrite', arguments: { todos } }] });
  const first = foldLedger(emptyLedger(), [asked(1, 'Fix the totals.'), said(2, 'Fixed. Shall I add the orders endpoint too?'), todo(3, [{ content: 'Fix totals', status: 'completed' }, { content: 'Orders endpoint', status: 'pending' }])]);
  assert.equal(first.beforeUser, null, 'nothing was said before the first message');
  assert.deepEqual(first.lastWords, { seq: 2, text: 'Fixed. Shall I add the orders endpoint too?' });
  assert.deepEqual(first.plan, { seq: 3, tool: 'TodoWrite', open: [{ text: 'Orders endpoint', status: 'pending' }] });
  // The next slice: the user answers, the assistant goes on; Codex's plan tool replaces the plan.
  const next = foldLedger(first, [
    asked(4, 'Yes, do that.'),
    said(5, 'x'.repeat(500)),
    row(6, { kind: 'assistant', content: [{ type: 'tool_call', id: 'p', name: 'update_plan', arguments: { plan: [{ step: 'Write the route', status: 'in_progress' }] } }] }),
  ]);
  assert.deepEqual(next.beforeUser, { seq: 2, user: 4, text: 'Fixed. Shall I add the orders endpoint too?' });
  assert.equal(next.lastWords?.seq, 5);
  assert.equal([...next.lastWords?.text ?? ''].length, 301, 'a long text is kept cut, with the cut marked');
  assert.deepEqual(next.plan, { seq: 6, tool: 'update_plan', open: [{ text: 'Write the route', status: 'in_progress' }] });
  assert.deepEqual(readLedger(JSON.stringify(next)), next);
  // A ledger saved before these fields existed reads back without them.
  const old = readLedger(JSON.stringify({ files: [], commands: [], tests: [], through: 3 }));
  assert.ok(!('unreadable' in old) && old.beforeUser === null && old.lastWords === null && old.plan === null);

  const text = renderLedger(next, 100_000);
  assert.match(text, /The assistant wrote before the user's message #4 \(#2\): "Fixed\. Shall I add the orders endpoint too\?"/);
  assert.match(text, /The assistant's last words before the verbatim history \(#5\): "x{300}…"/);
  assert.match(text, /Open plan items \(update_plan #6\): "Write the route" \(in_progress\)/);
  // A long plan shows its first items and counts the rest.
  const long = foldLedger(next, [todo(7, Array.from({ length: 11 }, (_, i) => ({ content: `step ${i}`, status: i === 0 ? 'completed' : 'pending' })))]);
  assert.equal(long.plan?.open.length, 10);
  assert.match(renderLedger(long, 100_000), /Open plan items \(TodoWrite #7\): "step 1" \(pending\); .*"step 8" \(pending\); 2 more$/m);
  // Under a budget, where the work stood takes at most half (its quotes cut shorter) and the
  // files collapse into the rest.
  const files = Array.from({ length: 40 }, (_, i) => ({ path: `/repo/src/m${i % 4}/f${i}.ts`, reads: 0, changes: 1, created: false, deleted: false, lastSeq: 10 + i }));
  const tight = renderLedger({ ...next, files }, 260);
  assert.ok(textTokens(tight) <= 260, `within the budget (${textTokens(tight)})`);
  assert.match(tight, /The assistant's last words before the verbatim history \(#5\): "x{75}/);
  assert.doesNotMatch(tight, /x{201}/, 'the quote was cut shorter');
  assert.match(tight, /before the user's message #4/);
  assert.match(tight, /Open plan items/);
  assert.match(tight, /m0\/ \(10 files changed/);
});

test('the last commands go before the changed files collapse into the one directory they all share', () => {
  const files = [
    ...Array.from({ length: 12 }, (_, i) => ({ path: `/repo/app/lib/m${i % 3}/f${i}.ex`, reads: 0, changes: 1, created: false, deleted: false, lastSeq: i + 1 })),
    ...Array.from({ length: 12 }, (_, i) => ({ path: `/repo/app/test/t${i % 3}/g${i}_test.exs`, reads: 0, changes: 1, created: false, deleted: false, lastSeq: 20 + i })),
  ];
  const commands = Array.from({ length: 3 }, (_, i) => ({ command: `mix test test/t${i} --trace --seed ${1000 + i}`, seq: 40 + i, exit: 0, failed: false }));
  const l: Ledger = { ...emptyLedger(), files, commands, through: 50 };
  let sawDirs = false;
  for (let budget = 60; budget <= 400; budget += 5) {
    const text = renderLedger(l, budget);
    const atRoot = /^Changed[^:\n]*: [^\n]*\bapp\/ \(24 files changed/m.test(text);
    if (atRoot) assert.doesNotMatch(text, /Last commands/, `budget ${budget}: commands kept while the files collapsed into their shared directory:\n${text}`);
    if (/lib\/ \(12 files changed|test\/ \(12 files changed/.test(text)) sawDirs = true;
  }
  assert.ok(sawDirs, 'some budget shows the files by directories below the shared one');
});

test('a tight ledger names each changed directory below the shared one, shortens where the work stood for it, and never collapses above it', () => {
  // The shape of a long pi session: changed files in many directories of one package, and a file
  // only read outside the project, which pulls the shared directory of everything up to /Users/.
  const project = '/Users/dev/workspaces/mono/packages/agent/';
  const dirs = ['src/core', 'src/modes', 'src/modes/interactive', 'src/cli', 'src/utils', 'docs', 'test'];
  const files = [
    { path: '/Users/dev/.config/agent/settings.json', reads: 3, changes: 0, created: false, deleted: false, lastSeq: 1 },
    ...Array.from({ length: 28 }, (_, i) => ({ path: `${project}${dirs[i % dirs.length]}/file-${i}.ts`, reads: 1, changes: 1 + (i % 3), created: false, deleted: false, lastSeq: 10 + i })),
  ];
  const commands = Array.from({ length: 10 }, (_, i) => ({ command: `npm run check -- --filter step-${i}`, seq: 50 + i, exit: 0, failed: false }));
  const l: Ledger = { ...emptyLedger(), files, commands, through: 60, beforeUser: { seq: 58, user: 59, text: 'y'.repeat(300) }, lastWords: { seq: 60, text: 'z'.repeat(300) } };
  let shortened = false;
  for (let budget = 120; budget <= 400; budget += 10) {
    const text = renderLedger(l, budget);
    assert.doesNotMatch(text, /packages\/ \(|mono\/ \(|workspaces\/ \(/, `budget ${budget}: collapsed above the changed files' directory:\n${text}`);
    // Once the read-only file outside went, paths are shown under the project.
    if (!text.includes('settings.json')) assert.match(text, new RegExp(`^Paths below are under ${project.replace(/\//g, '\\/')}$`, 'm'));
    // Named: a file of it, or it or a directory above it (below the project) standing for its files.
    const shownDirs = [...text.matchAll(/(?:^|[:;] )([\w./-]+)\/ \(\d+ files? changed/gm)].map((m) => m[1]!);
    const named = dirs.every((d) => text.includes(`${d}/file-`) || shownDirs.some((s) => d === s || d.startsWith(`${s}/`)));
    if (textTokens(text) <= budget && named && !/z{100}/.test(text)) shortened = true;
    if (budget >= 200) {
      assert.ok(textTokens(text) <= budget, `budget ${budget}: ${textTokens(text)} tokens`);
      assert.ok(named, `budget ${budget}: a changed directory below the project went unnamed:\n${text}`);
    }
  }
  assert.ok(shortened, 'some budget keeps every directory by cutting the quotes short');
});

test("the user's standing instructions: their constraint sentences, quoted, a newer one replacing the older it restates", () => {
  assert.deepEqual(instructionSentences('Fix it. Never touch the generated schema.ts file. Thanks.\nAlways run  the tests.'), ['Never touch the generated schema.ts file.', 'Always run the tests.']);
  const injected = '<system-reminder>\nIMPORTANT: you must follow these instructions.\n</system-reminder>\nOk. <approval_policy>never</approval_policy> Do not push to main.';
  assert.deepEqual(instructionSentences(injected), ['Do not push to main.'], 'what an agent wraps in a tag in the user turn is not the user speaking');
  assert.deepEqual(instructionSentences("Should the client always retry on 429? Why don't the tests run in CI? Always retry twice, then fail."), ['Always retry twice, then fail.'], 'a question sets nothing');
  const pasted = 'It fails with:\n```\nTypeError: value must not be null\n    at parse (src/a.ts:3)\n```\nNever change the parser signature.\n```\nalways unterminated';
  assert.deepEqual(instructionSentences(pasted), ['Never change the parser signature.'], 'pasted code or output in a fence is not the user speaking');
  const asked = (seq: number, text: string): StoredRow => ({ session: 's', seq, row_class: 'other', key: null, created_at: 0, body: { kind: 'user', origin: 'user', content: [{ type: 'text', text }] } });
  const toolOutput: StoredRow = { session: 's', seq: 3, row_class: 'other', key: null, created_at: 0, body: { kind: 'tool_result', call_id: 'c', content: [{ type: 'text', text: 'you must never see this' }], is_error: false } };
  let l = foldLedger(emptyLedger(), [asked(1, 'Refactor the cart. Never touch the generated schema.ts file.'), asked(2, 'Always use yarn for installs.'), toolOutput]);
  assert.deepEqual(l.instructions.map((i) => [i.seq, i.text]), [[1, 'Never touch the generated schema.ts file.'], [2, 'Always use yarn for installs.']]);
  // The same words said again move to the end; a different one that overrides an earlier one is
  // shown after it (which of them holds is the model's to read, not a word-overlap rule's).
  l = foldLedger(l, [asked(4, 'never touch the generated schema.ts file!'), asked(5, "Don't use yarn for installs anymore, use pnpm instead.")]);
  assert.deepEqual(l.instructions.map((i) => i.seq), [2, 4, 5]);
  assert.deepEqual(readLedger(JSON.stringify(l)), l);
  const text = renderLedger(l, 100_000);
  assert.match(text, /^The user's standing instructions, newest last: "Always use yarn for installs\." \(#2\); "never touch the generated schema\.ts file!" \(#4\); "Don't use yarn for installs anymore, use pnpm instead\." \(#5\)$/m);
  // Many: the newest are kept; under a budget the oldest shown go first, the newest stays.
  const many = foldLedger(emptyLedger(), Array.from({ length: 12 }, (_, i) => asked(10 + i, `Rule ${i}: always run formatter-${i} before committing file-${i}.`)));
  assert.equal(many.instructions.length, 8);
  assert.equal(many.instructions.at(-1)?.seq, 21);
  const tight = renderLedger(many, 120);
  assert.match(tight, /\(\d older: transcript_grep finds them\): .*"Rule 11: always run formatter-11 before committing file-11\." \(#21\)$/m);
  assert.doesNotMatch(tight, /Rule 4:/);
});
