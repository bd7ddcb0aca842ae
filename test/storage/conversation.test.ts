// Transcript reads for strategies: source references, snapshots, row pages, fold pages with
// image-fit replacements, and compaction units from row metadata.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AlbedoError, type DomainCodeName } from '../../protocol/errors.ts';
import { RowIn, type ImagePart, type StoredRow } from '../../protocol/rows.ts';
import { countUnitsAfter, foldSources, loadSources, rowsAfter, snapshot, source, units } from '../../storage/transcript/history.ts';
import type { Db } from '../../storage/db.ts';
import { putPayload } from '../../storage/images/payloads.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendNotice, appendRows } from '../../storage/transcript/write.ts';
import { assistant, tempDb, toolResult, user } from './factories.ts';
import { recordingDb } from './recording-db.ts';

function isAlbedo(code: DomainCodeName, details?: Record<string, unknown>) {
  return (e: unknown): boolean => {
    assert.ok(e instanceof AlbedoError, `expected AlbedoError, got ${String(e)}`);
    assert.equal(e.code, code);
    if (details) assert.deepEqual({ ...e.details, ...details }, e.details);
    return true;
  };
}

function textOf(row: StoredRow): string {
  const b = row.body;
  if (b.kind === 'notice') return b.body.notice;
  return b.content.map((p) => (p.type === 'text' ? p.text : p.type)).join('|');
}

/** Appends `n` user rows t0..t(n-1) to a session; returns their seqs. */
async function fill(db: Db, session: string, n: number, prefix = 't'): Promise<number[]> {
  const rows: RowIn[] = [];
  for (let i = 0; i < n; i++) rows.push(user(`${prefix}${i}`));
  return (await appendRows(db, session, rows)).seqs;
}

test('loadSources returns rows in the order asked, across sessions, repeats included', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  const a = await fill(db, 'a', 3, 'a');
  const b = await fill(db, 'b', 2, 'b');
  const rows = loadSources(db, [
    { session: 'b', seq: b[1]! },
    { session: 'a', seq: a[0]! },
    { session: 'a', seq: a[2]! },
    { session: 'a', seq: a[0]! },
  ]);
  assert.deepEqual(
    rows.map((r) => [r.session, r.seq, textOf(r)]),
    [
      ['b', b[1], 'b1'],
      ['a', a[0], 'a0'],
      ['a', a[2], 'a2'],
      ['a', a[0], 'a0'],
    ],
  );
  assert.equal(rows[1]!.row_class, 'user');
  assert.equal(rows[1]!.body.kind, 'user');
  assert.deepEqual(source(db, { session: 'a', seq: a[1]! }).body, { kind: 'user', origin: 'user', content: [{ type: 'text', text: 'a1' }] });
});

test('loadSources batches large reference lists and keeps their order', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a' });
  const seqs = await fill(db, 'a', 1200);
  const refs = [...seqs].reverse().map((seq) => ({ session: 'a', seq }));
  const rows = loadSources(db, refs);
  assert.deepEqual(
    rows.map((r) => r.seq),
    refs.map((r) => r.seq),
  );
});

test("source rejects an unknown session, an unknown seq and another session's seq", async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  const [a0] = await fill(db, 'a', 1);
  const [b0] = await fill(db, 'b', 1);
  assert.throws(() => source(db, { session: 'nope', seq: a0! }), isAlbedo('unknown_session', { session: 'nope' }));
  assert.throws(() => source(db, { session: 'a', seq: 999_999 }), isAlbedo('unknown_row', { seq: 999_999 }));
  assert.throws(
    () => loadSources(db, [{ session: 'a', seq: a0! }, { session: 'a', seq: b0! }]),
    isAlbedo('row_session_mismatch', { session: 'a', row_session: 'b', seq: b0! }),
  );
});

test('a corrupt stored body fails with an error naming its seq', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a' });
  const [s0, s1] = await fill(db, 'a', 2);
  db.prepare('UPDATE transcript SET body = ? WHERE seq = ?').run('{"kind":"user"', s0);
  db.prepare('UPDATE transcript SET body = ? WHERE seq = ?').run('{"kind":"user","origin":"boss","content":[]}', s1);
  assert.throws(() => source(db, { session: 'a', seq: s0! }), new RegExp(`transcript row ${s0} is corrupt: body is not JSON`));
  assert.throws(() => source(db, { session: 'a', seq: s1! }), new RegExp(`transcript row ${s1} is corrupt`));
});

test('snapshot reports the head and row count of one session only', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  assert.deepEqual(snapshot(db, 'a'), { session: 'a', sid, head: 0, rows: 0 });
  await fill(db, 'a', 2);
  await fill(db, 'b', 3);
  const [, last] = await fill(db, 'a', 2);
  await fill(db, 'b', 1);
  assert.deepEqual(snapshot(db, 'a'), { session: 'a', sid, head: last, rows: 4 });
  assert.throws(() => snapshot(db, 'nope'), isAlbedo('unknown_session'));
});

test('rowsAfter pages a session and says where the next page starts', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  const seqs: number[] = [];
  for (let i = 0; i < 5; i++) {
    seqs.push(...(await fill(db, 'a', 1, `a${i}-`)));
    await fill(db, 'b', 1);
  }
  const p1 = rowsAfter(db, 'a', 0, 2);
  assert.deepEqual(p1.rows.map((r) => r.seq), seqs.slice(0, 2));
  assert.equal(p1.next_after, seqs[1]);
  const p2 = rowsAfter(db, 'a', p1.next_after, 3);
  assert.deepEqual(p2.rows.map((r) => r.seq), seqs.slice(2));
  assert.equal(p2.next_after, null, 'a page that reaches the end has no next');
  assert.deepEqual(rowsAfter(db, 'a', seqs[4]!, 10), { rows: [], next_after: null });
});

test('foldSources reads a range in chronological pages of 128 rows', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  const seqs = await fill(db, 'a', 150);
  await fill(db, 'b', 10);
  seqs.push(...(await fill(db, 'a', 150, 'u')));
  const pages = [...foldSources(db, 'a', seqs[0]!, seqs[299]!)];
  assert.deepEqual(pages.map((p) => p.length), [128, 128, 44]);
  assert.deepEqual(pages.flat().map((r) => r.seq), seqs);
  assert.ok(pages.flat().every((r) => r.session === 'a'));

  const inner = [...foldSources(db, 'a', seqs[10]!, seqs[20]!)].flat();
  assert.deepEqual(inner.map((r) => r.seq), seqs.slice(10, 21), 'the range is inclusive at both ends');
  assert.deepEqual([...foldSources(db, 'a', seqs[0]!, seqs[299]!, { pageSize: 100 })].map((p) => p.length), [100, 100, 100]);
  assert.throws(() => foldSources(db, 'a', 5, 4), isAlbedo('invalid_range'));
  assert.throws(() => foldSources(db, 'nope', 1, 4), isAlbedo('unknown_session'));
});

// issue 35, target 1: a page of 128 long packed bodies held the event loop for 40 ms.
test('with pageMs, a page ends once its time is spent, and the pages still join into the range', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  const seqs = await fill(db, 'a', 20);
  await fill(db, 'b', 5);
  seqs.push(...(await fill(db, 'a', 20, 'u')));
  // No time at all: every page ends after its first row.
  const pages = [...foldSources(db, 'a', seqs[0]!, seqs[39]!, { pageMs: 0 })];
  assert.deepEqual(pages.map((p) => p.length), Array.from({ length: 40 }, () => 1));
  assert.deepEqual(pages.flat(), [...foldSources(db, 'a', seqs[0]!, seqs[39]!)].flat());
  // Time to spare: pages of pageSize rows, as without it.
  assert.deepEqual([...foldSources(db, 'a', seqs[0]!, seqs[39]!, { pageMs: 60_000, pageSize: 16 })].map((p) => p.length), [16, 16, 8]);
});

test('a fold the caller stops after its first page reads no further page', async (t) => {
  const base = tempDb(t);
  openSession(base, { session: 'a' });
  const seqs = await fill(base, 'a', 300);
  const { db, executed } = recordingDb(base);
  const gen = foldSources(db, 'a', seqs[0]!, seqs[299]!);
  const pageReads = (): number => executed.filter((sql) => /ORDER BY seq LIMIT/.test(sql)).length;
  assert.equal(pageReads(), 0, 'calling foldSources reads no page yet');
  const first = gen.next();
  assert.equal(first.done, false);
  assert.equal(first.value?.length, 128);
  assert.equal(pageReads(), 1);
  const before = executed.length;
  gen.return();
  assert.equal(executed.length, before, 'returning the generator runs no statement');
  assert.equal(pageReads(), 1);
});

test('foldSources reads only up to its boundary, the head when it was called', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'a' });
  const seqs = await fill(db, 'a', 130);
  const gen = foldSources(db, 'a', seqs[0]!, Number.MAX_SAFE_INTEGER);
  const first = gen.next().value!;
  await fill(db, 'a', 5, 'late');
  const rest = [...gen].flat();
  assert.deepEqual([...first, ...rest].map((r) => r.seq), seqs, 'rows appended after the call are not read');
  const bounded = [...foldSources(db, 'a', seqs[0]!, Number.MAX_SAFE_INTEGER, { boundary: seqs[9]! })].flat();
  assert.equal(bounded.length, 10);
});

// ---------------------------------------------------------------------------------------------
// Image fits

const H = (c: string): string => c.repeat(64);
const A = H('a');
const B = H('b');
const C = H('c');
const D = H('d');
const DIMS: Record<string, [number, number]> = { [A]: [4000, 3000], [B]: [2000, 1500], [C]: [1000, 750], [D]: [800, 600] };

function part(hash: string): ImagePart {
  const [width, height] = DIMS[hash]!;
  return { type: 'image', hash, media_type: 'image/png', width, height };
}

/** A stored session `s` with payloads A-D and helpers to append image rows and fits. */
function imageSession(t: import('node:test').TestContext, name = 's') {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: name });
  for (const h of [A, B, C, D]) putPayload(db, h, 'image/png', DIMS[h]![0], DIMS[h]![1], Buffer.from(h.slice(0, 4)));
  const withImage = async (label: string, hash: string, session = name): Promise<number> =>
    (
      await appendRows(db, session, [
        RowInOf({ kind: 'user', content: [{ type: 'text', text: label }, { type: 'image', hash }] }),
      ])
    ).seqs[0]!;
  const fit = (from: string, to: string, s = sid): number => appendNotice(db, s, { notice: 'image_fit', from_hash: from, to: part(to), reason: 'over the size limit' });
  return { db, sid, withImage, fit };
}

function RowInOf(row: unknown): RowIn {
  return RowIn.parse(row);
}

/** The image hashes of every row of a fold, by row text label. */
function imagesByLabel(rows: StoredRow[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const r of rows) {
    if (r.body.kind !== 'user') continue;
    const label = r.body.content.find((p) => p.type === 'text');
    out[label?.type === 'text' ? label.text : String(r.seq)] = r.body.content.flatMap((p) => p.type === 'image' ? [p.hash] : []);
  }
  return out;
}

test('a fit replaces its image only in earlier rows, including fits after the range', async (t) => {
  const { db, withImage, fit } = imageSession(t);
  const r1 = await withImage('before', A);
  const f = fit(A, B);
  const r2 = await withImage('after', A);
  const rows = [...foldSources(db, 's', r1, r2)].flat();
  assert.deepEqual(imagesByLabel(rows), { before: [B], after: [A] });
  const replaced = rows.find((r) => r.seq === r1)!.body;
  assert.ok(replaced.kind === 'user');
  assert.deepEqual(replaced.content[1], part(B), 'the whole image part is the fitted one');

  const onlyFirst = [...foldSources(db, 's', r1, r1)].flat();
  assert.deepEqual(imagesByLabel(onlyFirst), { before: [B] }, 'a fit after the range still applies');
  const untilBefore = [...foldSources(db, 's', r1, r1, { boundary: f - 1 })].flat();
  assert.deepEqual(imagesByLabel(untilBefore), { before: [A] }, 'a fit past the boundary does not apply');
  assert.deepEqual(imagesByLabel(loadSources(db, [{ session: 's', seq: r1 }])), { before: [A] }, 'loadSources returns rows as stored');
});

test('fits compose along chains and only forward in seq order', async (t) => {
  const { db, withImage, fit } = imageSession(t);
  const first = await withImage('r5 A', A);
  fit(A, B); // "seq 10"
  await withImage('r15 B', B);
  await withImage('r15 A', A);
  fit(B, C); // "seq 20"
  const last = await withImage('r25 B', B);
  const rows = [...foldSources(db, 's', first, last)].flat();
  assert.deepEqual(imagesByLabel(rows), {
    'r5 A': [C], // A -> B at 10, then B -> C at 20
    'r15 B': [C], // B -> C at 20
    'r15 A': [A], // A -> B was before it
    'r25 B': [B], // nothing after it
  });
});

test('a hash fitted, uploaded again and fitted again resolves per occurrence', async (t) => {
  const { db, withImage, fit } = imageSession(t);
  const first = await withImage('r5 A', A);
  fit(A, B); // 10
  await withImage('r12 A', A);
  fit(B, C); // 20: B (from the first fit) goes on to C for rows before it
  fit(A, D); // 30
  const last = await withImage('r35 A', A);
  const rows = [...foldSources(db, 's', first, last)].flat();
  assert.deepEqual(imagesByLabel(rows), { 'r5 A': [C], 'r12 A': [D], 'r35 A': [A] });
});

test('fits of another session do not apply; an elided image stays marked elided', async (t) => {
  const { db, withImage, fit } = imageSession(t);
  const other = openSession(db, { session: 'o' });
  const r1 = await withImage('mine', A);
  const r2 = await withImage('elided', C);
  fit(A, B, other.sid);
  fit(C, D);
  const body = JSON.parse(db.prepare('SELECT body FROM transcript WHERE seq = ?').pluck().get(r2) as string) as { content: Array<{ elided?: boolean }> };
  body.content[1]!.elided = true;
  db.prepare('UPDATE transcript SET body = ? WHERE seq = ?').run(JSON.stringify(body), r2);
  const rows = [...foldSources(db, 's', r1, r2)].flat();
  assert.deepEqual(imagesByLabel(rows), { mine: [A], elided: [D] });
  const elided = rows[1]!.body;
  assert.ok(elided.kind === 'user');
  assert.deepEqual(elided.content[1], { ...part(D), elided: true });
});

test('fits apply to tool-result images too', async (t) => {
  const { db, fit } = imageSession(t);
  const { seqs } = await appendRows(db, 's', [
    assistant('look', ['c1']),
    RowInOf({ kind: 'tool_result', call_id: 'c1', is_error: false, content: [{ type: 'image', hash: A }] }),
  ]);
  fit(A, C);
  const rows = [...foldSources(db, 's', seqs[0]!, seqs[1]!)].flat();
  const result = rows[1]!.body;
  assert.ok(result.kind === 'tool_result');
  assert.deepEqual(result.content[0], part(C));
});

// ---------------------------------------------------------------------------------------------
// Units

test('units: user rows and image fits start units, earlier rows form a leading unit', async (t) => {
  const { db, fit } = imageSession(t);
  openSession(db, { session: 'other' });
  // A leading run without a user row: an assistant turn and its result.
  const lead = (await appendRows(db, 's', [assistant('hello', ['c1']), toolResult('c1', 'ok')])).seqs;
  const u1 = (await appendRows(db, 's', [user('one'), assistant('a1')])).seqs;
  await appendRows(db, 'other', [user('elsewhere')]);
  const f = fit(A, B);
  const after = (await appendRows(db, 's', [assistant('a2')])).seqs;
  const u2 = (await appendRows(db, 's', [user('two', { origin: 'notes' })])).seqs;
  const all = units(db, 's');
  assert.deepEqual(all, [
    { start: lead[0], end: lead[1], user: false },
    { start: u1[0], end: u1[1], user: true },
    { start: f, end: after[0], user: false },
    { start: u2[0], end: u2[0], user: true },
  ]);
  assert.equal(countUnitsAfter(db, 's', 0), 4);

  // After a seq inside a unit: the rest of that unit leads.
  assert.deepEqual(units(db, 's', { after: u1[0]! }), [
    { start: u1[1], end: u1[1], user: false },
    { start: f, end: after[0], user: false },
    { start: u2[0], end: u2[0], user: true },
  ]);
  assert.equal(countUnitsAfter(db, 's', u1[0]!), 3);
  // After the end of a unit: whole units only.
  assert.deepEqual(units(db, 's', { after: u1[1]! }), all.slice(2));
  assert.equal(countUnitsAfter(db, 's', u1[1]!), 2);
  // Through a seq: the last unit ends at the newest row at or below it.
  assert.deepEqual(units(db, 's', { through: f }), [...all.slice(0, 2), { start: f, end: f, user: false }]);
  assert.deepEqual(units(db, 's', { after: u2[0]! }), []);
  assert.equal(countUnitsAfter(db, 's', u2[0]!), 0);
});

test('units and countUnitsAfter agree for every cut and never decode a body', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  openSession(db, { session: 'x' });
  const rows: RowIn[] = [];
  for (let i = 0; i < 40; i++) rows.push(i % 3 === 0 ? user(`u${i}`) : assistant(`a${i}`));
  const { seqs } = await appendRows(db, 's', rows.slice(1));
  await appendRows(db, 'x', [user('x')]);
  const more = (await appendRows(db, 's', [user('late'), assistant('tail')])).seqs;
  // Bodies are unreadable: units work from row_class and seq alone.
  db.prepare("UPDATE transcript SET body = 'not json'").run();
  const all = units(db, 's');
  assert.equal(all[0]!.user, false, 'the session starts with an assistant row');
  assert.equal(all.length, 1 + 13 + 1);
  assert.equal(all[all.length - 1]!.end, more[1]);
  for (const cut of [0, ...seqs, ...more]) {
    assert.equal(countUnitsAfter(db, 's', cut), units(db, 's', { after: cut }).length, `after ${cut}`);
  }
  // Units tile the session's rows with no gap and no overlap.
  const covered = all.flatMap((u) => [...seqs, ...more].filter((s) => s >= u.start && s <= u.end));
  assert.deepEqual(covered, [...seqs, ...more]);
  assert.deepEqual(units(db, 'x'), [{ start: more[0]! - 1, end: more[0]! - 1, user: true }]);
  assert.throws(() => units(db, 'nope'), isAlbedo('unknown_session'));
});

test('withRows runs inside the append: it sees the seqs, and a failure in it stores none of the rows', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 'w' });
  const seen: number[][] = [];
  const ok = await appendRows(db, 'w', [user('one'), user('two')], { withRows: (r) => void seen.push([...r.seqs, Number(db.inTransaction)]) });
  assert.deepEqual(seen, [[...ok.seqs, 1]], 'called once, inside the transaction, with the seqs');
  await assert.rejects(
    appendRows(db, 'w', [user('three')], {
      withRows: () => {
        throw new Error('the bookkeeping failed');
      },
    }),
    /the bookkeeping failed/,
  );
  const texts = db.prepare<[], { n: number }>("SELECT count(*) AS n FROM transcript t JOIN sessions s ON s.sid = t.sid WHERE s.name = 'w'").get();
  assert.equal(texts?.n, 2, 'the failed batch left no row');
});
