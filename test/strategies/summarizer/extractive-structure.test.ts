// The extractive summary's structure on a hand-written coding session: its sections in order, a
// next step, files with what changed, an error with its fix, no bullet that is only a tool call;
// ranking by what later turns refer back to; incremental summaries that merge; summaries to
// condense (lcm) read back; the same input giving the same output; the byte cap.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EXTRACTIVE_HEADINGS, extractSummary } from '../../../strategies/summarizer/extractive.ts';
import { aiLine, buildSummaryPrompt, callLine, outLine, parseTranscriptLine, userLine } from '../../../strategies/summarizer/prompt-format.ts';

const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

/** A session that fixes a crash: a read, two edits, a failing test run, the fix, a passing run. */
function fixSession(): string {
  return [
    userLine('Fix the crash in src/cache/lru.ts when capacity is 0; keep the public API of LruCache unchanged.'),
    aiLine("I'll read the cache first."),
    callLine('read_file', { path: '/repo/app/src/cache/lru.ts' }),
    outLine('c1', '  1→export class LruCache {\n  2→  set(key: string, value: unknown) {\n  3→    evictOldest();'),
    aiLine('The bug: evictOldest() runs before the size check, so capacity 0 divides by zero. Decided: guard in LruCache.set instead of changing evictOldest, because trimTo uses evictOldest too.'),
    callLine('edit_file', { path: '/repo/app/src/cache/lru.ts', old_string: '    evictOldest();', new_string: '    if (this.capacity === 0) return;\n    evictOldest();' }),
    outLine('c2', 'The file /repo/app/src/cache/lru.ts has been updated successfully.'),
    callLine('bash', { command: 'npm test 2>&1 | tail -20' }),
    outLine('c3', "FAIL test/cache/lru.test.ts\nTypeError: Cannot read properties of undefined (reading 'next')\n1 failed, 41 passed", true),
    aiLine('The test fails because makeNode returns undefined for an empty list; fixing makeNode in src/cache/node.ts.'),
    callLine('edit_file', { path: '/repo/app/src/cache/node.ts', old_string: 'return head.next;', new_string: 'return head?.next ?? nullNode;' }),
    outLine('c4', 'ok'),
    callLine('bash', { command: 'npm test 2>&1 | tail -20' }),
    outLine('c5', '# tests 42\n# pass 42\n# fail 0'),
    aiLine('All 42 tests pass.'),
    aiLine('Still need to document the capacity-0 behaviour in docs/cache.md.'),
    aiLine('Next I will update docs/cache.md and add a regression test for trimTo.'),
  ].join('\n');
}

/** The bullets of one section of a summary. */
function section(summary: string, heading: string): string[] {
  const blocks = summary.split('\n\n');
  const block = blocks.find((b) => b.startsWith(`${heading}\n`));
  return block === undefined ? [] : block.split('\n').slice(1);
}

/** A bullet that is only a tool call as the transcript writes it, or raw tool output. */
function isBareToolLine(line: string): boolean {
  const body = line.replace(/^- /, '');
  return parseTranscriptLine(body).kind === 'call' || /^[\w.:-]+\(\w+ = /.test(body) || /^(?:result|error): /.test(body);
}

test('a coding session is summarized in sections, in order, ending in the next step, with no bare tool-call bullet', () => {
  const out = extractSummary(buildSummaryPrompt({ transcript: fixSession() }), 2048);
  const positions = EXTRACTIVE_HEADINGS.map((h) => out.split('\n').indexOf(h));
  assert.deepEqual(EXTRACTIVE_HEADINGS, ['Task:', 'Decisions and findings:', 'Files touched:', 'Errors and fixes:', 'Verified:', 'Open work:', 'Names to keep:', 'Next step:']);
  for (let i = 0; i < positions.length; i++) assert.ok(positions[i]! >= 0 && (i === 0 || positions[i]! > positions[i - 1]!), `section ${EXTRACTIVE_HEADINGS[i]} missing or out of order:\n${out}`);

  assert.match(section(out, 'Task:').join('\n'), /Fix the crash in src\/cache\/lru\.ts/);
  assert.ok(section(out, 'Task:').includes('- workspace: /repo/app'), out);
  assert.match(section(out, 'Decisions and findings:').join('\n'), /guard in LruCache\.set/);
  const files = section(out, 'Files touched:');
  assert.ok(files.some((l) => /^- src\/cache\/lru\.ts: edited 1×/.test(l)), files.join('\n'));
  assert.ok(files.some((l) => /^- src\/cache\/node\.ts: edited 1×; added nullNode/.test(l)), files.join('\n'));
  const errors = section(out, 'Errors and fixes:').join('\n');
  assert.match(errors, /`npm test`: .*TypeError.*→ resolved/);
  assert.match(errors, /then: The test fails because makeNode returns undefined/);
  assert.match(section(out, 'Verified:').join('\n'), /`npm test`: # pass 42/);
  assert.match(section(out, 'Open work:').join('\n'), /docs\/cache\.md/);
  assert.deepEqual(section(out, 'Next step:'), ['- Next I will update docs/cache.md and add a regression test for trimTo.']);

  for (const line of out.split('\n')) if (line.startsWith('- ')) assert.ok(!isBareToolLine(line), `bare tool line: ${line}`);
  assert.ok(!out.includes('export class LruCache'), 'file contents are not copied');
});

test('of two like findings, the one later turns refer back to is kept', () => {
  const finding = (name: string, dir: string): string => aiLine(`Found that ${name} in src/${dir}/widget.ts needs a guard for empty input before the render loop calls it.`);
  const referTo = (name: string): string[] => [
    callLine('grep', { pattern: name }),
    outLine('g', 'ok'),
    aiLine(`Checking ${name} once more.`),
    aiLine(`${name} is called from three places.`),
  ];
  // The first finding is the older one, so recency alone would favour the second.
  const build = (referred: string): string => [finding('alphaWidget', 'alpha'), finding('betaWidget', 'beta'), ...referTo(referred)].join('\n');
  for (const [referred, other] of [['alphaWidget', 'betaWidget'], ['betaWidget', 'alphaWidget']] as const) {
    const out = extractSummary(buildSummaryPrompt({ transcript: build(referred) }), 55);
    const decisions = section(out, 'Decisions and findings:').join('\n');
    assert.ok(decisions.includes(`Found that ${referred}`), `the referred-to finding was dropped:\n${out}`);
    assert.ok(!decisions.includes(`Found that ${other}`), `the finding never referred to again was kept over it:\n${out}`);
  }
});

test('a second summary merges into the first: one bullet per file, the task kept, the newest next step', () => {
  const first = extractSummary(buildSummaryPrompt({ transcript: fixSession() }), 2048);
  const more = [
    aiLine('Now let me update docs/cache.md.'),
    callLine('edit_file', { path: '/repo/app/src/cache/lru.ts', old_string: 'return;', new_string: 'return undefined; // capacity 0 stores nothing' }),
    outLine('c6', 'ok'),
    callLine('write_file', { path: '/repo/app/docs/cache.md', content: '# Cache\n\nA capacity of 0 stores nothing (see LruCache.set).' }),
    outLine('c7', 'File created successfully at: /repo/app/docs/cache.md'),
    aiLine('Next I will add the trimTo regression test in test/cache/lru.test.ts.'),
  ].join('\n');
  const second = extractSummary(buildSummaryPrompt({ previousSummary: first, transcript: more }), 2048);
  const files = section(second, 'Files touched:');
  assert.equal(files.filter((l) => l.startsWith('- src/cache/lru.ts:')).length, 1, files.join('\n'));
  assert.match(files.find((l) => l.startsWith('- src/cache/lru.ts:')) ?? '', /edited 2×/);
  assert.ok(files.some((l) => l.startsWith('- docs/cache.md: created')), files.join('\n'));
  assert.ok(files.some((l) => l.startsWith('- src/cache/node.ts:')), 'a file of the first summary stays');
  assert.match(section(second, 'Task:').join('\n'), /Fix the crash in src\/cache\/lru\.ts/);
  assert.deepEqual(section(second, 'Next step:'), ['- Next I will add the trimTo regression test in test/cache/lru.test.ts.']);
  for (const heading of EXTRACTIVE_HEADINGS) assert.ok(second.split('\n').filter((l) => l === heading).length <= 1);
});

test('summaries to condense (lcm) are read back and merged, not quoted', () => {
  const a = extractSummary(buildSummaryPrompt({ transcript: fixSession() }), 1024);
  const b = extractSummary(
    buildSummaryPrompt({
      transcript: [userLine('Now make src/cache/ttl.ts expire entries after ttlMs.'), callLine('edit_file', { path: '/repo/app/src/cache/ttl.ts', old_string: 'x', new_string: 'expireAfter(ttlMs)' }), outLine('c', 'ok')].join('\n'),
    }),
    1024,
  );
  const children = `[lcm node 1 · rows #1-#17 · depth 0]\n${a}\n\n[lcm node 2 · rows #18-#20 · depth 0]\n${b}`;
  const out = extractSummary(buildSummaryPrompt({ transcript: children }), 1024);
  for (const heading of EXTRACTIVE_HEADINGS) assert.ok(out.split('\n').filter((l) => l === heading).length <= 1, `${heading} twice:\n${out}`);
  const files = section(out, 'Files touched:').join('\n');
  assert.match(files, /src\/cache\/lru\.ts: edited 1×/);
  assert.match(files, /src\/cache\/ttl\.ts: edited 1×/);
  assert.ok(!out.includes('- Task:'), 'headings are not quoted as bullets');
});

test('the same prompt gives the same summary, and the cap holds at every size', () => {
  const prompt = buildSummaryPrompt({ previousSummary: extractSummary(buildSummaryPrompt({ transcript: fixSession() }), 300), transcript: fixSession(), focus: 'capacity' });
  for (const tokens of [1, 10, 49, 50, 64, 128, 300, 819, 2048]) {
    const out = extractSummary(prompt, tokens);
    assert.equal(extractSummary(prompt, tokens), out);
    assert.ok(bytes(out) <= tokens * 4, `${bytes(out)} bytes > ${tokens * 4} at ${tokens} tokens`);
    if (tokens >= 64) assert.ok(out.includes('src/cache/lru.ts'), `the file fixed is named at ${tokens} tokens:\n${out}`);
  }
});

test('the budget the facts leave lists exact names they do not carry, most mentioned first, and a re-summary keeps them', () => {
  const out = extractSummary(buildSummaryPrompt({ transcript: fixSession() }), 2048);
  const names = section(out, 'Names to keep:');
  assert.equal(names.length, 1, out);
  const listed = names[0]!.replace(/^- /, '').split(', ');
  assert.ok(listed.length >= 3, names[0]);
  const rest = out.replace(names[0]!, '');
  for (const n of listed) assert.ok(!rest.includes(n), `${n} is listed though another section names it`);
  assert.equal(new Set(listed).size, listed.length, 'each name once');
  assert.ok(Buffer.byteLength(out, 'utf8') <= 2048 * 4);
  // Little budget: the facts come first, and the names only take what is left.
  const small = extractSummary(buildSummaryPrompt({ transcript: fixSession() }), 120);
  assert.ok(Buffer.byteLength(small, 'utf8') <= 480);
  // A re-summary of the same history reads its previous names back.
  const again = extractSummary(buildSummaryPrompt({ previousSummary: out, transcript: userLine('thanks, carry on') }), 2048);
  const kept = section(again, 'Names to keep:').join(' ');
  for (const n of listed.slice(0, 3)) assert.ok(again.includes(n), `${n} survives the re-summary:\n${kept}`);
});
