// The lcm-memory read queries: node pages counted and chosen in SQL with frontier flags and
// ordered children, describe, the leaf covering a row, grep over rows and summaries with node
// scope and separate paging (index, half index and scan agreeing), and expand as transcript_read.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { AlbedoError } from '../../protocol/errors.ts';
import { LcmExpandParams, LcmGrepParams, LcmListParams, TranscriptReadParams, type ParamsIn, type Result } from '../../protocol/methods.ts';
import type { Db } from '../../storage/db.ts';
import { describeNode, expandNode, grepTree, leafCovering, listNodes } from '../../storage/state/lcm-read.ts';
import { indexPending } from '../../storage/search/indexer.ts';
import { indexWaitingSummaries, SUMMARY_INDEX_CHARS } from '../../storage/state/lcm-tree.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { readTranscript } from '../../storage/transcript/read.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { assistant, tempDb, toolResult, user } from './factories.ts';
import { writeTree } from './lcm-trees.ts';

const noYield = (): Promise<void> => Promise.resolve();

/** Texts of session a's twelve rows; the tree covers the first ten. */
const A_TEXTS = [
  'start: the Zebra crossing',
  'nothing here',
  'école primaire',
  'still nothing',
  'second zebra sighting',
  'plain',
  'ÉCOLE NORMALE',
  'plain again',
  'a ZEBRA in leaf three',
  'end of leaf three',
  'tail zebra, not summarized',
  'tail end',
];

interface Fixture {
  db: Db;
  sid: number;
  /** Session a's seqs, which have gaps (session b's rows sit between them). */
  seqs: number[];
  /** Node ids: leaf1, leaf2, parent, leaf3, and b's leaf. */
  ids: { leaf1: number; leaf2: number; parent: number; leaf3: number; other: number };
}

async function fixture(t: TestContext, opts: { index?: 'none' | 'half' | 'full' } = {}): Promise<Fixture> {
  const db = tempDb(t);
  const a = openSession(db, { session: 'a' });
  const b = openSession(db, { session: 'b' });
  const seqs: number[] = [];
  for (const text of A_TEXTS) {
    seqs.push(...(await appendRows(db, 'a', [user(text)])).seqs);
    await appendRows(db, 'b', [user(`b row: zebra école ${text}`)]);
  }
  const [leaf1, leaf2, leaf3, parent] = writeTree(db, a.sid, {
    leaves: [
      { first: seqs[0]!, last: seqs[3]!, summary: 'Leaf one: a zebra crossed; notes on the école.' },
      { first: seqs[4]!, last: seqs[7]!, summary: 'Leaf two: plain rows only.' },
      { first: seqs[8]!, last: seqs[9]!, summary: 'Leaf three: ZEBRA again.\nSecond line.' },
    ],
    parents: [{ children: [0, 1], summary: 'Parent of one and two: zebras, écoles. ' + 'x'.repeat(300) }],
  });
  const [other] = writeTree(db, b.sid, { leaves: [{ first: 2, last: 4, summary: 'b summary: zebra école secret-of-b' }] });
  if (opts.index === 'full') { while (indexPending(db, 1000) > 0); }
  if (opts.index === 'half') indexPending(db, 9);
  return { db, sid: a.sid, seqs, ids: { leaf1: leaf1!, leaf2: leaf2!, parent: parent!, leaf3: leaf3!, other: other! } };
}

function list(db: Db, p: ParamsIn<'lcm_list'>): Result<'lcm_list'> {
  return listNodes(db, LcmListParams.parse(p));
}

function search(db: Db, p: ParamsIn<'lcm_grep'>): Promise<Result<'lcm_grep'>> {
  return grepTree(db, LcmGrepParams.parse(p), { yieldEvery: noYield });
}

function unknownNode(node: number) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof AlbedoError);
    assert.equal(err.code, 'unknown_node');
    assert.deepEqual(err.details, { node });
    assert.ok(!err.message.includes('b summary') && !err.message.includes('"b"'), err.message);
    return true;
  };
}

test("lcm_list counts the session's nodes and pages them by first_seq, children before parents, with frontier and children", async (t) => {
  const f = await fixture(t);
  const all = list(f.db, { session: 'a' });
  assert.equal(all.total, 4, "b's node is not counted");
  assert.deepEqual(all.nodes.map((n) => n.node), [f.ids.leaf1, f.ids.parent, f.ids.leaf2, f.ids.leaf3]);
  const byId = new Map(all.nodes.map((n) => [n.node, n]));
  assert.deepEqual(byId.get(f.ids.parent), {
    node: f.ids.parent,
    depth: 1,
    first_seq: f.seqs[0],
    last_seq: f.seqs[7],
    children: [f.ids.leaf1, f.ids.leaf2],
    frontier: true,
    estimated_tokens: Math.ceil(('Parent of one and two: zebras, écoles. ' + 'x'.repeat(300)).length / 4),
    preview: `Parent of one and two: zebras, écoles. ${'x'.repeat(160 - 39)}…`,
  });
  assert.equal(byId.get(f.ids.leaf1)!.frontier, false);
  assert.deepEqual(byId.get(f.ids.leaf1)!.children, []);
  assert.equal(byId.get(f.ids.leaf3)!.frontier, true);
  assert.equal(byId.get(f.ids.leaf3)!.preview, 'Leaf three: ZEBRA again. Second line.', 'one line, not cut');
  assert.equal(all.next_offset, null);

  // Pages of 3 then the rest reproduce the whole list.
  const p1 = list(f.db, { session: 'a', limit: 3 });
  assert.equal(p1.next_offset, 3);
  const p2 = list(f.db, { session: 'a', offset: p1.next_offset, limit: 3 });
  assert.equal(p2.next_offset, null);
  assert.deepEqual([...p1.nodes, ...p2.nodes], all.nodes);
  assert.deepEqual(list(f.db, { session: 'a', offset: 10 }), { total: 4, offset: 10, next_offset: null, nodes: [] });
  assert.deepEqual(list(f.db, { session: 'b' }).nodes.map((n) => n.node), [f.ids.other]);
});

test('lcm_describe returns a node with its links and summary; a missing or foreign node is unknown_node', async (t) => {
  const f = await fixture(t);
  assert.deepEqual(describeNode(f.db, { session: 'a', node: f.ids.leaf2 }), {
    node: f.ids.leaf2,
    depth: 0,
    first_seq: f.seqs[4],
    last_seq: f.seqs[7],
    parent: f.ids.parent,
    children: [],
    frontier: false,
    summary: 'Leaf two: plain rows only.',
    backend: 'test',
  });
  const parent = describeNode(f.db, { session: 'a', node: f.ids.parent });
  assert.equal(parent.parent, null);
  assert.equal(parent.frontier, true);
  assert.deepEqual(parent.children, [f.ids.leaf1, f.ids.leaf2]);
  assert.throws(() => describeNode(f.db, { session: 'a', node: f.ids.other }), unknownNode(f.ids.other));
  assert.throws(() => describeNode(f.db, { session: 'a', node: 999 }), unknownNode(999));
});

test('the leaf covering a row: each covered row names its leaf, tail rows name none', async (t) => {
  const f = await fixture(t);
  assert.deepEqual(
    f.seqs.map((s) => leafCovering(f.db, f.sid, s)),
    [f.ids.leaf1, f.ids.leaf1, f.ids.leaf1, f.ids.leaf1, f.ids.leaf2, f.ids.leaf2, f.ids.leaf2, f.ids.leaf2, f.ids.leaf3, f.ids.leaf3, null, null],
  );
});

test("lcm_grep finds rows and summaries, scoped to a node's range and subtree, the same with or without the index", async (t) => {
  const built = await Promise.all((['none', 'half', 'full'] as const).map((index) => fixture(t, { index })));
  for (const f of built) {
    const whole = await search(f.db, { session: 'a', pattern: 'ZEBRA' });
    assert.deepEqual(whole.source.matches.map((m) => [m.seq, m.node]), [
      [f.seqs[0], f.ids.leaf1],
      [f.seqs[4], f.ids.leaf2],
      [f.seqs[8], f.ids.leaf3],
      [f.seqs[10], null],
    ]);
    assert.equal(whole.source.total, 4);
    assert.equal(whole.source.matches[0]!.preview, 'start: the Zebra crossing');
    assert.deepEqual(whole.summaries.matches.map((m) => m.node), [f.ids.leaf1, f.ids.parent, f.ids.leaf3], "list order, none of b's");
    assert.equal(whole.summaries.matches[2]!.preview, 'Leaf three: ZEBRA again. Second line.');

    const scoped = await search(f.db, { session: 'a', pattern: 'zebra', node: f.ids.parent });
    assert.deepEqual(scoped.source.matches.map((m) => m.seq), [f.seqs[0], f.seqs[4]]);
    assert.deepEqual(scoped.summaries.matches.map((m) => m.node), [f.ids.leaf1, f.ids.parent]);
    const leaf = await search(f.db, { session: 'a', pattern: 'zebra', node: f.ids.leaf3 });
    assert.deepEqual(leaf.source.matches.map((m) => m.seq), [f.seqs[8]]);
    assert.deepEqual(leaf.summaries.matches.map((m) => m.node), [f.ids.leaf3]);

    // Unicode case-insensitive on both lists, through the index (5 chars) and the scan (2 chars).
    const ecole = await search(f.db, { session: 'a', pattern: 'ÉCOLE' });
    assert.deepEqual(ecole.source.matches.map((m) => m.seq), [f.seqs[2], f.seqs[6]]);
    assert.deepEqual(ecole.summaries.matches.map((m) => m.node), [f.ids.leaf1, f.ids.parent]);
    const short = await search(f.db, { session: 'a', pattern: 'éC' });
    assert.deepEqual(short.source.matches.map((m) => m.seq), [f.seqs[2], f.seqs[6]]);
    assert.deepEqual(short.summaries.matches.map((m) => m.node), [f.ids.leaf1, f.ids.parent]);
    const shortScoped = await search(f.db, { session: 'a', pattern: 'éC', node: f.ids.leaf2 });
    assert.deepEqual([shortScoped.source.total, shortScoped.summaries.total], [1, 0]);

    await assert.rejects(search(f.db, { session: 'a', pattern: 'zebra', node: f.ids.other }), unknownNode(f.ids.other));
  }
});

test('lcm_grep pages both lists at the same offset with their own totals and next offsets', async (t) => {
  const f = await fixture(t, { index: 'full' });
  const pages: Result<'lcm_grep'>[] = [];
  for (let offset = 0; offset <= 4; offset++) pages.push(await search(f.db, { session: 'a', pattern: 'zebra', offset, limit: 1 }));
  assert.deepEqual(pages.map((p) => [p.source.total, p.summaries.total]), Array(5).fill([4, 3]));
  assert.deepEqual(pages.map((p) => p.source.next_offset), [1, 2, 3, null, null]);
  assert.deepEqual(pages.map((p) => p.summaries.next_offset), [1, 2, null, null, null]);
  assert.deepEqual(pages.flatMap((p) => p.source.matches.map((m) => m.seq)), [f.seqs[0], f.seqs[4], f.seqs[8], f.seqs[10]]);
  assert.deepEqual(pages.flatMap((p) => p.summaries.matches.map((m) => m.node)), [f.ids.leaf1, f.ids.parent, f.ids.leaf3]);
});

test("lcm_expand renders the node's rows as transcript_read does, page by page", async (t) => {
  const db = tempDb(t);
  const a = openSession(db, { session: 'a' });
  openSession(db, { session: 'b' });
  const seqs: number[] = [];
  seqs.push(...(await appendRows(db, 'a', [user('first row'), assistant('calling', ['c1'])])).seqs);
  await appendRows(db, 'b', [user('between, other session')]);
  seqs.push(...(await appendRows(db, 'a', [toolResult('c1', 'résultat 👍🏽 done'), user('after the leaf')])).seqs);
  const leaf = writeTree(db, a.sid, { leaves: [{ first: seqs[1]!, last: seqs[2]!, summary: 'the call and its result' }] })[0]!;

  const read = await readTranscript(db, TranscriptReadParams.parse({ session: 'a', from_seq: seqs[1], to_seq: seqs[2] }));
  const whole = await expandNode(db, LcmExpandParams.parse({ session: 'a', node: leaf }));
  assert.deepEqual(whole, read);
  assert.ok(whole.text.startsWith(`#${seqs[1]} assistant\ncalling`) && whole.text.includes('résultat 👍🏽 done'));
  assert.ok(!whole.text.includes('first row') && !whole.text.includes('between') && !whole.text.includes('after the leaf'));

  let text = '';
  for (let offset: number | null = 0; offset !== null;) {
    const page = await expandNode(db, LcmExpandParams.parse({ session: 'a', node: leaf, offset, limit: 7 }));
    assert.equal(page.offset, offset);
    text += page.text;
    offset = page.next_offset;
  }
  assert.equal(text, whole.text);
  await assert.rejects(expandNode(db, LcmExpandParams.parse({ session: 'a', node: leaf + 1 })), unknownNode(leaf + 1));
});

test('summaries a pass wrote wait outside the index until lcm_grep puts them in, a unit of characters at a time, and a waiting node can be deleted', async (t) => {
  const db = tempDb(t);
  const { sid } = openSession(db, { session: 'w' });
  // Summaries of one length, 24 to a unit: 59 of them take three units.
  const length = Math.floor(SUMMARY_INDEX_CHARS / 24.5);
  const count = 60;
  const ids = writeTree(db, sid, {
    leaves: Array.from({ length: count }, (_, i) => ({
      first: 2 * i + 1,
      last: 2 * i + 2,
      summary: `${i === count - 1 ? 'the last leaf names Quagga' : `leaf ${i} about`} ${'parsing '.repeat(length)}`.slice(0, length),
    })),
  });
  const waiting = (): number => db.prepare('SELECT count(*) FROM lcm_nodes WHERE sid = ? AND indexed = 0').pluck().get(sid) as number;
  const inIndex = (phrase: string): number => db.prepare('SELECT count(*) FROM lcm_summary_fts WHERE lcm_summary_fts MATCH ?').pluck().get(`"${phrase}"`) as number;
  assert.equal(waiting(), count, 'the commit indexed nothing');
  assert.equal(inIndex('quagga'), 0);

  // A waiting node leaves no index entry behind when it goes.
  db.prepare('DELETE FROM lcm_nodes WHERE node = ?').run(ids[0]);
  assert.equal(waiting(), count - 1);

  // What still waits at each pause of the search: the units it indexed in, one per transaction.
  const seen: number[] = [];
  const found = await grepTree(db, LcmGrepParams.parse({ session: 'w', pattern: 'QUAGGA' }), {
    yieldEvery: () => {
      if (seen[seen.length - 1] !== waiting()) seen.push(waiting());
      return Promise.resolve();
    },
  });
  assert.deepEqual(found.summaries.matches.map((m) => m.node), [ids[count - 1]]);
  // 59 while the rows are searched; then units of 24 summaries (by characters).
  assert.deepEqual(seen, [59, 35, 11, 0], 'three units, a pause after each');
  assert.equal(inIndex('quagga'), 1);
  assert.equal((await search(db, { session: 'w', pattern: 'about parsing' })).summaries.total, count - 2);
  // Indexed nodes leave the index with their rows, as before.
  db.prepare('DELETE FROM lcm_nodes WHERE node = ?').run(ids[count - 1]);
  assert.equal(inIndex('quagga'), 0);
});

test("a unit of the summaries' catch-up stops at its characters but always takes one node, and takes any session's without one named", (t) => {
  const db = tempDb(t);
  const a = openSession(db, { session: 'a' });
  const b = openSession(db, { session: 'b' });
  writeTree(db, a.sid, { leaves: [{ first: 1, last: 1, summary: 'x'.repeat(SUMMARY_INDEX_CHARS + 1) }, { first: 2, last: 2, summary: 'short' }] });
  writeTree(db, b.sid, { leaves: [{ first: 3, last: 3, summary: 'other session' }] });
  assert.equal(indexWaitingSummaries(db, b.sid), 1, "only b's node");
  assert.equal(indexWaitingSummaries(db, a.sid), 1, 'a node longer than a unit still goes in, alone');
  assert.equal(indexWaitingSummaries(db, a.sid, 10), 1);
  assert.equal(indexWaitingSummaries(db, a.sid), 0, 'none waits');
  writeTree(db, b.sid, { leaves: [{ first: 4, last: 4, summary: 'later in b' }] });
  writeTree(db, a.sid, { leaves: [{ first: 5, last: 5, summary: 'later in a' }] });
  assert.equal(indexWaitingSummaries(db, null), 2, 'both sessions');
  assert.equal(indexWaitingSummaries(db, null), 0);
  assert.equal(db.prepare("SELECT v FROM lcm_summary_fts_config WHERE k = 'automerge'").pluck().get(), 0, 'commits do not merge (migration 26)');
});
