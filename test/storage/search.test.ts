// Literal search: Unicode case-insensitive matching, counting every match while returning one
// page, session and workspace scopes, seq gaps, and the trigram index agreeing with the scan.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { AlbedoError } from '../../protocol/errors.ts';
import { TranscriptGrepParams, type ParamsIn, type Result } from '../../protocol/methods.ts';
import type { Db } from '../../storage/db.ts';
import { fold, grep, indexMatches, matchSql, scanMatches, trigramQuery, type SeqRange } from '../../storage/search/grep.ts';
import { catchUpSearchIndex, indexedThrough, indexPending, mergeSearchIndex, searchIndexLag, searchIndexLagSteps } from '../../storage/search/indexer.ts';
import { deleteSession, openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { count, tempDb, user } from './factories.ts';
import { recordingDb } from './recording-db.ts';

const noYield = (): Promise<void> => Promise.resolve();

function search(db: Db, params: ParamsIn<'transcript_grep'>, range?: SeqRange): Promise<Result<'transcript_grep'>> {
  return grep(db, TranscriptGrepParams.parse(params), { yieldEvery: noYield, ...(range === undefined ? {} : { range }) });
}

async function add(db: Db, session: string, ...texts: string[]): Promise<number[]> {
  return (await appendRows(db, session, texts.map((x) => user(x)))).seqs;
}

function indexAll(db: Db): number {
  let n = 0;
  for (let k = indexPending(db, 1000); k > 0; k = indexPending(db, 1000)) n += k;
  return n;
}

/** Runs a search with no index, half an index and a full index; all three must agree. */
async function agree(
  t: TestContext,
  build: (db: Db) => Promise<void>,
  queries: Array<ParamsIn<'transcript_grep'> & { range?: SeqRange }>,
): Promise<Result<'transcript_grep'>[]> {
  const plain = tempDb(t);
  await build(plain);
  const half = tempDb(t);
  await build(half);
  indexPending(half, Math.max(1, Math.floor(count(half, 'SELECT count(*) FROM transcript') / 2)));
  assert.ok(indexedThrough(half) > 0 && searchIndexLag(half) > 0);
  const full = tempDb(t);
  await build(full);
  indexAll(full);
  assert.equal(searchIndexLag(full), 0);
  const out: Result<'transcript_grep'>[] = [];
  for (const { range, ...q } of queries) {
    const scanned = await search(plain, q, range);
    assert.deepEqual(await search(half, q, range), scanned, `half-indexed ${JSON.stringify({ ...q, range })}`);
    assert.deepEqual(await search(full, q, range), scanned, `indexed ${JSON.stringify({ ...q, range })}`);
    out.push(scanned);
  }
  return out;
}

test('fold is NFC plus full case folding', () => {
  assert.equal(fold('ÉCOLE'), 'école');
  assert.equal(fold('E\u0301COLE'), 'école');
  assert.equal(fold('STRASSE'), 'strasse');
  assert.equal(fold('Straße'), 'strasse', 'ß folds to ss');
  assert.equal(fold('GROẞE'), 'grosse', 'capital sharp s too');
  assert.equal(fold('GRÖSSE'), fold('Größe'));
  assert.equal(fold('ὈΔΥΣΣΕΎΣ'), fold('ὀδυσσεύς'), 'final sigma folds like the medial one');
  assert.equal(fold('ﬁle'), 'file', 'ligatures expand');
  assert.equal(fold('ŉ'), 'ʼn');
  assert.equal(fold('µ'), 'μ', 'micro sign is mu');
  assert.equal(fold('ſ'), 's', 'long s');
  assert.equal(fold('ᾼ'), 'αι', 'iota subscript');
  assert.equal(fold('İ'), 'i\u0307');
  assert.equal(fold('Ꭰ'), fold('ꭰ'), 'both Cherokee cases fold alike');
});

test('matching is literal and Unicode case-insensitive, on every path', async (t) => {
  const build = async (db: Db): Promise<void> => {
    openSession(db, { session: 's' });
    await add(
      db,
      's',
      "l'école est fermée",
      'ÉCOLE NORMALE',
      'une e\u0301cole décomposée',
      'ecole sans accent',
      'STRASSE in capitals',
      'die straße',
      'a.b*c literal (dots) [brackets]',
      'say "quoted" words',
      '\u212Aelvin sign',
      'foo()\u037E greek question mark',
      'ISTANBUL İ',
    );
  };
  const [ecole, strasse, strasseLower, regex, quoted, kelvin, greek, dotted] = await agree(t, build, [
    { pattern: 'ÉCOLE' },
    { pattern: 'straße' },
    { pattern: 'strasse' },
    { pattern: 'a.b*c' },
    { pattern: '"QUOTED"' },
    { pattern: 'KELVIN' },
    { pattern: 'foo();' },
    { pattern: 'bul i' },
  ]);
  assert.equal(ecole!.total, 3, 'école, ÉCOLE and the decomposed form; not "ecole"');
  assert.deepEqual(strasse!.matches.map((m) => m.preview), ['STRASSE in capitals', 'die straße'], 'ß folds to ss');
  assert.deepEqual(strasseLower!.matches.map((m) => m.preview), ['STRASSE in capitals', 'die straße']);
  assert.equal(regex!.total, 1, 'the pattern is not a regular expression');
  assert.equal(quoted!.total, 1, 'double quotes are literal, also in the trigram query');
  assert.equal(kelvin!.total, 1, 'the Kelvin sign folds to k');
  assert.equal(greek!.total, 1, 'U+037E normalizes to ";"');
  assert.equal(dotted!.total, 1, 'İ lower-cases to i + U+0307, so a pattern ending in i finds it');
});

test('one- and two-character patterns count exactly on every path: row ends, short rows, any script', async (t) => {
  const build = async (db: Db): Promise<void> => {
    openSession(db, { session: 's' });
    openSession(db, { session: 'o' });
    await add(db, 's', 'db', 'x', 'ends in DB', 'DB starts it', 'no match here', 'mid dbx', 'Größe', 'STRASSE', 'ΟΔΥΣΣΕΥΣ', '😀 grin', 'a😀', 'ﬁ', 'Zz');
    await add(db, 'o', 'd b', 'dB', 'ö');
  };
  const [db, d, oe, ss, sharp, sigma, finalSigma, emoji, fi, z, dbOther] = await agree(t, build, [
    { pattern: 'db' },
    { pattern: 'D' },
    { pattern: 'Ö' },
    { pattern: 'ss' },
    { pattern: 'ß' },
    { pattern: 'σ' },
    { pattern: 'ς' },
    { pattern: '😀' },
    { pattern: 'FI' },
    { pattern: 'z' },
    { pattern: 'db', session: 'o' },
  ]);
  assert.equal(db!.total, 5, 'a whole row, a row end, a row start, a middle, another session');
  assert.equal(d!.total, 6);
  assert.equal(oe!.total, 2);
  assert.equal(ss!.total, 2, 'Größe and STRASSE');
  assert.equal(sharp!.total, 2, 'a one-character pattern that folds to two');
  assert.equal(sigma!.total, 1);
  assert.equal(finalSigma!.total, 1);
  assert.equal(emoji!.total, 2, 'a character outside the BMP, also at a row end');
  assert.equal(fi!.total, 1, 'the ligature row');
  assert.equal(z!.total, 1, 'a row counts once');
  assert.equal(dbOther!.total, 1);
});

test('the trigram query is the folded pattern as one phrase, for any script, from three characters', () => {
  assert.equal(trigramQuery('ab'), null);
  assert.equal(trigramQuery('🇫🇷'), null, 'two code points');
  assert.equal(trigramQuery('ÉCOLE'), '"école"');
  assert.equal(trigramQuery('E\u0301COLE'), '"école"', 'NFC before lower-casing');
  assert.equal(trigramQuery('Foo'), '"foo"');
  assert.equal(trigramQuery('say "hi"'), '"say ""hi"""');
  assert.equal(trigramQuery('foo();bar`baz'), '"foo();bar`baz"');
  assert.equal(trigramQuery('taxi'), '"taxi"');
});

test('total counts every match while one page of them is returned', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  const texts: string[] = [];
  for (let i = 0; i < 20; i++) texts.push(i % 3 === 0 ? `row ${i} has the Needle` : `row ${i} has nothing`);
  const seqs = await add(db, 's', ...texts);
  const expected = seqs.filter((_s, i) => i % 3 === 0);
  for (const indexed of [false, true]) {
    if (indexed) indexAll(db);
    const pages: number[] = [];
    let offset: number | null = 0;
    const offsets: Array<number | null> = [];
    while (offset !== null) {
      const r: Result<'transcript_grep'> = await search(db, { pattern: 'needle', offset, limit: 3 });
      assert.equal(r.total, 7);
      assert.equal(r.offset, offset);
      assert.ok(r.matches.length <= 3);
      pages.push(...r.matches.map((m) => m.seq));
      offset = r.next_offset;
      offsets.push(offset);
    }
    assert.deepEqual(pages, expected, 'pages concatenate to every match in seq order');
    assert.deepEqual(offsets, [3, 6, null]);
    assert.deepEqual(await search(db, { pattern: 'needle', offset: 7 }), { total: 7, offset: 7, next_offset: null, matches: [] });
    assert.deepEqual(await search(db, { pattern: 'needle', offset: 100 }), { total: 7, offset: 100, next_offset: null, matches: [] });
    assert.deepEqual(await search(db, { pattern: 'absent' }), { total: 0, offset: 0, next_offset: null, matches: [] });
  }
});

test('a session-scoped search excludes other sessions; a workspace filters cross-session ones', async (t) => {
  const build = async (db: Db): Promise<void> => {
    openSession(db, { session: 'a', workspace: '/w/one' });
    openSession(db, { session: 'b', workspace: '/w/one' });
    openSession(db, { session: 'c', workspace: '/w/two' });
    openSession(db, { session: 'd' });
    for (let i = 0; i < 3; i++) {
      for (const s of ['a', 'b', 'c', 'd']) await add(db, s, `${s}${i}: shared marker text`, `${s}${i}: filler`);
    }
  };
  const [inA, all, one, two, none, aInTwo] = await agree(t, build, [
    { pattern: 'marker', session: 'a' },
    { pattern: 'marker' },
    { pattern: 'marker', workspace: '/w/one' },
    { pattern: 'MARKER', workspace: '/w/two' },
    { pattern: 'marker', workspace: '/w/none' },
    { pattern: 'marker', session: 'a', workspace: '/w/two' },
  ]);
  assert.equal(inA!.total, 3);
  assert.ok(inA!.matches.every((m) => m.session === 'a'));
  assert.equal(all!.total, 12);
  assert.deepEqual(new Set(one!.matches.map((m) => m.session)), new Set(['a', 'b']));
  assert.equal(one!.total, 6);
  assert.deepEqual(new Set(two!.matches.map((m) => m.session)), new Set(['c']));
  assert.equal(none!.total, 0);
  assert.equal(aInTwo!.total, 0, 'a session outside the workspace matches nothing');
  const seqs = all!.matches.map((m) => m.seq);
  assert.deepEqual(seqs, [...seqs].sort((x, y) => x - y), 'matches come in seq order');

  const db = tempDb(t);
  await assert.rejects(search(db, { pattern: 'x', session: 'nope' }), (e: unknown) => e instanceof AlbedoError && e.code === 'unknown_session');
});

test('seq gaps from a deleted session do not break paging over several batches', async (t) => {
  const build = async (db: Db): Promise<void> => {
    openSession(db, { session: 'keep' });
    openSession(db, { session: 'gone' });
    openSession(db, { session: 'other' });
    const batch = (prefix: string, n: number): string[] => Array.from({ length: n }, (_v, i) => (i % 500 === 7 ? `${prefix} ${i} findme` : `${prefix} ${i} plain`));
    await add(db, 'keep', ...batch('k1', 1500));
    await add(db, 'gone', ...batch('g', 5000));
    await add(db, 'other', ...batch('o', 2500));
    await add(db, 'keep', ...batch('k2', 1500));
    deleteSession(db, 'gone');
  };
  const [scoped, global] = await agree(t, build, [{ pattern: 'findme', session: 'keep', limit: 500 }, { pattern: 'findme', limit: 500 }]);
  assert.equal(scoped!.total, 6);
  assert.equal(global!.total, 11);
  assert.ok(global!.matches.every((m) => m.session !== 'gone'));
});

test('the index applies scope, count and page in SQL as the scan does: every pattern length, session, workspace, seq range, offset', async (t) => {
  const words = ['zebra', 'db', 'DB-pool', 'error', 'ERRORS', 'Größe', 'a*b', 'why?', '[x]', 'plain', 'filler', 'x'];
  const build = async (db: Db): Promise<void> => {
    openSession(db, { session: 'a', workspace: '/w' });
    openSession(db, { session: 'b', workspace: '/w' });
    openSession(db, { session: 'c', workspace: '/v' });
    openSession(db, { session: 'd' });
    let seed = 11;
    const rnd = (n: number): number => (seed = (seed * 48271) % 2147483647) % n;
    for (let b = 0; b < 12; b++) {
      const texts = Array.from({ length: 60 }, () => Array.from({ length: 1 + rnd(3) }, () => words[rnd(words.length)]).join(' '));
      await add(db, ['a', 'b', 'c', 'd'][b % 4]!, ...texts);
    }
  };
  const queries: Array<ParamsIn<'transcript_grep'> & { range?: SeqRange }> = [];
  for (const pattern of ['Z', '*', '?', '[', ']', 'db', 'ß', 'error', 'GRÖSSE', 'nothing']) {
    for (const scope of [{}, { session: 'a' }, { workspace: '/w' }, { workspace: '/v', session: 'a' }]) {
      for (const offset of [0, 5, 90, 1000]) queries.push({ pattern, ...scope, offset, limit: 7 });
    }
    queries.push({ pattern, session: 'a', range: { from: 100, to: 400 }, limit: 9 }, { pattern, session: 'a', range: { from: 500, to: 520 }, offset: 2, limit: 3 });
    queries.push({ pattern, range: { from: 30, to: 650 }, offset: 4, limit: 20 }, { pattern, workspace: '/w', range: { from: 400, to: 300 } });
  }
  const results = await agree(t, build, queries);
  assert.ok(results.some((r) => r.total > 50 && r.matches.length === 7 && r.next_offset !== null), 'some answers are one page of many');
  assert.ok(results.some((r) => r.total > 0 && r.matches.length === 0), 'some pages are past the end');
  assert.ok(results[queries.findIndex((q) => q.pattern === '*')]!.total > 0, 'GLOB wildcards as patterns are matched literally (the scan agrees)');
});

test('an index answer carries the count and only the page, scoped in SQL', async (t) => {
  const db = tempDb(t);
  const a = openSession(db, { session: 'a' }).sid;
  const b = openSession(db, { session: 'b' }).sid;
  const inA = await add(db, 'a', ...Array.from({ length: 40 }, (_v, i) => `a ${i} ${i % 2 === 0 ? 'needle' : 'hay'} *`));
  const inB = await add(db, 'b', ...Array.from({ length: 40 }, (_v, i) => `b ${i} needle`));
  indexAll(db);
  const all = { from: 1, to: Number.MAX_SAFE_INTEGER, offset: 0, limit: 3 };
  const answer = (ask: Parameters<typeof indexMatches>[1]): number[] => [...indexMatches(db, ask)];
  assert.deepEqual(answer({ ...all, needle: 'needle', sids: null }), [60, inA[0], a, inA[2], a, inA[4], a]);
  assert.deepEqual(answer({ ...all, needle: 'needle', sids: [b], offset: 38 }), [40, inB[38], b, inB[39], b]);
  assert.deepEqual(answer({ ...all, needle: 'needle', sids: [a], from: inA[10]!, to: inA[19]! }), [5, inA[10], a, inA[12], a, inA[14], a]);
  assert.deepEqual(answer({ ...all, needle: '*', sids: [a, b], offset: 39 }), [40, inA[39], a], 'a GLOB wildcard is matched literally');
  assert.deepEqual(answer({ ...all, needle: '?', sids: null }), [0]);
  assert.deepEqual(answer({ ...all, needle: 'ne', sids: [b], limit: 1 }), [40, inB[0], b]);
});

test('a two-character pattern reads the index and the tail index, never every indexed row', (t) => {
  const db = tempDb(t);
  for (const scope of ['all', 'one', 'some'] as const) {
    const plan = db
      .prepare(`EXPLAIN QUERY PLAN ${matchSql('pair', scope)}`)
      .all({ from: 1, to: 10, needle: 'db', top: 'db\u{10ffff}', ...(scope === 'one' ? { sid: 1 } : scope === 'some' ? { sids: '[1, 2]' } : {}) })
      .map((r) => (r as { detail: string }).detail);
    assert.ok(plan.some((d) => d.includes('search_rows_tail')), plan.join('; '));
    assert.ok(!plan.some((d) => /^SCAN (r|search_rows)\b/.test(d)), plan.join('; '));
  }
});

test('the trigram index and the scan give identical results', async (t) => {
  // Besides plain words: decomposed text (NFD é), Greek final sigma, Turkish dotted İ, the
  // Kelvin sign, the Greek question mark (NFC ';'), and CJK: folding must agree on every path.
  const words = ['alpha', 'Beta', 'GAMMA', 'delta', 'épsilon', 'e\u0301psilon', 'zeta', 'eta;', 'eta\u037e', 'the', '"theta"', 'iota\nkappa', 'ΟΔΟΣ', 'οδος', 'İSTANBUL', '\u212aelvin', '漢字テキスト'];
  const build = async (db: Db): Promise<void> => {
    openSession(db, { session: 's', workspace: '/w' });
    openSession(db, { session: 't' });
    let seed = 7;
    const rnd = (n: number): number => (seed = (seed * 48271) % 2147483647) % n;
    for (let b = 0; b < 6; b++) {
      const texts = Array.from({ length: 400 }, () => Array.from({ length: 6 }, () => words[rnd(words.length)]).join(' '));
      await add(db, b % 2 === 0 ? 's' : 't', ...texts);
    }
  };
  const queries: ParamsIn<'transcript_grep'>[] = [];
  for (const pattern of ['alpha beta', 'GAMMA delta', 'eta; the', 'épsilon', 'ÉPSILON', 'ta', 'a\nk', '"theta" iota', 'zeta zeta zeta', 'nothing here', 'οδος', 'ΟΔΟΣ', 'istanbul', 'i\u0307stanbul', 'kelvin', 'テキスト', 'eta;']) {
    queries.push({ pattern, limit: 7 }, { pattern, session: 's', offset: 5, limit: 11 }, { pattern, workspace: '/w', limit: 3 });
  }
  const results = await agree(t, build, queries);
  assert.ok(results.some((r) => r.total > 100), 'some queries match many rows');
  assert.ok(results.some((r) => r.total > 0 && r.total < 20), 'some match few');
});

test('the indexed path really uses the trigram index; rows past the cursor are scanned', async (t) => {
  const base = tempDb(t);
  openSession(base, { session: 's' });
  await add(base, 's', 'first needle', 'other');
  indexAll(base);
  await add(base, 's', 'late needle');
  const { db, executed } = recordingDb(base);
  const r = await grep(db, TranscriptGrepParams.parse({ pattern: 'needle' }), { yieldEvery: noYield });
  assert.equal(r.total, 2);
  assert.ok(executed.some((sql) => sql.includes('MATCH')));
  executed.length = 0;
  await grep(db, TranscriptGrepParams.parse({ pattern: 'ne' }), { yieldEvery: noYield });
  assert.ok(!executed.some((sql) => sql.includes('MATCH')), 'a two-character pattern is scanned');
});

test('a row whose text changes after indexing is found by its new text only', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  const [seq] = await add(db, 's', 'the original wording');
  await add(db, 's', 'unrelated');
  indexAll(db);
  // The body rewritten in place (as image elision does), then a kept text (migration 16) set.
  db.prepare("UPDATE transcript SET body = json_set(body, '$.content[0].text', 'a body edited in place') WHERE seq = ?").run(seq);
  assert.equal((await search(db, { pattern: 'original' })).total, 0);
  assert.deepEqual((await search(db, { pattern: 'EDITED IN' })).matches.map((m) => m.seq), [seq]);
  assert.deepEqual((await search(db, { pattern: 'DY' })).matches.map((m) => m.seq), [seq], 'two-character patterns read the refreshed search_rows');
  db.prepare('UPDATE transcript SET legacy_text = ? WHERE seq = ?').run('the rewritten phrasing', seq);
  assert.equal((await search(db, { pattern: 'edited' })).total, 0);
  assert.deepEqual((await search(db, { pattern: 'REWRITTEN' })).matches.map((m) => m.seq), [seq]);
});

test('previews are one line around the first match', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  const long = `${'x'.repeat(300)}\nline with the TARGET word\r\nnext line ${'y'.repeat(300)}`;
  await add(db, 's', long, 'short\ntarget here', `İstanbul ${'z'.repeat(300)} target`);
  const r = await search(db, { pattern: 'target' });
  const [p1, p2, p3] = r.matches.map((m) => m.preview);
  assert.ok(p1!.includes('line with the TARGET word next line'), p1);
  assert.ok(p1!.startsWith('…') && p1!.endsWith('…'));
  assert.ok(!/[\r\n]/.test(p1!));
  assert.ok(p1!.length <= 162);
  assert.equal(p2, 'short target here');
  assert.ok(p3!.startsWith('İstanbul'), 'when folding changes the length the preview starts at the row start');
});

test('a long search yields between batches', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  await add(db, 's', ...Array.from({ length: 5000 }, (_v, i) => `row ${i}`));
  let yields = 0;
  const r = await grep(db, TranscriptGrepParams.parse({ pattern: 'row 4999' }), {
    yieldEvery: async () => {
      yields++;
    },
  });
  assert.equal(r.total, 1);
  assert.ok(yields >= 3, `yielded ${yields} times`);
});

test('a scan batch of unindexed rows goes newest first, ends on its time budget, not a row count, and says where the next ends', async (t) => {
  const db = tempDb(t);
  const a = openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  const seqs: number[] = [];
  for (let i = 0; i < 6; i++) seqs.push(...(await add(db, i % 2 === 0 ? 'a' : 'b', `row ${i} ${i % 3 === 0 ? 'Needle' : 'hay'}`)));
  // A budget of 0 is used up by the first row: one row per batch, each batch naming it.
  const visited: number[] = [];
  const found: number[] = [];
  let to = Number.MAX_SAFE_INTEGER;
  for (let more = true; more;) {
    const batch = scanMatches(db, { needle: 'needle', after: 0, to, sid: null, budgetMs: 0 });
    for (let i = 2; i < batch.length; i += 2) found.push(batch[i]!);
    more = batch[1] === 1;
    if (more) visited.push(batch[0]!);
    to = batch[0]! - 1;
  }
  assert.deepEqual(visited, [...seqs].reverse());
  assert.deepEqual(found, [seqs[3], seqs[0]]);
  // A generous budget takes the rest of the range in one batch, a session's rows only, between `after` and `to`.
  const one = scanMatches(db, { needle: 'row', after: seqs[0]!, to: seqs[4]!, sid: a.sid, budgetMs: 60_000 });
  assert.deepEqual([...one], [seqs[2], 0, seqs[4], a.sid, seqs[2], a.sid]);
});

test('a search whose scan meets the index cursor moving up stops there and asks the index for the rest', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  const seqs = await add(db, 's', ...Array.from({ length: 40 }, (_v, i) => `row ${i} ${i % 4 === 0 ? 'Needle' : 'hay'}`));
  assert.equal(indexPending(db, 10), 10);
  const inline = await grep(db, TranscriptGrepParams.parse({ pattern: 'needle', offset: 2, limit: 5 }));
  // The scan, one row per batch, while an indexer indexes three rows between two batches.
  const scannedRows: number[] = [];
  let asks = 0;
  const r = await grep(db, TranscriptGrepParams.parse({ pattern: 'needle', offset: 2, limit: 5 }), {
    hits: async (ask) => {
      asks++;
      assert.ok(ask.to <= indexedThrough(db), 'the index is asked only for rows it holds');
      return indexMatches(db, ask);
    },
    scan: async (ask) => {
      const batch = scanMatches(db, { ...ask, budgetMs: 0 });
      if (batch[1] === 1) scannedRows.push(batch[0]!);
      indexPending(db, 3);
      return batch;
    },
  });
  assert.deepEqual(r, inline);
  assert.equal(r.total, 10);
  assert.equal(asks, 1);
  // 30 rows were past the cursor: the scan took the newest and the indexer the oldest, none twice.
  assert.ok(scannedRows.length < 30 && scannedRows.length > 0, `scanned ${scannedRows.length}`);
  assert.ok(Math.min(...scannedRows) > indexedThrough(db) - 3);
  assert.equal(Math.max(...scannedRows), seqs.at(-1));
});

test("pages over a long scan of unindexed matches, newest first, equal the index's pages: counts, order, offsets near both ends", async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  openSession(db, { session: 'other' });
  for (let k = 0; k < 6; k++) await add(db, k % 3 === 2 ? 'other' : 's', ...Array.from({ length: 500 }, (_v, i) => `row ${k}.${i} ${i % 2 === 0 ? 'Match' : 'hay'}`));
  indexPending(db, 300);
  const pages = [{ offset: 0, limit: 3 }, { offset: 7, limit: 5 }, { offset: 995, limit: 10 }, { offset: 1490, limit: 20 }];
  const scanned = [];
  for (const page of pages) for (const session of ['s', undefined]) scanned.push(await grep(db, TranscriptGrepParams.parse({ pattern: 'match', ...page, ...(session === undefined ? {} : { session }) })));
  catchUpSearchIndex(db);
  let k = 0;
  for (const page of pages) {
    for (const session of ['s', undefined]) {
      const indexed = await grep(db, TranscriptGrepParams.parse({ pattern: 'match', ...page, ...(session === undefined ? {} : { session }) }));
      assert.deepEqual(scanned[k++], indexed);
      assert.equal(indexed.total, session === undefined ? 1500 : 1000);
    }
  }
});

test("an indexed search reads its page's previews a row at a time, letting the event loop turn between long rows", async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  // Twelve rows of ~600 KB: deriving each one's text (inflate, parse, render) and folding it for
  // its preview takes milliseconds, so the page's previews are tens of milliseconds of work.
  await add(db, 's', ...Array.from({ length: 12 }, (_v, i) => `needle ${i} ${'lorem ipsum dolor sit amet '.repeat(22_000)}`));
  catchUpSearchIndex(db);
  let yields = 0;
  const r = await grep(db, TranscriptGrepParams.parse({ pattern: 'needle', limit: 20 }), {
    yieldEvery: async () => {
      yields++;
    },
  });
  assert.equal(r.total, 12);
  assert.ok(r.matches.every((m, i) => m.preview.startsWith(`needle ${i} lorem`)));
  // Without the index work to do, the scan part yields once; the rest come from the previews.
  assert.ok(yields >= 3, `yielded ${yields} times`);
});

test('indexPending indexes in bounded batches and reports when it is caught up', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  const seqs = await add(db, 's', ...Array.from({ length: 25 }, (_v, i) => `row ${i}`));
  assert.equal(searchIndexLag(db), 25);
  assert.equal(indexPending(db, 10), 10);
  assert.equal(indexedThrough(db), seqs[9]);
  assert.equal(searchIndexLag(db), 15);
  assert.equal(indexPending(db, 10), 10);
  assert.equal(indexPending(db, 10), 5);
  assert.equal(indexPending(db, 10), 0);
  assert.equal(indexedThrough(db), seqs[24]);
  assert.equal(count(db, 'SELECT count(*) FROM transcript_fts WHERE transcript_fts MATCH \'"row"\''), 25);
});

test('searchIndexLagSteps counts the rows behind the cursor a window of seqs per step, deleted rows left out', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  openSession(db, { session: 'gone' });
  await add(db, 's', 'first');
  indexAll(db);
  // 3,000 seqs that will be gone, then 5 rows: a backlog spanning several windows with 5 rows in it.
  await appendRows(db, 'gone', Array.from({ length: 3000 }, (_v, i) => user(`gone ${i}`)));
  deleteSession(db, 'gone');
  await add(db, 's', 'a', 'b', 'c', 'd', 'e');
  let steps = 0;
  const counting = searchIndexLagSteps(db);
  let r = counting.next();
  for (; r.done !== true; r = counting.next()) steps++;
  assert.equal(r.value, 5);
  assert.ok(steps >= 3, `3,005 seqs behind in ${steps} steps`);
  assert.equal(searchIndexLag(db), 5);
  indexAll(db);
  assert.equal(searchIndexLag(db), 0);
});

test('indexPending stops at its character budget, but always indexes one row', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  const seqs = await add(db, 's', 'a'.repeat(500), 'b'.repeat(500), 'c'.repeat(500), 'd'.repeat(5000));
  assert.equal(indexPending(db, 100, 1100), 2, 'two rows fit in 1,100 characters, the third does not');
  assert.equal(indexedThrough(db), seqs[1]);
  assert.equal(indexPending(db, 100, 100), 1, 'a row longer than the budget is indexed alone');
  assert.equal(indexedThrough(db), seqs[2]);
  assert.equal(indexPending(db, 100, 100), 1);
  assert.equal(searchIndexLag(db), 0);
  assert.equal(count(db, 'SELECT count(*) FROM transcript_fts WHERE transcript_fts MATCH \'"ddd"\''), 1);
});

test('the row index merges only when asked (migration 20), in steps that end once nothing is left to merge', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  assert.equal(count(db, "SELECT v FROM transcript_fts_config WHERE k = 'automerge'"), 0);
  // One segment per commit: 12 single-row batches leave 12 segments unmerged (FTS5's crisis
  // merge, the backstop that stays on, waits for 16 on one level).
  const texts = Array.from({ length: 12 }, (_v, i) => `row ${i} mentions widget-${i % 4} and gadget`);
  await add(db, 's', ...texts);
  while (indexPending(db, 1) > 0);
  const before = await search(db, { session: 's', pattern: 'widget-3', limit: 100 });
  const dataRows = count(db, 'SELECT count(*) FROM transcript_fts_data');
  assert.ok(dataRows >= 12, `${dataRows} index records for 12 segments`);
  assert.equal(mergeSearchIndex(db, 4), true);
  assert.ok(count(db, 'SELECT count(*) FROM transcript_fts_data') < dataRows, 'merging folded segments together');
  assert.equal(mergeSearchIndex(db, 4), false, 'nothing is left to merge');
  assert.deepEqual(await search(db, { session: 's', pattern: 'widget-3', limit: 100 }), before);
  assert.equal(before.total, 3);
});

test('catchUpSearchIndex indexes every pending row and leaves nothing to merge', async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  await add(db, 's', ...Array.from({ length: 30 }, (_v, i) => `line ${i}`));
  assert.equal(catchUpSearchIndex(db, 4), 30);
  assert.equal(searchIndexLag(db), 0);
  assert.equal(mergeSearchIndex(db, 1000), false);
  assert.equal(count(db, 'SELECT count(*) FROM transcript_fts WHERE transcript_fts MATCH \'"line"\''), 30);
});
