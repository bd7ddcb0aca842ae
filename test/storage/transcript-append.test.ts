// Appending rows: global seqs, idempotent keys, atomic batches, tool-call bookkeeping, settling a
// late tool result beside its call, images by bytes and by hash, and daemon notices.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlbedoError, type DomainCodeName } from '../../protocol/errors.ts';
import type { RowIn } from '../../protocol/rows.ts';
import type { Db } from '../../storage/db.ts';
import { ROW_TEXT_SQL } from '../../storage/transcript/row-text.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendNotice, appendRows } from '../../storage/transcript/write.ts';
import { assistant, count, imageIn, jpegBytes, pngBytes, rowsOf, tempDb, toolResult, user } from './factories.ts';

function fails(code: DomainCodeName, details: Record<string, unknown> = {}) {
  return (e: unknown) => e instanceof AlbedoError && e.code === code && Object.entries(details).every(([k, v]) => e.details?.[k] === v);
}

function texts(db: Db, session: string): string[] {
  return rowsOf(db, session).map((r) => r.text);
}

function hashOf(db: Db, seq: number): string {
  const body = JSON.parse(db.prepare('SELECT body FROM transcript WHERE seq = ?').pluck().get(seq) as string) as { content: Array<{ type: string; hash?: string }> };
  return body.content.find((p) => p.type === 'image')!.hash!;
}

function open(db: Db, ...names: string[]): void {
  for (const n of names) openSession(db, { session: n });
}

test('seqs increase globally across interleaved sessions; head is the session newest seq', async (t) => {
  const db = tempDb(t);
  open(db, 'a', 'b');
  const a1 = await appendRows(db, 'a', [user('a1'), user('a2')]);
  const b1 = await appendRows(db, 'b', [user('b1')]);
  const a2 = await appendRows(db, 'a', [user('a3')]);
  assert.deepEqual([...a1.seqs, ...b1.seqs, ...a2.seqs], [1, 2, 3, 4]);
  assert.equal(b1.head, 3);
  assert.equal(a2.head, 4);
  assert.equal(a2.moved, undefined);
  assert.deepEqual(texts(db, 'a'), ['a1', 'a2', 'a3']);
});

test('stored rows carry kind, row class, text and the time of the append', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  await appendRows(db, 's', [user('mail in', { origin: 'mail' }), assistant('on it', ['c1']), toolResult('c1', 'done')], {
    now: () => 1234,
  });
  const rows = db.prepare(`SELECT kind, row_class, call_id, ${ROW_TEXT_SQL} AS text, created_at FROM transcript ORDER BY seq`).all();
  assert.deepEqual(rows, [
    { kind: 'user', row_class: 'user', call_id: null, text: 'mail in', created_at: 1234 },
    { kind: 'assistant', row_class: 'other', call_id: null, text: 'on it\n→ read_file({"path":"c1.ts"})', created_at: 1234 },
    { kind: 'tool_result', row_class: 'other', call_id: 'c1', text: 'done', created_at: 1234 },
  ]);
});

test('appending to an unknown session is unknown_session', async (t) => {
  const db = tempDb(t);
  await assert.rejects(appendRows(db, 'ghost', [user('x')]), fails('unknown_session', { session: 'ghost' }));
});

test('a retried append with the same key stores nothing and answers the same seq', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  const png = await pngBytes(3, 3);
  const first = await appendRows(db, 's', [user('hello', { key: 'k1', images: [imageIn(png, 'image/png')] }), user('x')]);
  const again = await appendRows(db, 's', [user('hello', { key: 'k1', images: [imageIn(png, 'image/png')] })]);
  assert.deepEqual(again.seqs, [first.seqs[0]]);
  assert.equal(again.head, first.head);
  assert.equal(count(db, 'SELECT count(*) FROM transcript'), 2);
  assert.equal(count(db, 'SELECT count(*) FROM payload_refs'), 1);
});

test('the same key with other content is key_conflict and nothing of that batch is stored', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  const first = await appendRows(db, 's', [user('hello', { key: 'k1' })]);
  await assert.rejects(
    appendRows(db, 's', [user('new row'), user('hello, edited', { key: 'k1' })]),
    fails('key_conflict', { key: 'k1', seq: first.seqs[0], index: 1 }),
  );
  assert.deepEqual(texts(db, 's'), ['hello']);
});

test('a key repeated inside one batch stores the row once', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  const r = await appendRows(db, 's', [user('same', { key: 'k' }), user('same', { key: 'k' })]);
  assert.equal(r.seqs[0], r.seqs[1]);
  assert.equal(count(db, 'SELECT count(*) FROM transcript'), 1);
});

test('keys are per session: the same key in two sessions is two rows', async (t) => {
  const db = tempDb(t);
  open(db, 'a', 'b');
  const a = await appendRows(db, 'a', [user('one', { key: 'k' })]);
  const b = await appendRows(db, 'b', [user('two', { key: 'k' })]);
  assert.notEqual(a.seqs[0], b.seqs[0]);
});

test('a batch failing at its third row stores none of its rows, calls or images', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  await appendRows(db, 's', [user('before')]);
  const png = await pngBytes(5, 5);
  await assert.rejects(
    appendRows(db, 's', [
      user('look', { images: [imageIn(png, 'image/png')] }),
      assistant('calling', ['c1']),
      assistant('calling again before c1 answered', ['c1']),
    ]),
    fails('duplicate_tool_call', { call_id: 'c1', index: 2 }),
  );
  assert.deepEqual(texts(db, 's'), ['before']);
  assert.equal(count(db, 'SELECT count(*) FROM tool_calls'), 0);
  assert.equal(count(db, 'SELECT count(*) FROM payloads'), 0);
  assert.equal(count(db, 'SELECT count(*) FROM payload_refs'), 0);
  // The call id from the failed batch is free to use.
  await appendRows(db, 's', [assistant('calling', ['c1']), toolResult('c1', 'ok')]);
});

test('a tool call id whose call has no result yet cannot be used again', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  const first = await appendRows(db, 's', [assistant('x', ['c1'])]);
  await assert.rejects(
    appendRows(db, 's', [user('fine'), assistant('y', ['c1'])]),
    fails('duplicate_tool_call', { call_id: 'c1', seq: first.seqs[0], index: 1 }),
  );
  await assert.rejects(appendRows(db, 's', [assistant('z', ['c2', 'c2'])]), fails('duplicate_tool_call', { call_id: 'c2' }));
  assert.deepEqual(texts(db, 's'), ['x\n→ read_file({"path":"c1.ts"})'], 'nothing of either batch is stored');
  assert.equal(count(db, 'SELECT count(*) FROM tool_calls'), 1);
});

test('settling: a result arriving after a user message sits right after its call', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  const png = await jpegBytes(4, 4);
  // 1 user, 2 assistant with call c1, 3 user typed while the tool ran (key + image).
  await appendRows(db, 's', [user('go'), assistant('reading', ['c1'])]);
  const typed = await appendRows(db, 's', [user('meanwhile', { key: 'typed', images: [imageIn(png, 'image/jpeg')] })]);
  assert.deepEqual(typed.seqs, [3]);
  const hash = hashOf(db, 3);

  const r = await appendRows(db, 's', [toolResult('c1', 'file contents', { key: 'res' })]);
  assert.deepEqual(r.seqs, [3], 'the result answers with the seq its contents ended at');
  assert.equal(r.head, 4);
  assert.deepEqual(r.moved, [
    { from: 3, to: 4 },
    { from: 4, to: 3 },
  ]);
  const rows = rowsOf(db, 's');
  assert.deepEqual(
    rows.map((x) => [x.seq, x.kind, x.key, x.text.split('\n')[0]]),
    [
      [1, 'user', null, 'go'],
      [2, 'assistant', null, 'reading'],
      [3, 'tool_result', 'res', 'file contents'],
      [4, 'user', 'typed', 'meanwhile'],
    ],
  );
  assert.deepEqual(db.prepare('SELECT seq FROM payload_refs').pluck().all(), [4], 'the image reference moved along');
  assert.equal(hashOf(db, 4), hash);
  // The moved key still answers retries, with the new seq.
  const retry = await appendRows(db, 's', [user('meanwhile', { key: 'typed', images: [imageIn(png, 'image/jpeg')] })]);
  assert.deepEqual(retry.seqs, [4]);
  // Seqs are still only ever allocated at the end.
  const next = await appendRows(db, 's', [user('next')]);
  assert.deepEqual(next.seqs, [5]);
});

test('settling moves a later pending call with its row, and that result settles after it', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  // 1 A1(c1), 2 user, 3 A2(c2)
  await appendRows(db, 's', [assistant('first', ['c1']), user('while c1 runs'), assistant('second', ['c2'])]);
  const r1 = await appendRows(db, 's', [toolResult('c1', 'r1')]);
  assert.deepEqual(r1.seqs, [2]);
  assert.deepEqual(db.prepare('SELECT call_id, seq FROM tool_calls ORDER BY seq').all(), [
    { call_id: 'c1', seq: 1 },
    { call_id: 'c2', seq: 4 },
  ]);
  const r2 = await appendRows(db, 's', [toolResult('c2', 'r2')]);
  assert.deepEqual(r2.seqs, [5]);
  assert.equal(r2.moved, undefined, 'a result whose slot is the end moves nothing');
  assert.deepEqual(texts(db, 's').map((x) => x.split('\n')[0]), ['first', 'r1', 'while c1 runs', 'second', 'r2']);
});

test('settling keeps results of the same assistant row together, in arrival order', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  await appendRows(db, 's', [assistant('two calls', ['c1', 'c2']), user('meanwhile')]);
  await appendRows(db, 's', [toolResult('c2', 'r2')]);
  await appendRows(db, 's', [toolResult('c1', 'r1')]);
  assert.deepEqual(texts(db, 's').map((x) => x.split('\n')[0]), ['two calls', 'r2', 'r1', 'meanwhile']);
  assert.deepEqual(rowsOf(db, 's').map((x) => x.seq), [1, 2, 3, 4]);
});

test('settling inside one batch reports every row at the seq it ends at', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  const r = await appendRows(db, 's', [assistant('call', ['c1']), user('typed'), toolResult('c1', 'result')]);
  assert.deepEqual(r.seqs, [1, 3, 2]);
  assert.deepEqual(r.moved, [
    { from: 2, to: 3 },
    { from: 3, to: 2 },
  ]);
  assert.deepEqual(texts(db, 's').map((x) => x.split('\n')[0]), ['call', 'result', 'typed']);
});

test('settling only moves along the session own seqs when other sessions interleave', async (t) => {
  const db = tempDb(t);
  open(db, 'a', 'b');
  await appendRows(db, 'a', [assistant('call', ['c1'])]); // 1
  await appendRows(db, 'b', [user('b-one')]); // 2
  await appendRows(db, 'a', [user('a typed')]); // 3
  await appendRows(db, 'b', [user('b-two')]); // 4
  await appendRows(db, 'a', [user('a typed again', { key: 'k' })]); // 5
  const r = await appendRows(db, 'a', [toolResult('c1', 'result')]); // fresh 6
  assert.deepEqual(r.seqs, [3]);
  assert.deepEqual(r.moved, [
    { from: 3, to: 5 },
    { from: 5, to: 6 },
    { from: 6, to: 3 },
  ]);
  assert.deepEqual(
    rowsOf(db, 'a').map((x) => [x.seq, x.text.split('\n')[0], x.key]),
    [
      [1, 'call', null],
      [3, 'result', null],
      [5, 'a typed', null],
      [6, 'a typed again', 'k'],
    ],
  );
  assert.deepEqual(rowsOf(db, 'b').map((x) => [x.seq, x.text]), [
    [2, 'b-one'],
    [4, 'b-two'],
  ]);
  assert.equal(count(db, 'SELECT count(DISTINCT seq) FROM transcript'), 6);
});

test('settling keeps the search index exact for rows it already covers', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  db.prepare('UPDATE search_index_state SET indexed_through = 1000').run();
  await appendRows(db, 's', [assistant('call', ['c1']), user('zebra crossing')]);
  await appendRows(db, 's', [toolResult('c1', 'giraffe output')]);
  const hit = (word: string) => db.prepare('SELECT rowid FROM transcript_fts WHERE transcript_fts MATCH ?').pluck().all(`"${word}"`);
  assert.deepEqual(hit('zebra'), [3]);
  assert.deepEqual(hit('giraffe'), [2]);
});

test('the same image in two rows is stored once with two references', async (t) => {
  const db = tempDb(t);
  open(db, 'a', 'b');
  const png = await pngBytes(9, 4);
  const r = await appendRows(db, 'a', [
    user('one', { images: [imageIn(png, 'image/png')] }),
    user('two', { images: [imageIn(png, 'image/png')] }),
  ]);
  await appendRows(db, 'b', [user('three', { images: [imageIn(png, 'image/png')] })]);
  assert.equal(count(db, 'SELECT count(*) FROM payloads'), 1);
  assert.equal(count(db, 'SELECT count(*) FROM payload_refs'), 3);
  assert.equal(hashOf(db, r.seqs[0]!), hashOf(db, r.seqs[1]!));
  assert.match(texts(db, 'a')[0]!, /^one\n\[image [0-9a-f]{8} 9x4\]$/);
});

test('an image can be sent again by hash; an unknown hash fails the batch', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  const png = await pngBytes(3, 2);
  const r = await appendRows(db, 's', [user('upload', { images: [imageIn(png, 'image/png')] })]);
  const hash = hashOf(db, r.seqs[0]!);
  const byRef = await appendRows(db, 's', [user('again', { images: [{ type: 'image', hash }] })]);
  const body = JSON.parse(db.prepare('SELECT body FROM transcript WHERE seq = ?').pluck().get(byRef.seqs[0]) as string) as { content: unknown[] };
  assert.deepEqual(body.content[1], { type: 'image', hash, media_type: 'image/png', width: 3, height: 2 });
  assert.equal(count(db, 'SELECT count(*) FROM payload_refs WHERE hash = ?', hash), 2);
  await assert.rejects(
    appendRows(db, 's', [user('fine'), user('bad', { images: [{ type: 'image', hash: 'f'.repeat(64) }] })]),
    fails('unknown_payload'),
  );
  assert.equal(count(db, 'SELECT count(*) FROM transcript'), 2);
});

test('a bad image anywhere in the batch fails it before anything is written', async (t) => {
  const db = tempDb(t);
  open(db, 's');
  const jpeg = await jpegBytes(4, 4);
  const rows: RowIn[] = [user('ok'), user('bad', { images: [imageIn(jpeg, 'image/png')] })];
  await assert.rejects(appendRows(db, 's', rows), fails('invalid_image'));
  const big = [user('big', { images: [imageIn(jpeg, 'image/jpeg')] })];
  await assert.rejects(appendRows(db, 's', big, { maxImageBytes: 10 }), fails('image_too_large'));
  assert.equal(count(db, 'SELECT count(*) FROM transcript'), 0);
});

test('notices: image_fit rows are their own class and name their payload; keys make them idempotent', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 's' });
  const png = await pngBytes(8, 8);
  const r = await appendRows(db, 's', [user('pic', { images: [imageIn(png, 'image/png')] })]);
  const hash = hashOf(db, r.seqs[0]!);
  const notice = {
    notice: 'image_fit' as const,
    from_hash: hash,
    to: { type: 'image' as const, hash, media_type: 'image/png', width: 8, height: 8 },
    reason: 'test',
  };
  const seq = appendNotice(db, sid, notice, { key: 'fit:1' });
  assert.equal(appendNotice(db, sid, notice, { key: 'fit:1' }), seq);
  assert.throws(() => appendNotice(db, sid, { ...notice, reason: 'other' }, { key: 'fit:1' }), fails('key_conflict'));
  assert.equal(db.prepare('SELECT row_class FROM transcript WHERE seq = ?').pluck().get(seq), 'image_fit');
  assert.equal(count(db, 'SELECT count(*) FROM payload_refs WHERE seq = ?', seq), 1);
  const other = appendNotice(db, sid, { notice: 'capabilities_changed', context: 'ctx' });
  assert.equal(db.prepare('SELECT row_class FROM transcript WHERE seq = ?').pluck().get(other), 'other');
  assert.throws(
    () => appendNotice(db, sid, { ...notice, to: { ...notice.to, hash: 'a'.repeat(64) } }),
    fails('unknown_payload'),
  );
});

test('a batch stores, links and settles exactly as the same rows appended one by one', async (t) => {
  // Results in their slot (no settle query in a batch), results after a user row or another
  // call (settled), siblings out of order, an orphan, and key retries within the batch.
  const rows: RowIn[] = [
    user('start', { key: 'u1' }),
    assistant('two calls', ['a1', 'a2']),
    toolResult('a2', 'second first'),
    toolResult('a1', 'first second'),
    assistant('one call', ['b1']),
    user('typed meanwhile', { key: 'u2' }),
    toolResult('b1', 'late'),
    assistant('c', ['c1']),
    assistant('d', ['d1']),
    toolResult('c1', 'for the earlier call'),
    toolResult('zz', 'orphan'),
    toolResult('d1', 'after an orphan'),
    user('start', { key: 'u1' }),
    assistant('again', ['a1']),
    toolResult('a1', 'reused id'),
  ];
  const batched = tempDb(t);
  const single = tempDb(t);
  for (const db of [batched, single]) openSession(db, { session: 's' });
  const inBatch = await appendRows(batched, 's', rows);
  const one: number[] = [];
  for (const r of rows) one.push(...(await appendRows(single, 's', [r])).seqs);
  // Seqs as each row's contents end up: the batch reports the end state, single appends the
  // state after each row, so follow the single side's later moves by content.
  const contents = (db: Db) => rowsOf(db, 's').map((r) => ({ seq: r.seq, body: r.body, key: r.key }));
  assert.deepEqual(contents(batched), contents(single));
  const calls = (db: Db) => db.prepare('SELECT call_id, seq, result_seq FROM tool_calls ORDER BY seq, call_id').all();
  assert.deepEqual(calls(batched), calls(single));
  const bySeq = new Map(contents(batched).map((r) => [r.seq, r.body]));
  inBatch.seqs.forEach((seq, i) => {
    const body = JSON.parse(bySeq.get(seq)!) as { kind: string };
    assert.equal(body.kind, rows[i]!.kind, `row ${i} is reported where its contents are`);
  });
  assert.equal(inBatch.seqs[12], inBatch.seqs[0], 'the retried key answers the first row');
  assert.deepEqual(
    rowsOf(batched, 's').map((r) => r.text.split('\n')[0]),
    ['start', 'two calls', 'second first', 'first second', 'one call', 'late', 'typed meanwhile', 'c', 'for the earlier call', 'd', 'after an orphan', 'orphan', 'again', 'reused id'],
  );
});

test('call records of a batch: calls opened before a settle in it, and open calls from earlier batches whose rows it moved', async (t) => {
  // The batch's call records are written at its end and before each settle; a settle can move
  // the row of a call opened earlier in the batch or before it, and a later result or a
  // reused id must still find that call where it went.
  const before: RowIn[] = [assistant('p', ['p1', 'p2'])];
  const rows: RowIn[] = [
    user('typed meanwhile'),
    assistant('e', ['e1']),
    toolResult('p1', 'late p1'),
    toolResult('e1', 'e answered after its row moved'),
    toolResult('p2', 'late p2'),
    assistant('f', ['e1', 'f1']),
    toolResult('f1', 'f1 in its slot'),
  ];
  const batched = tempDb(t);
  const single = tempDb(t);
  for (const db of [batched, single]) {
    openSession(db, { session: 's' });
    await appendRows(db, 's', before);
  }
  await appendRows(batched, 's', rows);
  for (const r of rows) await appendRows(single, 's', [r]);
  const contents = (db: Db) => rowsOf(db, 's').map((r) => ({ seq: r.seq, body: r.body, call_id: r.call_id }));
  assert.deepEqual(contents(batched), contents(single));
  const calls = (db: Db) => db.prepare('SELECT call_id, seq, result_seq FROM tool_calls ORDER BY seq, call_id').all();
  assert.deepEqual(calls(batched), calls(single));
  assert.deepEqual(
    rowsOf(batched, 's').map((r) => r.text.split('\n')[0]),
    ['p', 'late p1', 'late p2', 'typed meanwhile', 'e', 'e answered after its row moved', 'f', 'f1 in its slot'],
  );
  assert.equal(count(batched, "SELECT count(*) FROM transcript WHERE kind = 'tool_result' AND call_id IS NULL"), 0, 'no result is an orphan');
  // e1 was answered, then reused by f, whose call is open: a third use is refused, naming f's row.
  const f = rowsOf(batched, 's').find((r) => r.text.startsWith('f\n'))!;
  await assert.rejects(appendRows(batched, 's', [assistant('again', ['e1'])]), fails('duplicate_tool_call', { call_id: 'e1', seq: f.seq }));
  await assert.rejects(
    appendRows(batched, 's', [assistant('g', ['g1']), toolResult('g1', 'ok'), assistant('h', ['g1', 'g1'])]),
    fails('duplicate_tool_call', { call_id: 'g1', index: 2 }),
  );
  // A settle moves a call opened earlier in the batch: reusing its id names the row it moved to
  // (p=1, u=2, q=3, the late result settles at 2 and q moves to 4).
  const moved = tempDb(t);
  openSession(moved, { session: 's' });
  await appendRows(moved, 's', [assistant('p', ['p1'])]);
  await assert.rejects(
    appendRows(moved, 's', [user('u'), assistant('q', ['q1']), toolResult('p1', 'late'), assistant('dup', ['q1'])]),
    fails('duplicate_tool_call', { call_id: 'q1', seq: 4, index: 3 }),
  );
});

test('an assistant row with tool calls is stored as JSON.stringify of its body, and its text shows the same arguments', async (t) => {
  const db = tempDb(t);
  open(db, 'a');
  // Arguments with an own __proto__ key, escapes, non-ASCII, nesting and arrays; parts in an
  // order the client chose (the stored body has its own key order); a reasoning part with
  // fields left out; a row with provider and model and one without.
  const args = JSON.parse('{"__proto__":{"x":1},"path":"a\\"b\\\\c\\u0001","text":"Größe ✅️ 𝄞","n":[1,2.5,-0,null,true,{"deep":[[{}]]}]}') as Record<string, unknown>;
  const rows: RowIn[] = [
    {
      kind: 'assistant',
      model: 'm-1',
      provider: 'p',
      content: [
        { type: 'reasoning', text: 'think', provider: 'p' },
        { text: 'calling', type: 'text' },
        { arguments: args, name: 'write', id: 'c1', type: 'tool_call' },
        { type: 'tool_call', id: 'c2', name: 'ls', arguments: {} },
      ],
    },
    { kind: 'assistant', content: [{ type: 'tool_call', id: 'c3', name: 'ls', arguments: { dir: '/' } }] },
  ];
  await appendRows(db, 'a', rows);
  const stored = db.prepare(`SELECT body, ${ROW_TEXT_SQL} AS text FROM transcript ORDER BY seq`).all() as Array<{ body: string; text: string }>;
  const expected = [
    {
      kind: 'assistant',
      provider: 'p',
      model: 'm-1',
      content: [
        { type: 'reasoning', provider: 'p', text: 'think' },
        { type: 'text', text: 'calling' },
        { type: 'tool_call', id: 'c1', name: 'write', arguments: args },
        { type: 'tool_call', id: 'c2', name: 'ls', arguments: {} },
      ],
    },
    { kind: 'assistant', content: [{ type: 'tool_call', id: 'c3', name: 'ls', arguments: { dir: '/' } }] },
  ];
  assert.deepEqual(stored.map((r) => r.body), expected.map((b) => JSON.stringify(b)));
  assert.equal(stored[0]!.text, `think\ncalling\n→ write(${JSON.stringify(args)})\n→ ls({})`);
  assert.equal(stored[1]!.text, '→ ls({"dir":"/"})');
});
