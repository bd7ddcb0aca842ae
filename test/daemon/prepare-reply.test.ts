// encodePrepareReply: the assembled bytes equal JSON.stringify of the result for every shape,
// with or without inline images, a part's kept bytes serve the next reply that carries the same
// part object, and an inline image is read and encoded once for the replies that carry it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Result } from '../../protocol/methods.ts';
import { encodePrepareReply } from '../../daemon/prepare-reply.ts';
import { inlineImages } from '../../strategies/projection.ts';

type Reply = Result<'prepare'>;

function reply(inputs: Reply['inputs'], extra: Partial<Reply> = {}): Reply {
  return {
    prepared_id: 'p-1',
    head: 42,
    system: 'You are an agent.\nÜnïcödé → "quoted" \\ back\u2028slash',
    inputs,
    tools: [{ name: 'read', description: 'reads', input_schema: { type: 'object', properties: { p: { type: 'string' } } } }],
    compacted: false,
    observation: { session: 's', notes: ['a note'] } as unknown as Reply['observation'],
    ...extra,
  };
}

const parts = {
  text: { type: 'text' as const, text: 'plain ascii' },
  emoji: { type: 'text' as const, text: 'emoji 🙂 and lone \ud800 surrogate' },
  call: { type: 'tool_call' as const, id: 'c1', name: 'read', arguments: { path: 'src/ä.ts', n: [1, 2.5, null, true] } },
  result: { type: 'tool_result' as const, call_id: 'c1', is_error: false, content: [{ type: 'text' as const, text: 'x\ny' }] },
};

test('the bytes equal JSON.stringify of the result', () => {
  const cases: Reply[] = [
    reply([]),
    reply([{ role: 'user', content: [parts.text, parts.emoji] }]),
    reply([
      { role: 'user', content: [parts.text] },
      { role: 'assistant', content: [parts.call] },
      { role: 'tool', content: [parts.result] },
      { role: 'assistant', content: [] },
    ]),
    reply([{ role: 'user', content: [parts.text] }], { compacted: true, head: 0 }),
  ];
  for (const r of cases) assert.equal(encodePrepareReply(r).toString('utf8'), JSON.stringify(r));
});

test('shapes it does not assemble are serialized whole, still byte-identical', () => {
  const odd = { content: [parts.text], role: 'user' } as Reply['inputs'][number];
  const extraKey = { role: 'user', content: [parts.text], cache: true } as unknown as Reply['inputs'][number];
  const inherited = Object.assign(Object.create({ inherited: 'not written' }) as object, { role: 'user', content: [parts.text] }) as Reply['inputs'][number];
  const roleOnly = { role: 'user' } as unknown as Reply['inputs'][number];
  for (const r of [reply([odd]), reply([extraKey]), reply([inherited]), reply([roleOnly])]) assert.equal(encodePrepareReply(r).toString('utf8'), JSON.stringify(r));
  const reordered = { head: 1, prepared_id: 'x', system: '', inputs: [], tools: [], compacted: false, observation: {} } as unknown as Reply;
  assert.equal(encodePrepareReply(reordered).toString('utf8'), JSON.stringify(reordered));
});

test('a part object shared by two replies is encoded for the first and reused for the second', () => {
  const shared = { type: 'text' as const, text: 'kept' };
  const first = encodePrepareReply(reply([{ role: 'user', content: [shared] }]));
  // The kept bytes are what is used: a (forbidden) change to the part after it was encoded does
  // not reach the next reply. This pins the contract that parts are immutable once projected.
  (shared as { text: string }).text = 'changed';
  const second = encodePrepareReply(reply([{ role: 'assistant', content: [shared] }]));
  assert.match(first.toString(), /"kept"/);
  assert.match(second.toString(), /"role":"assistant","content":\[\{"type":"text","text":"kept"\}\]/);
});

test('long texts built afresh are found by their content, and a system prompt never stands in for a text part', () => {
  const long = `${'line of a running summary\n'.repeat(100)}é`;
  const first = reply([{ role: 'user', content: [{ type: 'text', text: long }] }], { system: long });
  assert.equal(encodePrepareReply(first).toString('utf8'), JSON.stringify(first));
  // New objects and a new (equal) string, as a summary read from storage again would be.
  const again = reply([{ role: 'user', content: [{ type: 'text', text: [long].join('') }] }], { system: `${long}` });
  assert.equal(encodePrepareReply(again).toString('utf8'), JSON.stringify(again));
  const other = reply([{ role: 'user', content: [{ type: 'text', text: `${long}!` }] }]);
  assert.equal(encodePrepareReply(other).toString('utf8'), JSON.stringify(other));
});

const image = (hash: string) => ({ type: 'image' as const, hash, media_type: 'image/png', width: 8, height: 13 });

/** Payload bytes by hash, counting reads; hashes not listed are gone. */
function payloads(bytes: Record<string, Buffer>) {
  const reads: string[] = [];
  return { reads, bytesOf: (hash: string) => (reads.push(hash), bytes[hash]) };
}

test('inline images: the bytes equal JSON.stringify of the result with its images inlined', () => {
  // Hashes unique to this test: kept bytes are found by the part's JSON, which names the hash.
  const { bytesOf } = payloads({ ['1'.repeat(64)]: Buffer.from('frame one'), ['2'.repeat(64)]: Buffer.from([0, 255, 7]) });
  const shot = { type: 'tool_result' as const, call_id: 'c1', is_error: false, content: [{ type: 'text' as const, text: 'screenshot' }, image('2'.repeat(64))] };
  const reordered = { content: [image('2'.repeat(64))], call_id: 'c2', is_error: false, type: 'tool_result' as const };
  const cases: Reply[] = [
    reply([{ role: 'user', content: [{ type: 'text', text: '[archive frame 1 of 2]' }, image('1'.repeat(64))] }]),
    reply([{ role: 'assistant', content: [parts.call] }, { role: 'tool', content: [shot, parts.result] }]),
    reply([{ role: 'user', content: [image('3'.repeat(64)), parts.emoji] }]),
    reply([{ role: 'tool', content: [reordered] }]),
    reply([{ content: [image('1'.repeat(64))], role: 'user' }]),
  ];
  for (let round = 0; round < 2; round++) {
    for (const r of cases) {
      const expected = JSON.stringify({ ...r, inputs: inlineImages(r.inputs, bytesOf) });
      assert.equal(encodePrepareReply(r, { inlineImages: bytesOf }).toString('utf8'), expected, `round ${round}`);
    }
  }
  const odd = { head: 1, prepared_id: 'x', system: '', inputs: cases[0]!.inputs, tools: [], compacted: false, observation: {} } as unknown as Reply;
  assert.equal(encodePrepareReply(odd, { inlineImages: bytesOf }).toString('utf8'), JSON.stringify({ ...odd, inputs: inlineImages(odd.inputs, bytesOf) }));
  assert.doesNotMatch(encodePrepareReply(cases[0]!).toString('utf8'), /"data"/, 'without the option images go by reference');
});

test('an inline image is read and encoded once for every reply that carries it, a gone one is read again', () => {
  const frame = '4'.repeat(64);
  const { reads, bytesOf } = payloads({ [frame]: Buffer.from('frame bytes') });
  const first = encodePrepareReply(reply([{ role: 'user', content: [image(frame)] }]), { inlineImages: bytesOf });
  assert.deepEqual(reads, [frame]);
  // New part objects for the same image, as after the kernel was unloaded, and another session's reply.
  const second = encodePrepareReply(reply([{ role: 'user', content: [image(frame)] }]), { inlineImages: bytesOf });
  encodePrepareReply(reply([{ role: 'tool', content: [{ type: 'tool_result', call_id: 'c', is_error: false, content: [image(frame)] }] }]), { inlineImages: bytesOf });
  assert.deepEqual(reads, [frame], 'no payload read after the first');
  assert.ok(second.equals(first));
  assert.match(first.toString(), new RegExp(`"data":"${Buffer.from('frame bytes').toString('base64')}"`));
  const gone = '5'.repeat(64);
  encodePrepareReply(reply([{ role: 'user', content: [image(gone)] }]), { inlineImages: bytesOf });
  encodePrepareReply(reply([{ role: 'user', content: [image(gone)] }]), { inlineImages: bytesOf });
  assert.deepEqual(reads.slice(1), [gone, gone], 'an elided image is not kept as elided');
});

test('a large kept image goes out as the same bytes in every reply, never copied into the reply', () => {
  const frame = '6'.repeat(64);
  const png = Buffer.alloc(30_000, 7);
  const { bytesOf } = payloads({ [frame]: png });
  const make = (text: string): Reply => reply([{ role: 'user', content: [{ type: 'text', text }, image(frame)] }]);
  const first = encodePrepareReply(make('frame 1 of 1'), { inlineImages: bytesOf });
  const second = encodePrepareReply(make('frame 1 of 1, again'), { inlineImages: bytesOf });
  assert.equal(second.toString(), JSON.stringify({ ...make('frame 1 of 1, again'), inputs: inlineImages(make('frame 1 of 1, again').inputs, bytesOf) }));
  const imageChunk = (r: typeof first) => r.chunks.find((c) => c.length > png.length);
  assert.ok(imageChunk(first) !== undefined, 'the image is a piece of its own');
  assert.equal(imageChunk(second), imageChunk(first), 'the same buffer both times');
  assert.ok(first.chunks.length <= 3, 'the short pieces around it are joined');
});
