// transcript_read: grapheme-exact pages over the rendered rows (emoji, flags, combining marks,
// CR LF), ranges, offsets past the end, and reads that stop at their page.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlbedoError } from '../../protocol/errors.ts';
import { TranscriptReadParams, type ParamsIn, type Result } from '../../protocol/methods.ts';
import { StoredBody } from '../../protocol/rows.ts';
import type { Db } from '../../storage/db.ts';
import { rowHeader } from '../../storage/transcript/row-text.ts';
import { openSession, requireSession } from '../../storage/transcript/sessions.ts';
import { appendNotice, appendRows, forkSession } from '../../storage/transcript/write.ts';
import { readTranscript } from '../../storage/transcript/read.ts';
import { assistant, rowsOf, tempDb, tempDbWithPath, toolResult, user } from './factories.ts';
import { openDb } from '../../storage/db.ts';
import { recordingDb } from './recording-db.ts';

const noYield = (): Promise<void> => Promise.resolve();

function read(db: Db, params: ParamsIn<'transcript_read'>): Promise<Result<'transcript_read'>> {
  return readTranscript(db, TranscriptReadParams.parse(params), { yieldEvery: noYield });
}

/** The rendering built the obvious way, from every row at once. */
function rendering(db: Db, session: string, from = 0, to = Number.MAX_SAFE_INTEGER): string {
  return rowsOf(db, session)
    .filter((r) => r.seq >= from && r.seq <= to)
    .map((r) => `${rowHeader(r.seq, StoredBody.parse(JSON.parse(r.body)))}\n${r.text}`)
    .join('\n\n');
}

function graphemes(s: string): string[] {
  return [...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(s)].map((g) => g.segment);
}

/** Reads a whole rendering page by page; every page must be whole graphemes of the reference. */
async function readAll(db: Db, params: ParamsIn<'transcript_read'>, limit: number, reference: string[]): Promise<string> {
  let offset: number | null = 0;
  let out = '';
  while (offset !== null) {
    const page: Result<'transcript_read'> = await read(db, { ...params, offset, limit });
    assert.equal(page.offset, offset);
    assert.equal(page.text, reference.slice(offset, offset + limit).join(''), `page at ${offset} (limit ${limit})`);
    out += page.text;
    const end: number = offset + graphemes(page.text).length;
    assert.equal(page.next_offset, end < reference.length ? end : null);
    offset = page.next_offset;
  }
  return out;
}

const TRICKY = [
  'family 👩‍👩‍👧 and 👨‍👩‍👧‍👦 together',
  'flags 🇫🇷🇩🇪🇯🇵 side by side',
  'skin tones 👍🏽👋🏿 and a thumbs up 👍',
  'combining: cafe\u0301, n\u0303, a\u0308\u0304 stacked',
  'windows line\r\nendings\r\nhere',
  'ends with a CR\r',
  '\r\nstarts with CR LF',
  'hangul 한국어 ᄀᄀᄀ각ᆨᆨ and devanagari नमस्ते क्षि',
  'plain ascii only',
  '',
];

async function trickySession(db: Db): Promise<void> {
  const { sid } = openSession(db, { session: 's' });
  openSession(db, { session: 'other' });
  await appendRows(db, 's', [user(TRICKY[0]!), assistant(TRICKY[1]!, ['call-1'])]);
  await appendRows(db, 'other', [user('not mine 👩‍👩‍👧')]);
  await appendRows(db, 's', [toolResult('call-1', TRICKY[2]!, { isError: true }), user(TRICKY[3]!, { origin: 'notes' })]);
  appendNotice(db, sid, { notice: 'capabilities_changed', context: 'ctx 🇫🇷\r' });
  await appendRows(db, 's', TRICKY.slice(4).map((x, i) => (i % 2 === 0 ? user(x) : user(x, { origin: 'mail' }))));
}

test('pages of any size concatenate to the full rendering and never split a grapheme', async (t) => {
  const db = tempDb(t);
  await trickySession(db);
  const full = rendering(db, 's');
  assert.ok(full.includes('#') && full.includes('(error)') && full.includes('user (notes)') && full.includes('notice capabilities_changed'));
  assert.ok(!full.includes('not mine'));
  const reference = graphemes(full);
  assert.ok(reference.includes('👩‍👩‍👧') && reference.includes('🇫🇷') && reference.includes('👍🏽') && reference.includes('e\u0301'));
  assert.ok(reference.includes('\r\n'), "a row ending in CR joins the separator's LF");
  for (const limit of [1, 2, 3, 5, 7, 16, 64, 333, 100_000]) {
    assert.equal(await readAll(db, { session: 's' }, limit, reference), full, `limit ${limit}`);
  }
});

test('one read of everything returns the rendering with next_offset null', async (t) => {
  const db = tempDb(t);
  await trickySession(db);
  const full = rendering(db, 's');
  assert.deepEqual(await read(db, { session: 's' }), { text: full, offset: 0, next_offset: null });
});

test('an offset at or past the end reads nothing', async (t) => {
  const db = tempDb(t);
  await trickySession(db);
  const n = graphemes(rendering(db, 's')).length;
  assert.deepEqual(await read(db, { session: 's', offset: n }), { text: '', offset: n, next_offset: null });
  assert.deepEqual(await read(db, { session: 's', offset: n + 1 }), { text: '', offset: n + 1, next_offset: null });
  const huge = Number.MAX_SAFE_INTEGER;
  assert.deepEqual(await read(db, { session: 's', offset: huge, limit: 1_000_000 }), { text: '', offset: huge, next_offset: null });
  const last = await read(db, { session: 's', offset: n - 1, limit: 5 });
  assert.equal(graphemes(last.text).length, 1);
  assert.equal(last.next_offset, null);
});

test('an empty session reads as empty text', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'e' });
  assert.deepEqual(await read(db, { session: 'e' }), { text: '', offset: 0, next_offset: null });
});

test('ranges render only their rows, across read pages of 128 rows', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  openSession(db, { session: 'x' });
  const rows = Array.from({ length: 300 }, (_v, i) => user(i % 7 === 0 ? `row ${i} 🇫🇷 e\u0301` : `row ${i}`));
  const first = (await appendRows(db, 's', rows.slice(0, 150))).seqs;
  await appendRows(db, 'x', [user('interleaved')]);
  const second = (await appendRows(db, 's', rows.slice(150))).seqs;
  const seqs = [...first, ...second];

  const full = rendering(db, 's');
  assert.equal(await readAll(db, { session: 's' }, 997, graphemes(full)), full);

  const from = seqs[5]!;
  const to = seqs[281]!;
  const part = rendering(db, 's', from, to);
  assert.ok(part.startsWith(`#${from} user\nrow 5`));
  assert.ok(part.endsWith('row 281'));
  assert.equal(await readAll(db, { session: 's', from_seq: from, to_seq: to }, 1234, graphemes(part)), part);
  assert.equal((await read(db, { session: 's', from_seq: seqs[299]! })).text, `#${seqs[299]} user\nrow 299`);
  assert.equal((await read(db, { session: 's', to_seq: seqs[0]! })).text, `#${seqs[0]} user\nrow 0 🇫🇷 e\u0301`);
  assert.deepEqual(await read(db, { session: 's', from_seq: seqs[299]! + 1000 }), { text: '', offset: 0, next_offset: null });
  await assert.rejects(read(db, { session: 's', from_seq: 10, to_seq: 9 }), (e: unknown) => e instanceof AlbedoError && e.code === 'invalid_range');
  await assert.rejects(read(db, { session: 'nope' }), (e: unknown) => e instanceof AlbedoError && e.code === 'unknown_session');
});

test('a read stops at its page: the first page of a long transcript reads one row page', async (t) => {
  const base = tempDb(t);
  openSession(base, { session: 's' });
  await appendRows(base, 's', Array.from({ length: 1000 }, (_v, i) => user(`row ${i} ${'w'.repeat(50)}`)));
  const { db, executed } = recordingDb(base);
  const page = await readTranscript(db, TranscriptReadParams.parse({ session: 's', limit: 100 }), { yieldEvery: noYield });
  assert.equal(page.text.length, 100);
  assert.equal(page.next_offset, 100);
  assert.equal(executed.filter((sql) => sql.includes('LIMIT') && sql.includes('json_extract')).length, 1);

  // Deep in an ASCII transcript, rows before the offset are skipped by length.
  const full = rendering(base, 's');
  const deep = await read(base, { session: 's', offset: full.length - 30, limit: 10 });
  assert.equal(deep.text, full.slice(full.length - 30, full.length - 20));
  assert.equal(deep.next_offset, full.length - 20);
});

test('a page that ends exactly at a row boundary still knows whether more follows', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  const { seqs } = await appendRows(db, 's', Array.from({ length: 128 }, (_v, i) => user(`r${i}`)));
  const full = rendering(db, 's');
  // Everything but the last row: its header starts after the separator.
  const cut = full.lastIndexOf(`\n\n#${seqs[127]}`);
  const head = await read(db, { session: 's', limit: cut });
  assert.equal(head.text, full.slice(0, cut));
  assert.equal(head.next_offset, cut);
  const whole = await read(db, { session: 's', limit: full.length });
  assert.deepEqual(whole, { text: full, offset: 0, next_offset: null });
  const exactFirstPage = await read(db, { session: 's', to_seq: seqs[127]!, limit: full.length });
  assert.equal(exactFirstPage.next_offset, null);
  // A 128-row page whose last row is followed by one more row.
  await appendRows(db, 's', [user('extra')]);
  const again = await read(db, { session: 's', limit: full.length });
  assert.equal(again.text, full);
  assert.equal(again.next_offset, full.length);
  assert.equal((await read(db, { session: 's', offset: full.length })).text, `\n\n#${requireHead(db)} user\nextra`);
});

function requireHead(db: Db): number {
  const sid = requireSession(db, 's').sid;
  return db.prepare('SELECT max(seq) FROM transcript WHERE sid = ?').pluck().get(sid) as number;
}

test('deep reads skip rows by their stored sizes and give exactly the pages the text gives', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'd' });
  openSession(db, { session: 'other' });
  const texts = ['plain ascii', 'ends with CR\r', 'CRLF\r\ninside', 'e\u0301 combining', '👩‍👩‍👧 family 🇫🇷', 'tab\tand ünïcödé', '漢字テキスト'];
  for (let i = 0; i < 120; i++) {
    // Another session's rows interleave, so seqs grow in digits unevenly.
    await appendRows(db, 'other', [user(`noise ${i}`)]);
    await appendRows(db, 'd', [user(texts[i % texts.length]!), assistant(`reply ${i}`, [`c${i}`]), toolResult(`c${i}`, texts[(i + 3) % texts.length]!)]);
  }
  // A late result settles beside its call (rows move to other seqs); a fork copies the rows.
  await appendRows(db, 'd', [assistant('late call', ['late']), user('typed meanwhile\r')]);
  await appendRows(db, 'd', [toolResult('late', 'late result')]);
  const reference = graphemes(rendering(db, 'd'));
  const pageAt = (offset: number, n: number) => reference.slice(offset, offset + n).join('');
  for (const offset of [0, 1, 37, 500, 4321, 9000, reference.length - 3, reference.length - 1]) {
    const page = await read(db, { session: 'd', offset, limit: 25 });
    assert.equal(page.text, pageAt(offset, 25), `offset ${offset}`);
  }

  // The sizes are really used: inflate them and a deep read lands elsewhere.
  const sid = requireSession(db, 'd').sid;
  db.prepare('UPDATE transcript SET graphemes = graphemes + 1000 WHERE sid = ?').run(sid);
  assert.notEqual((await read(db, { session: 'd', offset: 4321, limit: 25 })).text, pageAt(4321, 25));
  // Rows without stored sizes (written before they were kept) are counted from their text.
  db.prepare('UPDATE transcript SET graphemes = NULL WHERE sid = ?').run(sid);
  assert.equal((await read(db, { session: 'd', offset: 4321, limit: 25 })).text, pageAt(4321, 25));
});

test('a fork keeps the stored sizes valid for its own seqs', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'p' });
  for (let i = 0; i < 50; i++) await appendRows(db, 'p', [user(`message ${i} with 👍🏽 and CR\r`)]);
  forkSession(db, 'p', { branch: 'b' });
  const reference = graphemes(rendering(db, 'b'));
  for (const offset of [0, 100, 777, reference.length - 2]) {
    assert.equal((await read(db, { session: 'b', offset, limit: 10 })).text, reference.slice(offset, offset + 10).join(''));
  }
});

test('deep reads over thousands of rows jump whole blocks and still give exactly the pages the text gives', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'd' });
  openSession(db, { session: 'other' });
  const texts = ['plain ascii', 'ends with CR\r', 'CRLF\r\ninside', 'e\u0301 combining', '👩‍👩‍👧 family 🇫🇷', 'tab\tand ünïcödé', '漢字テキスト', ''];
  const grow = async (from: number, to: number): Promise<void> => {
    for (let i = from; i < to; i += 50) {
      // Another session's rows interleave, so the session's seqs have gaps and change digits.
      await appendRows(db, 'other', [user(`noise ${i}`)]);
      const rows = [];
      for (let j = i; j < i + 50; j++) {
        rows.push(user(texts[j % texts.length]!), assistant(`reply ${j}`, [`c${j}`]), toolResult(`c${j}`, texts[(j + 3) % texts.length]!));
      }
      await appendRows(db, 'd', rows);
    }
  };
  // Segmented line by line: a grapheme break always follows LF, and the segmenter's cost on
  // one long string grows with its length for every segment.
  const linewise = (text: string): string[] => text.split(/(?<=\n)/).flatMap(graphemes);
  const check = async (label: string, params: { from_seq?: number; to_seq?: number } = {}): Promise<void> => {
    const reference = linewise(rendering(db, 'd', params.from_seq, params.to_seq));
    const n = reference.length;
    for (const offset of [0, 1, 2999, Math.floor(n / 3), Math.floor(n / 2) + 7, n - 200, n - 3, n - 1, n, n + 5]) {
      const page = await read(db, { session: 'd', ...params, offset, limit: 150 });
      assert.equal(page.text, reference.slice(offset, offset + 150).join(''), `${label}: offset ${offset}`);
      assert.equal(page.next_offset, offset + 150 < n ? offset + 150 : null, `${label}: next_offset at ${offset}`);
    }
  };
  await grow(0, 1200); // 3600 rows: three full blocks and a partial one
  await check('first read');
  await check('warm read');
  const seqs = rowsOf(db, 'd').map((r) => r.seq);
  await check('range from the middle of a block', { from_seq: seqs[1500]!, to_seq: seqs[3300]! });
  await check('range ending inside the first blocks', { from_seq: seqs[10]!, to_seq: seqs[2100]! });
  // Appends extend the index; a late result settles and moves rows near the start.
  await grow(1200, 1700);
  await check('after appends');
  await appendRows(db, 'd', [assistant('late call', ['late']), user('typed meanwhile\r')]);
  await appendRows(db, 'd', [toolResult('late', 'late result with 🇯🇵')]);
  await check('after a settle');
});

test('the block index of deep reads is saved and reused by the next connection while the rows it sums are unchanged', async (t) => {
  const { db, path: file } = tempDbWithPath(t);
  openSession(db, { session: 'd' });
  openSession(db, { session: 'other' });
  for (let i = 0; i < 1400; i += 50) {
    await appendRows(db, 'other', [user(`noise ${i}`)]);
    const rows = [];
    for (let j = i; j < i + 50; j++) rows.push(user(`message ${j} 👍🏽`), assistant(`reply ${j}`, [`c${j}`]), toolResult(`c${j}`, `result ${j}\r\nline`));
    await appendRows(db, 'd', rows);
  }
  const sid = requireSession(db, 'd').sid;
  const linewise = (text: string): string[] => text.split(/(?<=\n)/).flatMap(graphemes);
  const reference = linewise(rendering(db, 'd'));
  const offset = Math.floor(reference.length * 0.6);
  const expected = reference.slice(offset, offset + 40).join('');
  assert.equal((await read(db, { session: 'd', offset, limit: 40 })).text, expected);
  const saved = db.prepare('SELECT through, length(ends) AS bytes FROM read_blocks WHERE sid = ?').get(sid) as { through: number; bytes: number } | undefined;
  assert.ok(saved !== undefined && saved.bytes > 0, 'saved after its first build');
  assert.equal(saved.through, Math.max(...rowsOf(db, 'd').map((r) => r.seq)));

  // A new connection (a restart) reads it instead of summing again: a doctored copy is believed.
  const second = openDb(file, { synchronous: 'NORMAL' });
  t.after(() => second.close());
  const doctor = (by: number) => {
    const r = second.prepare('SELECT sums FROM read_blocks WHERE sid = ?').pluck().get(sid) as Buffer;
    const sums = new Float64Array(r.buffer.slice(r.byteOffset, r.byteOffset + r.byteLength)).map((x) => x + by);
    second.prepare('UPDATE read_blocks SET sums = ? WHERE sid = ?').run(Buffer.from(sums.buffer), sid);
  };
  doctor(5000);
  assert.notEqual((await read(second, { session: 'd', offset, limit: 40 })).text, expected, 'the saved index was used');

  // Rows rewritten in place (a late result settling) bump the rewrite counter: the saved index
  // no longer matches, is rebuilt, and pages are exact again.
  await appendRows(second, 'd', [assistant('late call', ['late']), user('typed meanwhile')]);
  await appendRows(second, 'd', [toolResult('late', 'late result')]);
  const after = linewise(rendering(second, 'd'));
  assert.equal((await read(second, { session: 'd', offset, limit: 40 })).text, after.slice(offset, offset + 40).join(''));
});
