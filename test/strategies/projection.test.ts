// Provider projection: rows to plain inputs for a target model.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { StoredRow } from '../../protocol/rows.ts';
import { forModel, inlineImages, plainTarget } from '../../strategies/projection.ts';

let seq = 0;
function row(body: StoredRow['body'], row_class: StoredRow['row_class'] = 'other'): StoredRow {
  seq += 1;
  return { session: 's', seq, row_class, key: null, created_at: 0, body };
}
const img = { type: 'image' as const, hash: 'a'.repeat(64), media_type: 'image/png', width: 10, height: 20 };

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
    const out = forModel([row({ kind: 'tool_result', call_id: 'c1', is_error: false, content: [{ type: 'text', text: 'shot' }, img] })], { ...plainTarget('s'), provider: 'openai' });
    assert.deepEqual(out.map((i) => i.role), ['tool', 'user']);
    assert.deepEqual(out[1]!.content[1], img);
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
