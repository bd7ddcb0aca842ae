// snapcompact's archive text: one marked line per event, calls as `→ name(k = v)`, images as
// markers, the caps with the cut said in place, reasoning and capability notices left out, and
// appending newly evicted rows giving the same text as archiving them all at once.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { StoredRow } from '../../protocol/rows.ts';
import { summaryText } from '../../strategies/harness/summary-text.ts';
import { extendArchive } from '../../strategies/snapcompact/archive.ts';
import { archiveText } from '../../strategies/snapcompact/archive-text.ts';

let seq = 0;
function row(body: StoredRow['body'], row_class: StoredRow['row_class'] = 'other'): StoredRow {
  seq += 1;
  return { session: 's', seq, row_class, key: null, created_at: 0, body };
}
const text = (t: string) => ({ type: 'text' as const, text: t });
const userRow = (t: string, origin: 'user' | 'notes' | 'mail' = 'user'): StoredRow => row({ kind: 'user', origin, content: [text(t)] }, 'user');
const aiRow = (...content: Extract<StoredRow['body'], { kind: 'assistant' }>['content']): StoredRow => row({ kind: 'assistant', content });
const outRow = (callId: string, t: string, isError = false): StoredRow => row({ kind: 'tool_result', call_id: callId, is_error: isError, content: [text(t)] });
const image = (hash: string, width: number, height: number, elided?: boolean) => ({ type: 'image' as const, hash, media_type: 'image/png', width, height, ...(elided === undefined ? {} : { elided }) });

describe('snapcompact archive text', () => {
  test('one marked line per event, calls like chat-completion calls', () => {
    const rows = [
      userRow('fix the parser'),
      aiRow(text('Reading it.'), { type: 'tool_call', id: 'call_1', name: 'read_file', arguments: { path: 'src/parse.ts', limit: 200 } }),
      outRow('call_1', 'export function parse() {}'),
      outRow('call_2', 'ENOENT', true),
      userRow('remember the deadline', 'notes'),
    ];
    assert.equal(
      archiveText(rows),
      [
        '¶user: fix the parser',
        '¶ai: Reading it.',
        '→ read_file(path = "src/parse.ts", limit = 200)',
        '¶out call_1: export function parse() {}',
        '¶out call_2 (error): ENOENT',
        '¶user (notes): remember the deadline',
      ].join('\n'),
    );
  });

  test('images are markers with the first 8 hex digits of the hash and the size', () => {
    const h = `0123abcd${'e'.repeat(56)}`;
    const rows = [
      row({ kind: 'user', origin: 'user', content: [text('look:'), image(h, 640, 480)] }, 'user'),
      row({ kind: 'tool_result', call_id: 'c', is_error: false, content: [image(h, 32, 16, true)] }),
    ];
    assert.equal(archiveText(rows), '¶user: look: [image 0123abcd 640x480]\n¶out c: [image 0123abcd 32x16] [image elided and is no longer available]');
  });

  test('messages, results and arguments are capped at 8000 / 1600 / 1500 characters, the cut said in place', () => {
    const [msg, res, args] = archiveText([
      userRow('m'.repeat(8010)),
      outRow('c', 'r'.repeat(1700)),
      aiRow({ type: 'tool_call', id: 'c', name: 'write', arguments: { body: 'a'.repeat(2000) } }),
    ]).split('\n');
    assert.equal(msg, `¶user: ${'m'.repeat(8000)} […10 more characters cut]`);
    assert.equal(res, `¶out c: ${'r'.repeat(1600)} […100 more characters cut]`);
    // The call line `→ write(body = "aaa…")` keeps 1500 characters after `→ write(`.
    const kept = '→ write('.length + 1500;
    const full = `→ write(body = "${'a'.repeat(2000)}")`;
    assert.equal(args, `${full.slice(0, kept)} […${full.length - kept} more characters cut]`);
    // Exactly at the cap nothing is cut.
    assert.equal(archiveText([userRow('m'.repeat(8000))]), `¶user: ${'m'.repeat(8000)}`);
  });

  test('a cap never splits a surrogate pair', () => {
    const line = archiveText([userRow(`${'m'.repeat(7999)}😀tail`)]);
    assert.equal(line, `¶user: ${'m'.repeat(7999)} […6 more characters cut]`);
    assert.ok(!/[\ud800-\udbff](?![\udc00-\udfff])/.test(line), 'no lone high surrogate');
  });

  test('reasoning items are left out, readable or encrypted; the summarizer text keeps readable ones', () => {
    const rows = [aiRow({ type: 'reasoning', provider: 'openai', text: 'thinking about it', encrypted: 'gAAAA' }, text('done'))];
    assert.equal(archiveText(rows), '¶ai: done');
    assert.equal(summaryText(rows), '¶ai (thinking): thinking about it\n¶ai: done');
  });

  test('capability and image-fit notices are omitted; excursions stay', () => {
    const rows = [
      userRow('a'),
      row({ kind: 'notice', body: { notice: 'capabilities_changed', context: 'tools: grep, read' } }),
      row({ kind: 'notice', body: { notice: 'image_fit', from_hash: 'a'.repeat(64), to: image('b'.repeat(64), 10, 10), reason: 'too large' } }, 'image_fit'),
      row({ kind: 'notice', body: { notice: 'excursion', branch: 'b1' } }),
      row({ kind: 'notice', body: { notice: 'excursion_return', branch: 'b1', marker_seq: 3, outcome: 'found it' } }),
    ];
    assert.equal(archiveText(rows), '¶user: a\n¶note: excursion started on branch b1\n¶note: excursion b1 returned: found it');
  });

  test("a message's own line breaks are indented, so quoted markers cannot start an event", () => {
    assert.equal(archiveText([outRow('c', 'line one\n¶user: not really')]), '¶out c: line one\n  ¶user: not really');
  });

  test('the archive extended by newly evicted rows is the text of all the rows at once, and a row archived twice is not', () => {
    const first = [userRow('one'), aiRow(text('two'))];
    const later = [outRow('c', 'three'), userRow('four')];
    const a = extendArchive('', [], first);
    assert.equal(a.text, archiveText(first));
    const b = extendArchive(a.text, a.marks, later);
    assert.equal(b.text, archiveText([...first, ...later]));
    // Each row's mark is where its line starts.
    assert.deepEqual(
      b.marks.map(([at]) => b.text.slice(at).split('\n')[0]),
      ['¶user: one', '¶ai: two', '¶out c: three', '¶user: four'],
    );
    // An exchange-level cut keeps its opener in the tail after archiving it: the next extension sees it again.
    assert.equal(extendArchive(b.text, b.marks, [later[1]!]).text, b.text);
    const notesOnly = [row({ kind: 'notice', body: { notice: 'capabilities_changed', context: 'x' } })];
    assert.equal(extendArchive(b.text, b.marks, notesOnly).text, b.text, 'rows with no lines add nothing, not even a newline');
    assert.equal(archiveText([]), '');
  });
});
