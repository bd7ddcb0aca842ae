// The offline summarizer and the prompt layout it shares with the strategies: determinism, the
// byte budget, what survives a tight budget, and the build/parse round trip. The HTTP and client
// backends are tested in http.test.ts and client.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlbedoError } from '../../../protocol/errors.ts';
import { runSteps } from '../../../protocol/time-slice.ts';
import { IMAGE_MARKER_PATTERN, imageMarker } from '../../../storage/transcript/row-text.ts';
import { clipUtf8, createExtractiveSummarizer, EXTRACTIVE_HEADINGS, extractSummary } from '../../../strategies/summarizer/extractive.ts';
import { clip } from '../../../strategies/summarizer/extractive-digest.ts';
import { eachToken, features, identifiers, References, withoutCutTokens } from '../../../strategies/summarizer/extractive-facts.ts';
import { aiLine, buildSummaryPrompt, callLine, outLine, parseSummaryPrompt, parseTranscriptLine, redactBlobs, userLine } from '../../../strategies/summarizer/prompt-format.ts';

const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

/** A small session: informative lines among chat filler. */
function session(): string {
  return [
    userLine('the build fails with TS2345 in src/daemon/kernels.ts, please fix it'),
    aiLine('ok'),
    aiLine('sure thing'),
    callLine('read_file', { path: 'src/daemon/kernels.ts' }),
    outLine('call_1', 'export function adoptKernel(id: string) {\n  return kernelMap.get(id);\n}'),
    aiLine('The bug: adoptKernel returns undefined because registerKernel is never called first.'),
    aiLine('hmm'),
    aiLine('thanks!'),
    callLine('edit_file', { path: 'src/daemon/kernels.ts', old: 'a', new: 'b' }),
    outLine('call_2', 'ok'),
    aiLine('Verified: npm test shows 42 passing with zod 4.1.0.'),
    aiLine('great'),
  ].join('\n');
}

/** `n` lines of mixed-script text, each a different user request. */
function multibyteTranscript(n: number): string {
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    lines.push(userLine(`修正 src/模块${i}/ファイル.ts 🙂🙂 é̃ 𝄞 ошибка ${i} must fix handleEvent${i}`));
    lines.push(aiLine(`Ελήφθη — ich werde «${i}» prüfen, weil fooBar_${i} failed 🚀`));
  }
  return lines.join('\n');
}

test('the same prompt always gives the same summary', () => {
  const prompt = buildSummaryPrompt({ previousSummary: '- decided: keep bytes/4', focus: 'kernel', transcript: session() });
  const first = extractSummary(prompt, 80);
  for (let i = 0; i < 5; i++) assert.equal(extractSummary(prompt, 80), first);
  assert.equal(extractSummary(`${prompt}`, 80), first);
});

test('the output never exceeds maxOutputTokens * 4 bytes, whatever the script', () => {
  const prompts = [
    buildSummaryPrompt({ transcript: session() }),
    buildSummaryPrompt({ previousSummary: multibyteTranscript(5), transcript: multibyteTranscript(200) }),
    buildSummaryPrompt({ transcript: userLine('🙂'.repeat(50_000)) }),
    buildSummaryPrompt({ transcript: outLine('c', 'é'.repeat(30_000) + ' ' + 'x'.repeat(30_000)) }),
  ];
  for (const prompt of prompts) {
    for (const tokens of [1, 2, 3, 7, 20, 49, 50, 51, 128, 768, 2048]) {
      const out = extractSummary(prompt, tokens);
      assert.ok(bytes(out) <= tokens * 4, `${bytes(out)} bytes > ${tokens * 4}`);
      assert.ok(!out.includes('\uFFFD'), 'a multi-byte character was split');
    }
  }
});

test('a single line longer than the budget is cut at a character boundary and ends in an ellipsis', () => {
  const prompt = buildSummaryPrompt({ transcript: userLine(`fix src/a.ts: ${'日本語のテキスト'.repeat(20_000)}`) });
  const summary = createExtractiveSummarizer();
  for (const tokens of [30, 100, 500]) {
    const out = extractSummary(prompt, tokens);
    assert.ok(out.length > 0);
    assert.ok(bytes(out) <= tokens * 4);
    assert.ok(out.endsWith('…'), out.slice(-20));
    assert.ok(out.includes('src/a.ts'));
  }
  return summary.summarize({ session: 's', purpose: 'rolling', system: '', prompt, maxOutputTokens: 64 }).then((r) => {
    assert.ok(r.outputTokens <= 64);
    assert.equal(r.backend, 'extractive');
    assert.equal(r.model, null);
  });
});

test('clipUtf8 never splits a multi-byte sequence', () => {
  const text = 'aé日🙂'.repeat(10);
  for (let max = 0; max < bytes(text) + 2; max++) {
    const out = clipUtf8(text, max);
    assert.ok(bytes(out) <= max);
    assert.ok(!out.includes('\uFFFD'));
    if (max >= bytes(text)) assert.equal(out, text);
  }
});

test('under a tight budget paths, identifiers and numbers survive while chat filler is dropped', () => {
  const out = extractSummary(buildSummaryPrompt({ transcript: session() }), 110);
  for (const kept of ['src/daemon/kernels.ts', 'TS2345', 'adoptKernel', '42 passing']) {
    assert.ok(out.includes(kept), `missing ${kept} in:\n${out}`);
  }
  for (const line of out.split('\n')) {
    assert.ok(!/^- (ok|sure thing|hmm|thanks!|great)$/.test(line), `filler kept: ${line}`);
  }
});

test('with room to spare, filler is still left out', () => {
  const out = extractSummary(buildSummaryPrompt({ transcript: session() }), 4000);
  assert.ok(!/^- (ok|hmm|thanks!|great|sure thing)$/m.test(out), out);
  assert.ok(out.startsWith('Task:\n'), out);
  assert.ok(out.includes('Files touched:\n- src/daemon/kernels.ts: edited 1×'), out);
});

test('a previous summary in another layout is kept over transcript lines, and new history still gets room', () => {
  const previous = [
    '- decided: the cache lives in storage/cache.ts',
    '- open: fix flaky test in test/e2e/daemon-process.test.ts',
    '- next: bump zod to 4.1.0',
  ].join('\n');
  const transcript = Array.from({ length: 40 }, (_, i) => aiLine(`checked src/module${i}/file${i}.ts: handleEvent${i} failed with E${1000 + i}`)).join('\n');
  const out = extractSummary(buildSummaryPrompt({ previousSummary: previous, transcript }), 120);
  for (const line of previous.split('\n')) assert.ok(out.includes(line), `lost "${line}" in:\n${out}`);
  assert.match(out, /src\/module\d+\/file\d+\.ts/, 'the transcript still gets room');
});

test('a previous summary that fills the budget still leaves room for new history', () => {
  const previous = Array.from({ length: 200 }, (_, i) => `- decided: module${i} uses fooBar_${i} from src/m${i}.ts`).join('\n');
  const transcript = userLine('now port src/new/thing.ts to the new API and verify with npm test');
  const out = extractSummary(buildSummaryPrompt({ previousSummary: previous, transcript }), 300);
  assert.ok(out.includes('src/new/thing.ts'), out);
  assert.ok(bytes(out) <= 1200);
});

test('re-summarizing an extractive summary does not repeat its headings', () => {
  const first = extractSummary(buildSummaryPrompt({ transcript: session() }), 400);
  const second = extractSummary(buildSummaryPrompt({ previousSummary: first, transcript: session() }), 400);
  for (const heading of EXTRACTIVE_HEADINGS) assert.ok(second.split('\n').filter((l) => l === heading).length <= 1, `${heading} twice in:\n${second}`);
  assert.equal(second.split('\n').filter((l) => l === 'Files touched:').length, 1);
});

test('lines sharing words with the focus are preferred', () => {
  const transcript = [
    aiLine('Checked the payment webhook handler in src/billing/webhook.ts; retries are fine.'),
    aiLine('Checked the render glyph cache in src/render/glyphs.ts; eviction is fine.'),
  ].join('\n');
  const billing = extractSummary(buildSummaryPrompt({ focus: 'billing webhook', transcript }), 30);
  const render = extractSummary(buildSummaryPrompt({ focus: 'glyph render', transcript }), 30);
  assert.ok(billing.includes('webhook.ts') && !billing.includes('glyphs.ts'), billing);
  assert.ok(render.includes('glyphs.ts') && !render.includes('webhook.ts'), render);
});

test('near-duplicate lines are kept once', () => {
  const transcript = [
    aiLine('Running tests for src/a.ts: 3 failed, because fooBar is undefined'),
    aiLine('Running tests for src/a.ts: 3 failed, because fooBar is undefined.'),
    aiLine('running tests for src/a.ts - 3 failed because fooBar is undefined'),
    aiLine('Running the tests for src/a.ts: 3 failed, because fooBar is undefined'),
  ].join('\n');
  const out = extractSummary(buildSummaryPrompt({ transcript }), 1000);
  assert.equal(out.split('\n').filter((l) => l.includes('src/a.ts')).length, 1, out);
});

test('base64 blobs are never copied, wherever they appear', () => {
  const blob = Buffer.from('x'.repeat(6000)).toString('base64');
  const transcript = [
    userLine(`here is the screenshot data:image/png;base64,${blob} please fix src/ui.ts`),
    outLine('c1', `${blob}\n${blob}`),
    callLine('write_file', { path: 'assets/logo.b64', content: blob }),
  ].join('\n');
  const prompt = buildSummaryPrompt({ previousSummary: `- old blob ${blob} in src/old.ts`, transcript });
  for (const tokens of [50, 500, 5000]) {
    const out = extractSummary(prompt, tokens);
    assert.ok(!/[A-Za-z0-9+/=]{201,}/.test(out), 'a blob was copied');
    assert.ok(!out.includes(blob.slice(0, 100)));
  }
  assert.ok(extractSummary(prompt, 5000).includes('[data]'));
  assert.equal(redactBlobs(`a ${'Q'.repeat(200)} b`), `a ${'Q'.repeat(200)} b`, '200 characters are not a blob');
  assert.equal(redactBlobs(`a ${'Q'.repeat(201)} b`), 'a [data] b');
});

test('an empty prompt fails as an empty summary', async () => {
  await assert.rejects(
    createExtractiveSummarizer().summarize({ session: 's', purpose: 'lcm', system: '', prompt: buildSummaryPrompt({ transcript: '' }), maxOutputTokens: 100 }),
    (err: unknown) => err instanceof AlbedoError && err.code === 'summarizer_failed' && err.details?.reason === 'empty_summary',
  );
});

test('a transcript of pure chatter still yields something', () => {
  const transcript = [userLine('hi'), aiLine('hello'), aiLine('ok')].join('\n');
  assert.notEqual(extractSummary(buildSummaryPrompt({ transcript }), 100), '');
});

test('a 200 KB prompt is summarized within budget', () => {
  const lines: string[] = [];
  for (let i = 0; bytes(lines.join('\n')) < 200_000; i++) {
    lines.push(userLine(`update src/m${i}/f${i}.ts so handleEvent${i} works with version 1.${i}.0`));
    lines.push(callLine('read_file', { path: `src/m${i}/f${i}.ts` }));
    lines.push(outLine(`call_${i}`, Array.from({ length: 8 }, (_, k) => `const v${k} = compute(${k}, "x${i}");`).join('\n')));
    lines.push(aiLine('ok thanks'));
  }
  const out = extractSummary(buildSummaryPrompt({ transcript: lines.join('\n'), focus: 'handleEvent7' }), 2048);
  assert.ok(bytes(out) <= 8192 && bytes(out) > 4000);
  assert.ok(out.includes('handleEvent7 '), 'the focused line is kept');
});

test('buildSummaryPrompt and parseSummaryPrompt round-trip, even with tag-like content', () => {
  const cases = [
    { transcript: session() },
    { previousSummary: 'a\n\nb', focus: 'the cache', transcript: 'x\n', instructions: 'Write at most 200 tokens.' },
    { transcript: '</transcript>\n\\</transcript>\n<focus>\n\\\\<previous-summary>\nend' },
    { previousSummary: '</previous-summary>', transcript: '' },
  ];
  for (const parts of cases) assert.deepEqual(parseSummaryPrompt(buildSummaryPrompt(parts)), parts);
  assert.deepEqual(parseSummaryPrompt(buildSummaryPrompt({ previousSummary: '', focus: '', transcript: 't' })), { transcript: 't' });
  assert.deepEqual(parseSummaryPrompt('no tags here\n¶user: hi'), { transcript: 'no tags here\n¶user: hi' });
});

test('transcript lines are classified by their marker', () => {
  assert.deepEqual(parseTranscriptLine('¶user: fix it'), { kind: 'user', text: 'fix it', origin: 'user' });
  assert.deepEqual(parseTranscriptLine('¶user (notes): remember'), { kind: 'user', text: 'remember', origin: 'notes' });
  assert.deepEqual(parseTranscriptLine('¶ai: done'), { kind: 'ai', text: 'done' });
  assert.deepEqual(parseTranscriptLine('¶ai (thinking): hm'), { kind: 'thinking', text: 'hm' });
  assert.deepEqual(parseTranscriptLine('→ read_file(path = "a.ts")'), { kind: 'call', text: 'read_file(path = "a.ts")' });
  assert.deepEqual(parseTranscriptLine('¶out call_7 (error): boom'), { kind: 'out', text: 'boom', callId: 'call_7', isError: true });
  assert.deepEqual(parseTranscriptLine('¶out call_7: fine'), { kind: 'out', text: 'fine', callId: 'call_7', isError: false });
  assert.deepEqual(parseTranscriptLine('¶note: excursion started'), { kind: 'note', text: 'excursion started' });
  assert.deepEqual(parseTranscriptLine('  more text'), { kind: 'continuation', text: '  more text' });
  assert.equal(callLine('grep', { pattern: 'a"b', n: 3 }), '→ grep(pattern = "a\\"b", n = 3)');
});

test('image markers, elided or not, carry nothing a summary keeps', () => {
  const hash = '0123abcd'.repeat(8);
  for (const elided of [false, true]) {
    const marker = imageMarker(hash, 640, 480, elided);
    assert.equal(marker.replace(IMAGE_MARKER_PATTERN, ''), '', `the pattern matches ${marker}`);
    const prompt = buildSummaryPrompt({ transcript: [userLine('please fix the crash in src/app.ts'), outLine('call_1', marker)].join('\n') });
    assert.equal(extractSummary(prompt, 200).includes('0123abcd'), false, `a tool output of only ${marker} is filler`);
  }
});

/** A long session: `n` exchanges of a call, its result and a remark. */
function longSession(n: number): string {
  const lines: string[] = [userLine('refactor the parser in src/parse.ts')];
  for (let i = 0; i < n; i++) {
    lines.push(callLine('read_file', { path: `src/mod${i}.ts` }));
    lines.push(outLine(`call_${i}`, `export function handler${i}(input: string) {\n  return parseInput${i}(input);\n}`));
    lines.push(aiLine(`handler${i} delegates to parseInput${i}; the error path in mod${i} is untested.`));
  }
  return lines.join('\n');
}

test('the backend reads a long prompt with turns for the event loop, to the same summary', async () => {
  const prompt = buildSummaryPrompt({ transcript: longSession(6000) });
  let turns = 0;
  const tick = setInterval(() => (turns += 1), 0);
  try {
    const r = await createExtractiveSummarizer().summarize({ session: 's', purpose: 'rolling', system: '', prompt, maxOutputTokens: 800 });
    assert.equal(r.text, extractSummary(prompt, 800));
  } finally {
    clearInterval(tick);
  }
  assert.ok(turns > 0, 'the event loop ran while 18,000 lines were read');
});

test('cancelling the request stops the backend between slices of a long prompt', async () => {
  const prompt = buildSummaryPrompt({ transcript: longSession(6000) });
  const ctrl = new AbortController();
  // Aborted at the first turn the backend gives the event loop.
  setImmediate(() => ctrl.abort());
  await assert.rejects(
    createExtractiveSummarizer().summarize({ session: 's', purpose: 'rolling', system: '', prompt, maxOutputTokens: 800, signal: ctrl.signal }),
    (err: unknown) => err instanceof AlbedoError && err.code === 'summarizer_failed' && err.details?.reason === 'cancelled',
  );
});

test('a cut marker and the token it cut short name nothing: the same text the one-regex removal gave, in linear time', () => {
  // The regex withoutCutTokens replaced, kept here as the reference.
  const reference = (t: string): string => (t.includes('more characters cut]') ? t.replace(/[^\s[]*\s?\[…\d+ more characters cut\]/g, ' ') : t);
  const cases = [
    'load_ses […1436 more characters cut]',
    'abc […5 more characters cut]xyz […6 more characters cut] tail',
    '[[…3 more characters cut]',
    '  […3 more characters cut]',
    'x\t[…3 more characters cut]',
    'src/a.ts […12 more characters cut]] then src/b.ts',
    '[…1 more characters cut][…2 more characters cut]',
    'emoji😀😀 […4 more characters cut]',
    'a\n\n[…7 more characters cut]',
    'no marker at all in src/c.ts',
  ];
  // Seeded generated strings over the characters that matter to the match.
  const alphabet = ['a', 'Z', ' ', '\n', '[', ']', '…', '/', '_', '😀', 'src/x.ts', '[…3 more characters cut]', '[…12 more characters cut]'];
  let seed = 7;
  const next = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  for (let i = 0; i < 3000; i++) cases.push(Array.from({ length: 1 + next(24) }, () => alphabet[next(alphabet.length)]).join(''));
  for (const c of cases) assert.equal(withoutCutTokens(c), reference(c), JSON.stringify(c));
  assert.deepEqual([...identifiers('see src/kernel.ts and loadSess […120 more characters cut] done').keys()], ['src/kernel.ts']);
  // A long unbroken run before a marker, where the regex retried the run from every position.
  const run = `${'q'.repeat(200_000)} […9 more characters cut]`;
  assert.equal(withoutCutTokens(run), ' ');
});

// issue 35, target 1: clip collapsed a whole tool output (megabytes) to keep 200 characters of it.
test('clip keeps what collapsing the whole text would, reading only a prefix of a long one', () => {
  const whole = (text: string, max: number): string => {
    const t = text.replace(/\s+/g, ' ').trim();
    return t.length <= max ? t : `${t.slice(0, max - 1)}…`;
  };
  const cases = [
    '',
    '   ',
    'short line',
    `  ${'word '.repeat(10)}`,
    `${'a'.repeat(39)} `, // the 40th character is trailing white space: not cut
    `${'a'.repeat(40)}\n\n\n   `,
    `${'a'.repeat(41)}`,
    `${' \n\t'.repeat(500)}${'x y '.repeat(30)}`, // a long run of white space before the words
    `${'line one\n'.repeat(3)}${' '.repeat(300)}end`,
    `${'é🙂 '.repeat(5000)}`,
    `${'token '.repeat(200_000)}`,
    // Lines handed back as they are (lone spaces only) beside lines that need collapsing.
    'a b c',
    ' a b ',
    'a  b',
    'a\tb',
    'a\nb',
    'a\u00a0b',
    'a\u2003 b',
  ];
  for (const text of cases) {
    for (const max of [1, 2, 5, 40, 200]) assert.equal(clip(text, max), whole(text, max), `${JSON.stringify(text.slice(0, 30))} at ${max}`);
  }
});

// issue 35, target 1: the summarizer's word scan made a match array for every word of a prompt,
// most of what a long compaction allocated. The scan by character codes finds the same runs.
test('eachToken finds the runs the token pattern matches, and identifiers and features read them as before', () => {
  const pattern = /[\w$@.:/~+-]+/g;
  const runs = (text: string): string[] => {
    const out: string[] = [];
    eachToken(text, (start, end) => out.push(`${start}:${text.slice(start, end)}`));
    return out;
  };
  const alphabet = ['a', 'Z', '9', '_', '$', '@', '.', ':', '/', '~', '+', '-', ' ', '\n', '\t', '`', ',', 'é', '😀', '漢', '[', '…', 'src/a.ts', 'fooBar', 'v1.2.3', 'E1234', 'EACCES', 'deadbeef1', 'the', 'fixed'];
  let seed = 11;
  const next = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  for (let i = 0; i < 3000; i++) {
    const text = Array.from({ length: next(40) }, () => alphabet[next(alphabet.length)]).join('');
    assert.deepEqual(runs(text), [...text.matchAll(pattern)].map((m) => `${m.index}:${m[0]}`), JSON.stringify(text));
  }
  const line = 'Fixed `loadSession` in src/kernel.ts (v2.1.0, commit deadbeef1): the error EACCES is gone, 1500ms.';
  assert.deepEqual([...identifiers(line)], [['loadSession', 'symbol'], ['src/kernel.ts', 'path'], ['v2.1.0', 'number'], ['deadbeef1', 'number'], ['EACCES', 'number'], ['1500ms', 'number']]);
  assert.deepEqual(features(line), { paths: 1, identifiers: 2, numbers: 4, keywords: 2 });
});

test('an identifier an entry names twice is one mention of that entry', () => {
  const entries = [
    { index: 0, kind: 'ai' as const, text: 'open src/a.ts, then src/a.ts again and src/b.ts', isError: false },
    { index: 1, kind: 'out' as const, text: 'src/a.ts src/a.ts src/a.ts', isError: false },
    { index: 2, kind: 'user' as const, text: 'and src/b.ts', isError: false },
  ];
  const refs = runSteps(References.of(entries));
  assert.equal(refs.after('src/a.ts', -1), 1 + 0.34);
  assert.equal(refs.after('src/a.ts', 0), 0.34);
  assert.equal(refs.after('src/b.ts', -1), 2);
  assert.deepEqual(refs.ranked(), ['src/b.ts', 'src/a.ts']);
  assert.ok(refs.spoken.has('src/a.ts') && refs.spoken.has('src/b.ts'));
});

// Seen in a real replay's notes: "- - Loads messages via `load_session_messages/1`".
test('a finding written as a list item is kept without its own bullet', () => {
  const transcript = [
    userLine('explain how the transcript export loads its messages'),
    aiLine('Here is how it works:\n- Loads messages via `load_session_messages/1` filtering by `is_nil(subagent_id)`\n- Calls `TranscriptRenderer.render(messages, opts)` with the `session_cwd` option'),
  ].join('\n');
  const out = extractSummary(buildSummaryPrompt({ transcript }), 4000);
  assert.ok(out.includes('- Loads messages via `load_session_messages/1`'), out);
  assert.ok(!/^- (?:[-*•]|\d+[.)]) /m.test(out), `a bullet inside a bullet:\n${out}`);
});
