// Provider projection: rows to plain inputs for a target model.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { OutPart, PlainInput } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { inputsTokens, textTokens } from '../../strategies/estimate.ts';
import { forModel, inlineImages, plainTarget, Projector, tokenCounter, rowInputs, rowTokens, type ProjectionTarget } from '../../strategies/projection.ts';

let seq = 0;
function row(body: StoredRow['body'], row_class: StoredRow['row_class'] = 'other'): StoredRow {
  seq += 1;
  return { session: 's', seq, row_class, key: null, created_at: 0, body };
}
const img = { type: 'image' as const, hash: 'a'.repeat(64), media_type: 'image/png', width: 10, height: 20 };
const text = (t: string) => ({ type: 'text' as const, text: t });
function callRow(...ids: string[]): StoredRow {
  return row({ kind: 'assistant', content: ids.map((id) => ({ type: 'tool_call' as const, id, name: 'run', arguments: {} })) });
}
type ResultContent = Extract<StoredRow['body'], { kind: 'tool_result' }>['content'];
function resultRow(callId: string, content: ResultContent, extra: { orphan?: true; is_error?: boolean } = {}): StoredRow {
  return row({ kind: 'tool_result', call_id: callId, is_error: extra.is_error ?? false, content, ...(extra.orphan === true ? { orphan: true as const } : {}) });
}
const userRow = (t: string): StoredRow => row({ kind: 'user', origin: 'user', content: [text(t)] }, 'user');
/** The (call_id, is_error, first text) of every tool_result part, in request order. */
function results(inputs: readonly PlainInput[]): Array<[string, boolean, string]> {
  return inputs.flatMap((i) => i.content.flatMap((p) => (p.type === 'tool_result' ? [[p.call_id, p.is_error, p.content[0]?.type === 'text' ? p.content[0].text : ''] as [string, boolean, string]] : [])));
}
function onlyText(p: OutPart | undefined): string {
  assert.ok(p !== undefined && p.type === 'text', `expected a text part, got ${JSON.stringify(p)}`);
  return p.text;
}
/** A tool result's text parts as projected alone. */
function resultText(r: StoredRow, target: ProjectionTarget): string {
  const part = rowInputs(r, target)[0]!.content[0]!;
  assert.equal(part.type, 'tool_result');
  return part.type === 'tool_result' ? onlyText(part.content[0]) : '';
}
const lines = (n: number): string => Array.from({ length: n }, (_, i) => `line ${String(i).padStart(4, '0')} of the build log`).join('\n');
const capped = (maxOutputTokens: number): ProjectionTarget => ({ ...plainTarget('sess-1'), maxOutputTokens });
const MARKER = /\n?\[… (\d+) characters omitted; transcript_read \{"session": "sess-1", "from_seq": (\d+), "to_seq": (\d+)\} returns all of it\]\n?/;

describe('projection', () => {
  test('consecutive tool results of one turn become one tool input', () => {
    const rows = [
      row({ kind: 'assistant', content: [{ type: 'tool_call', id: 'c1', name: 'a', arguments: {} }, { type: 'tool_call', id: 'c2', name: 'b', arguments: {} }] }),
      row({ kind: 'tool_result', call_id: 'c1', is_error: false, content: [{ type: 'text', text: 'one' }] }),
      row({ kind: 'tool_result', call_id: 'c2', is_error: true, content: [{ type: 'text', text: 'two' }] }),
    ];
    const out = forModel(rows, { ...plainTarget('s'), provider: 'anthropic' });
    assert.equal(out.length, 2);
    assert.deepEqual(out[1]!.content.map((p) => (p.type === 'tool_result' ? [p.call_id, p.is_error] : null)), [['c1', false], ['c2', true]]);
  });

  test("a tool result's images follow it as a user input", () => {
    const out = forModel([callRow('c1'), row({ kind: 'tool_result', call_id: 'c1', is_error: false, content: [{ type: 'text', text: 'shot' }, img] })], { ...plainTarget('s'), provider: 'openai' });
    assert.deepEqual(out.map((i) => i.role), ['assistant', 'tool', 'user']);
    assert.deepEqual(out[2]!.content[1], img);
  });

  test('encrypted reasoning goes only to the provider that wrote it; readable reasoning goes anywhere', () => {
    const r = row({
      kind: 'assistant',
      content: [
        { type: 'reasoning', provider: 'anthropic', encrypted: 'opaque' },
        { type: 'reasoning', provider: 'anthropic', text: 'thought', encrypted: 'opaque2' },
        { type: 'text', text: 'answer' },
      ],
    });
    const same = forModel([r], { ...plainTarget('s'), provider: 'anthropic' })[0]!.content;
    assert.equal(same.filter((p) => p.type === 'reasoning').length, 2);
    const other = forModel([r], { ...plainTarget('s'), provider: 'openai' })[0]!.content;
    assert.deepEqual(other, [{ type: 'reasoning', text: 'thought' }, { type: 'text', text: 'answer' }]);
    const onlyOpaque = row({ kind: 'assistant', content: [{ type: 'reasoning', provider: 'anthropic', encrypted: 'x' }] });
    assert.deepEqual(forModel([onlyOpaque], { ...plainTarget('s'), provider: 'openai' }), []);
  });

  test('image-fit notices are not inputs; notes and mail are marked as such', () => {
    const out = forModel(
      [
        row({ kind: 'notice', body: { notice: 'image_fit', from_hash: 'b'.repeat(64), to: img, reason: 'too large' } }, 'image_fit'),
        row({ kind: 'user', origin: 'mail', content: [{ type: 'text', text: 'from a colleague' }] }, 'user'),
      ],
      plainTarget('s'),
    );
    assert.deepEqual(out, [{ role: 'user', content: [{ type: 'text', text: '[mail]' }, { type: 'text', text: 'from a colleague' }] }]);
  });

  test('inline images carry their bytes; a missing payload reads as elided', () => {
    const inputs = forModel([row({ kind: 'user', origin: 'user', content: [img, { ...img, hash: 'c'.repeat(64) }] }, 'user')], plainTarget('s'));
    const out = inlineImages(inputs, (h) => (h === img.hash ? Buffer.from('png!') : undefined));
    assert.deepEqual(out[0]!.content[0], { ...img, data: Buffer.from('png!').toString('base64') });
    assert.deepEqual(out[0]!.content[1], { type: 'text', text: '[image elided and is no longer available]' });
    assert.equal(inputs[0]!.content[0]!.type === 'image' && 'data' in inputs[0]!.content[0]!, false, 'the input is not mutated');
  });
});

describe('capped outputs', () => {
  test('a tool result over the cap goes out as head, the exact pointer to its row, and tail; the row keeps everything', () => {
    const full = lines(2000);
    const r = resultRow('c1', [text(full)]);
    const before = structuredClone(r);
    const out = resultText(r, capped(500));
    assert.deepEqual(r, before, 'the durable row is not changed');
    const m = MARKER.exec(out);
    assert.ok(m !== null, out.slice(0, 200));
    assert.equal(m[0].trim(), `[… ${m[1]} characters omitted; transcript_read {"session": "sess-1", "from_seq": ${r.seq}, "to_seq": ${r.seq}} returns all of it]`);
    const head = out.slice(0, m.index);
    const tail = out.slice(m.index + m[0].length);
    assert.ok(full.startsWith(head) && head.length > 0);
    assert.ok(full.endsWith(tail) && tail.length > 0);
    assert.equal(Number(m[1]), full.length - head.length - tail.length - 1, 'N counts the characters left out');
    assert.ok(textTokens(out) <= 500, `estimate ${textTokens(out)} is within the cap`);
    assert.ok(head.length > tail.length, 'the head gets the larger share');
    assert.ok(head.endsWith('of the build log') && tail.startsWith('line '), 'cuts fall on line boundaries');
  });

  test('the same row and target give the same bytes every time; another seq points elsewhere', () => {
    const r = resultRow('c1', [text(lines(1500))]);
    assert.equal(resultText(r, capped(300)), resultText(structuredClone(r), capped(300)));
    const moved = { ...structuredClone(r), seq: r.seq + 7 };
    assert.match(resultText(moved, capped(300)), new RegExp(`"from_seq": ${r.seq + 7}, "to_seq": ${r.seq + 7}`));
  });

  test('a text without newlines is cut on code points, never inside a surrogate pair', () => {
    const full = '🙂é'.repeat(5000);
    const out = resultText(resultRow('c1', [text(full)]), capped(200));
    assert.match(out, MARKER);
    assert.equal(Buffer.from(out, 'utf8').toString('utf8'), out, 'no lone surrogate');
    assert.ok(textTokens(out) <= 200);
    const m = MARKER.exec(out)!;
    const head = out.slice(0, m.index);
    const tail = out.slice(m.index + m[0].length);
    assert.equal(Number(m[1]), [...full].length - [...head].length - [...tail].length, 'N counts code points');
  });

  test('a user paste over the cap is capped too; text under the cap and an uncapped target are untouched', () => {
    const paste = lines(1000);
    const r = row({ kind: 'user', origin: 'user', content: [text(paste), img] }, 'user');
    const [input] = rowInputs(r, capped(400));
    assert.match(onlyText(input!.content[0]), MARKER);
    assert.deepEqual(input!.content[1], img, 'the image keeps its place');
    assert.equal(onlyText(rowInputs(r, plainTarget('sess-1'))[0]!.content[0]), paste);
    assert.equal(resultText(resultRow('c1', [text('short output')]), capped(400)), 'short output');
  });

  test('several text parts over the cap together are capped as one text', () => {
    const r = resultRow('c1', [text(lines(300)), text(lines(300))]);
    const part = rowInputs(r, capped(200))[0]!.content[0]!;
    assert.ok(part.type === 'tool_result');
    assert.equal(part.content.length, 1);
    assert.match(onlyText(part.content[0]), MARKER);
  });

  test('a row estimates at what the request carries for it', () => {
    const call = callRow('c1');
    const r = resultRow('c1', [text(lines(5000))]);
    const target = capped(1000);
    assert.ok(rowTokens(r, target) < 1100, `capped row estimates ${rowTokens(r, target)}`);
    assert.ok(rowTokens(r, plainTarget('sess-1')) > 30_000);
    assert.equal(rowTokens(call, target) + rowTokens(r, target), inputsTokens(forModel([call, r], target)));
  });
});

describe('results of one turn share the output cap', () => {
  test('a turn with four parallel calls sends each result within a quarter of the cap, and the counter agrees', () => {
    const call = row({ kind: 'assistant', content: ['a', 'b', 'c', 'd'].map((id) => ({ type: 'tool_call' as const, id, name: 'grep', arguments: { q: id } })) });
    const results = ['a', 'b', 'c', 'd'].map((id) => resultRow(id, [text(lines(3000))]));
    const rows = [call, ...results];
    const target = capped(1000);
    const out = forModel(rows, target);
    const tool = out.find((i) => i.role === 'tool')!;
    const resultTokens = inputsTokens([tool]);
    assert.ok(resultTokens <= 1000 + 100, `the turn's results together estimate ${resultTokens}`);
    const count = tokenCounter(rows, target);
    // Sizing sees what the request carries; each merged result adds only its own input overhead.
    const counted = rows.reduce((n, r) => n + count(r), 0);
    assert.ok(counted >= inputsTokens(out) && counted <= inputsTokens(out) + 3 * 12, `${counted} vs ${inputsTokens(out)}`);
    // A single call keeps the whole cap.
    const one = forModel([callRow('a'), resultRow('a', [text(lines(3000))])], target);
    assert.ok(inputsTokens([one.find((i) => i.role === 'tool')!]) > 900);
  });
});

describe('capped tool-call arguments and assistant text', () => {
  const call = (args: Record<string, unknown>, textPart = 'writing the file'): StoredRow => row({ kind: 'assistant', content: [{ type: 'text', text: textPart }, { type: 'tool_call', id: 'w1', name: 'write_file', arguments: args }] });

  test('a call that wrote a large file goes out with its long strings capped, keys and short values kept', () => {
    const file = Array.from({ length: 4000 }, (_, i) => `line ${i} of the generated module`).join('\n');
    const args = JSON.parse(`{"path": "src/big.ts", "__proto__": "kept", "content": ${JSON.stringify(file)}, "meta": {"notes": ${JSON.stringify(file)}}}`) as Record<string, unknown>;
    const r = call(args);
    const target = capped(800);
    const out = rowInputs(r, target)[0]!.content.find((p) => p.type === 'tool_call')!;
    assert.ok(out.type === 'tool_call');
    assert.deepEqual(Object.keys(out.arguments), ['path', '__proto__', 'content', 'meta'], 'every key, in order');
    assert.equal(out.arguments.path, 'src/big.ts');
    assert.equal(Object.getOwnPropertyDescriptor(out.arguments, '__proto__')?.value, 'kept');
    const content = out.arguments.content as string;
    assert.match(content, /^line 0 of the generated module\n/);
    assert.match(content, /\[… \d+ characters omitted; transcript_read \{"session": "sess-1", "from_seq": \d+, "to_seq": \d+\} returns all of it\]/);
    assert.match(content, /line 3999 of the generated module$/);
    assert.ok(rowTokens(r, target) < 800 + 100, `the call estimates ${rowTokens(r, target)}`);
    assert.equal((r.body as { content: Array<{ arguments?: { content?: string } }> }).content[1]!.arguments!.content, file, 'the row keeps everything');
    assert.deepEqual(rowInputs(r, target), rowInputs(structuredClone(r), target), 'same row, same bytes');
  });

  test('arguments and text under the cap, and an uncapped target, are untouched', () => {
    const r = call({ path: 'a.ts', content: 'x'.repeat(2000) }, 'y'.repeat(5000));
    assert.deepEqual(rowInputs(r, plainTarget('s'))[0]!.content, (r.body as { content: unknown[] }).content);
    const small = call({ path: 'a.ts' });
    assert.deepEqual(rowInputs(small, capped(800))[0]!.content, (small.body as { content: unknown[] }).content);
  });

  test("an assistant row's text, calls and unsigned reasoning share one cap; signed reasoning is exact", () => {
    const big = 'q'.repeat(20_000);
    const r = row({
      kind: 'assistant',
      content: [
        { type: 'reasoning', provider: 'anthropic', text: big, encrypted: 'sig' },
        { type: 'text', text: big },
        { type: 'tool_call', id: 'w1', name: 'write_file', arguments: { path: 'a.ts', content: big } },
      ],
    });
    const own = rowInputs(r, { ...capped(900), provider: 'anthropic' })[0]!;
    assert.ok(own.content[0]!.type === 'reasoning' && own.content[0]!.text === big, 'signed reasoning goes back exactly');
    const rest = inputsTokens([{ role: 'assistant', content: own.content.slice(1) }]);
    assert.ok(rest <= 900 + 40, `text and call together estimate ${rest}`);
    // For another provider the signature is dropped, and the readable text becomes history to cap.
    const other = rowInputs(r, { ...capped(900), provider: 'openai' })[0]!;
    assert.ok(inputsTokens([other]) <= 900 + 60, `the whole row estimates ${inputsTokens([other])}`);
  });

  test('an OpenAI reasoning blob over the output cap is left out (its summary stays); a signed Anthropic block never is', () => {
    const blob = 'E'.repeat(60_000);
    const openai = row({ kind: 'assistant', provider: 'openai', model: 'gpt-5-codex', content: [{ type: 'reasoning', provider: 'openai', text: 'plan: patch the config', encrypted: blob }, { type: 'text', text: 'patching' }] });
    const target = { ...capped(800), provider: 'openai', model: 'gpt-5-codex' };
    const [out] = rowInputs(openai, target);
    assert.deepEqual(out!.content[0], { type: 'reasoning', text: 'plan: patch the config' });
    assert.ok(rowInputs(openai, { ...target, maxOutputTokens: null })[0]!.content.some((p) => p.type === 'reasoning' && p.encrypted === blob), 'without a cap it goes back');
    const small = row({ kind: 'assistant', provider: 'openai', model: 'gpt-5-codex', content: [{ type: 'reasoning', provider: 'openai', encrypted: 'short-blob' }] });
    assert.ok(rowInputs(small, target)[0]!.content.some((p) => p.type === 'reasoning' && p.encrypted === 'short-blob'), 'a blob under the cap goes back');
    const anthropic = row({ kind: 'assistant', content: [{ type: 'reasoning', provider: 'anthropic', text: 't', encrypted: blob }] });
    assert.ok(rowInputs(anthropic, { ...capped(800), provider: 'anthropic' })[0]!.content.some((p) => p.type === 'reasoning' && p.encrypted === blob));
  });

  test('a long assistant text is capped like a tool output; reasoning is never touched', () => {
    const thinking = 'z'.repeat(20_000);
    const r = row({ kind: 'assistant', content: [{ type: 'reasoning', provider: 'anthropic', text: thinking, encrypted: 'sig' }, { type: 'text', text: 'w'.repeat(20_000) }] });
    const [input] = rowInputs(r, { ...capped(500), provider: 'anthropic' });
    const parts = input!.content;
    assert.ok(parts[0]!.type === 'reasoning' && parts[0]!.text === thinking);
    assert.ok(parts[1]!.type === 'text' && parts[1]!.text.length < 2100 && parts[1]!.text.includes('characters omitted'));
  });
});

describe('every call answered', () => {
  test('a call with no result gets a synthetic error result before the next user input', () => {
    const out = forModel([userRow('go'), callRow('c1'), userRow('stop that')], plainTarget('s'));
    assert.deepEqual(out.map((i) => i.role), ['user', 'assistant', 'tool', 'user']);
    assert.deepEqual(results(out), [['c1', true, '[no result: the tool has not returned, or its run was interrupted]']]);
  });

  test("the synthetic result comes right after the turn's real results, in call order", () => {
    const out = forModel([callRow('c1', 'c2', 'c3'), resultRow('c2', [text('two')]), callRow('c4')], plainTarget('s'));
    assert.deepEqual(out.map((i) => i.role), ['assistant', 'tool', 'assistant', 'tool']);
    assert.deepEqual(results(out).map(([id, err]) => [id, err]), [['c2', false], ['c1', true], ['c3', true], ['c4', true]]);
    assert.equal(out[1]!.content.length, 3, "one tool input carries the turn's results");
  });

  test('a synthetic result goes after a real result whose images follow it', () => {
    const out = forModel([callRow('c1', 'c2'), resultRow('c1', [text('shot'), img])], plainTarget('s'));
    assert.deepEqual(out.map((i) => i.role), ['assistant', 'tool', 'user']);
    assert.deepEqual(results(out).map(([id]) => id), ['c1', 'c2']);
  });

  test('once the real result is among the rows, no synthetic one is sent', () => {
    const out = forModel([callRow('c1'), resultRow('c1', [text('done')]), userRow('thanks')], plainTarget('s'));
    assert.deepEqual(results(out), [['c1', false, 'done']]);
  });

  test('a result whose call is not among the rows sent goes out as text after nothing it could answer', () => {
    const out = forModel([resultRow('c0', [text('late')]), userRow('next'), resultRow('c1', [text('stray')], { is_error: true })], plainTarget('s'));
    assert.deepEqual(results(out), []);
    assert.deepEqual(out.map((i) => onlyText(i.content[0])), [
      '[result of tool call c0, which has no matching call]\nlate',
      'next',
      '[error result of tool call c1, which has no matching call]\nstray',
    ]);
  });
});

describe('orphan results', () => {
  test('a stored orphan result is a user text, never a tool result, even beside a call of the same id', () => {
    const orphan = resultRow('c1', [text('output nobody asked for')], { orphan: true });
    assert.deepEqual(rowInputs(orphan, plainTarget('s')), [{ role: 'user', content: [text('[result of tool call c1, which has no matching call]\noutput nobody asked for')] }]);
    const out = forModel([callRow('c1'), orphan], plainTarget('s'));
    assert.deepEqual(out.map((i) => i.role), ['assistant', 'tool', 'user']);
    assert.deepEqual(results(out).map(([id, err]) => [id, err]), [['c1', true]]);
  });
});

describe('images the target cannot read', () => {
  const blind: ProjectionTarget = { ...plainTarget('s'), readsImages: false };
  test('a user upload becomes its marker text', () => {
    const out = rowInputs(row({ kind: 'user', origin: 'user', content: [text('see'), img, { ...img, elided: true }] }, 'user'), blind);
    assert.deepEqual(out, [{ role: 'user', content: [text('see'), text('[image aaaaaaaa 10x20]'), text('[image elided and is no longer available]')] }]);
  });

  test("a tool output's images become markers inside the result, with nothing said to follow", () => {
    const out = forModel([callRow('c1'), resultRow('c1', [text('shot'), img])], blind);
    assert.deepEqual(out.map((i) => i.role), ['assistant', 'tool']);
    assert.deepEqual(out[1]!.content, [{ type: 'tool_result', call_id: 'c1', is_error: false, content: [text('shot'), text('[image aaaaaaaa 10x20]')] }]);
    assert.equal(JSON.stringify(out).includes('follow'), false);
  });
});

describe('encrypted reasoning routing', () => {
  const reasoning = (provider: string | undefined, model: string | undefined, partProvider?: string): StoredRow =>
    row({
      kind: 'assistant',
      ...(provider === undefined ? {} : { provider }),
      ...(model === undefined ? {} : { model }),
      content: [{ type: 'reasoning', ...(partProvider === undefined ? {} : { provider: partProvider }), text: 'readable', encrypted: 'opaque' }, text('answer')],
    });
  const sent = (r: StoredRow, provider: string | undefined, model: string | undefined): boolean => JSON.stringify(forModel([r], { ...plainTarget('s'), provider, model })).includes('opaque');

  test('openai encrypted reasoning goes only to the model that wrote it, when both models are known', () => {
    const r = reasoning('openai', 'gpt-5', 'openai');
    assert.equal(sent(r, 'openai', 'gpt-5'), true);
    assert.equal(sent(r, 'openai', 'gpt-5-mini'), false);
    assert.equal(sent(r, 'openai', undefined), true);
    assert.equal(sent(reasoning('openai', undefined, 'openai'), 'openai', 'gpt-5-mini'), true);
    assert.deepEqual(forModel([r], { ...plainTarget('s'), provider: 'openai', model: 'gpt-5-mini' })[0]!.content, [{ type: 'reasoning', text: 'readable' }, text('answer')]);
  });

  test('anthropic signatures go to any Claude model; an unlisted provider is held to its model', () => {
    assert.equal(sent(reasoning('anthropic', 'claude-opus-4-1', 'anthropic'), 'anthropic', 'claude-sonnet-4-5'), true);
    assert.equal(sent(reasoning('anthropic', 'claude-opus-4-1', 'anthropic'), 'openai', 'claude-opus-4-1'), false);
    assert.equal(sent(reasoning('google', 'gemini-2.5-pro', 'google'), 'google', 'gemini-2.5-flash'), false);
    assert.equal(sent(reasoning('google', 'gemini-2.5-pro', 'google'), 'google', 'gemini-2.5-pro'), true);
  });

  test("a reasoning part without its own provider takes the turn's provider", () => {
    assert.equal(sent(reasoning('anthropic', undefined), 'anthropic', 'claude-sonnet-4-5'), true);
    assert.equal(sent(reasoning(undefined, undefined), 'anthropic', 'claude-sonnet-4-5'), false);
  });
});

describe('Projector: forModel resumed row by row', () => {
  // A seeded mix of everything forModel treats specially: turns with several calls, results in
  // and out of order, results that never come, orphans, notices inside a turn, images.
  function mixedRows(seed: number, n: number): StoredRow[] {
    let s = seed;
    const next = (k: number): number => {
      s = (s * 1103515245 + 12345) % 2147483648;
      return s % k;
    };
    const rows: StoredRow[] = [];
    let open: string[] = [];
    let call = 0;
    while (rows.length < n) {
      const pick = next(10);
      if (pick === 0) rows.push(userRow(`ask ${rows.length}`));
      else if (pick <= 2) {
        const ids = Array.from({ length: 1 + next(3) }, () => `c${seed}-${call++}`);
        rows.push(callRow(...ids));
        open = ids;
      } else if (pick <= 6 && open.length > 0) {
        const id = open.splice(next(open.length), 1)[0]!;
        rows.push(resultRow(id, next(4) === 0 ? [text('shot'), img] : [text(lines(1 + next(3)))], { is_error: next(5) === 0 }));
      } else if (pick === 7) rows.push(resultRow(`gone-${rows.length}`, [text('late')], next(2) === 0 ? { orphan: true } : {}));
      else if (pick === 8) rows.push(row({ kind: 'notice', body: { notice: 'excursion', branch: 'b', phase: 'start' } } as StoredRow['body']));
      else rows.push(row({ kind: 'assistant', content: [text(`thinking about step ${rows.length}`)] }));
    }
    return rows;
  }

  test('every snapshot is forModel of the rows added so far, its tokens are their estimate, and later rows change no earlier snapshot', () => {
    const target = { ...plainTarget('sess-1'), maxImageEdgePx: 512 };
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const rows = mixedRows(seed, 120);
      const projector = new Projector(target);
      const taken: Array<{ k: number; inputs: PlainInput[]; json: string }> = [];
      rows.forEach((r, i) => {
        projector.add(r);
        const expected = forModel(rows.slice(0, i + 1), target);
        const snap = projector.snapshot();
        assert.deepEqual(snap.inputs, expected, `seed ${seed}, ${i + 1} rows`);
        assert.equal(snap.tokens, inputsTokens(expected, target.maxImageEdgePx), `seed ${seed}, ${i + 1} rows`);
        if (i % 7 === 0) taken.push({ k: i + 1, inputs: snap.inputs, json: JSON.stringify(snap.inputs) });
      });
      for (const t of taken) assert.equal(JSON.stringify(t.inputs), t.json, `seed ${seed}: the snapshot of ${t.k} rows changed`);
    }
  });

  test('continues only the rows it was fed, recognized by the objects at both ends', () => {
    const rows = [userRow('a'), callRow('x'), resultRow('x', [text('ok')]), userRow('b')];
    const projector = new Projector(plainTarget('sess-1'));
    assert.equal(projector.continues(rows), true);
    rows.slice(0, 3).forEach((r) => projector.add(r));
    assert.equal(projector.continues(rows), true);
    assert.equal(projector.continues(rows.slice(0, 2)), false);
    assert.equal(projector.continues(rows.slice(1)), false);
    assert.equal(projector.continues([...rows.slice(0, 2), { ...rows[2]! }, rows[3]!]), false);
  });
});
