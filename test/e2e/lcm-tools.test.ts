// The lcm-memory tools end to end: lcm_list, lcm_grep, lcm_describe and lcm_expand over the
// real socket of a real daemon, on a summary tree written into its SQLite file by the tree's own
// writer (a second connection, as a compaction would have stored it), directly and through
// tools.list / tools.call.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { AlbedoClient } from '../../protocol/client.ts';
import { RpcCode } from '../../protocol/errors.ts';
import type { Result } from '../../protocol/methods.ts';
import type { RowIn } from '../../protocol/rows.ts';
import { openDb } from '../../storage/db.ts';
import { requireSession } from '../../storage/transcript/sessions.ts';
import { assistant, toolResult, user } from '../storage/factories.ts';
import { writeTree } from '../storage/lcm-trees.ts';
import { failsWith, startDaemon, type DaemonHandle } from './harness.ts';

const A = 'lcm-a';
const B = 'lcm-b';
/** Turns of four rows each; the first COVERED are summarized, the rest are the verbatim tail. */
const TURNS = 15;
const COVERED = 12;

/** Twenty facts, planted in user rows and tool results of the covered turns. */
const FACTS = Array.from({ length: 20 }, (_, i) => `Fact-${String(i + 1).padStart(2, '0')}: the ${['staging', 'prod', 'école'][i % 3]} port is ${4000 + i * 7} (owner ${['ana', 'bo', 'Çelik', 'dee'][i % 4]})`);

let d: DaemonHandle;
let c: AlbedoClient;
/** Seq and text of every row of A, in order. */
const rowsA: Array<{ seq: number; label: string; text: string }> = [];
/** Where each fact went. */
const factSeq = new Map<string, number>();
let tree: { leaves: number[]; parents: number[]; root: number; other: number };

/** A turn's rows, each with its text and the label transcript_read puts after its seq. */
function turn(t: number, facts: string[]): Array<{ row: RowIn; label: string; text: string }> {
  const call = `call-${t}`;
  const u = facts[0] === undefined ? `turn ${t}: please look at the build` : `turn ${t}: remember ${facts[0]}`;
  const r = facts[1] === undefined ? `build log ${t}: error in step ${t}` : `build log ${t}: ${facts[1]}`;
  return [
    { row: user(u), label: 'user', text: u },
    { row: assistant(`checking turn ${t}`, [call]), label: 'assistant', text: `checking turn ${t}\n→ read_file({"path":"${call}.ts"})` },
    { row: toolResult(call, r), label: `tool_result ${call}`, text: r },
    { row: assistant(`done with turn ${t}; the error is fixed`), label: 'assistant', text: `done with turn ${t}; the error is fixed` },
  ];
}

before(async () => {
  d = await startDaemon();
  c = await d.connect();
  await c.call('session.open', { session: A });
  await c.call('session.open', { session: B });
  let next = 0;
  for (let t = 1; t <= TURNS; t++) {
    // Twelve user facts and eight tool-result facts, all in covered turns.
    const facts = t <= COVERED ? [FACTS[next++], t <= 8 ? FACTS[next++] : undefined].filter((f): f is string => f !== undefined) : [];
    const rows = turn(t, t <= 8 ? facts : [facts[0]!]);
    const { seqs } = await c.call('transcript.append', { session: A, rows: rows.map((r) => r.row) });
    rows.forEach((r, i) => rowsA.push({ seq: seqs[i]!, label: r.label, text: r.text }));
    for (const f of facts) factSeq.set(f, seqs[rows.findIndex((r) => r.text.includes(f))]!);
    // Session B writes between A's turns, so A's seqs have gaps.
    await c.call('transcript.append', { session: B, rows: [user(`b turn ${t}: secret-of-b zebra error`)] });
  }
  assert.equal(factSeq.size, 20);

  const db = openDb(path.join(d.home, 'albedo.db'));
  try {
    const sidA = requireSession(db, A).sid;
    const leafSpecs = Array.from({ length: COVERED }, (_, t) => ({
      first: rowsA[t * 4]!.seq,
      last: rowsA[t * 4 + 3]!.seq,
      summary: `Turn ${t + 1}: looked at the build, fixed an error.${t === 2 ? ' Mentioned the ÉCOLE port.' : ''}`,
    }));
    const ids = writeTree(db, sidA, {
      leaves: leafSpecs,
      parents: [
        { children: [0, 1, 2, 3], summary: 'Turns 1-4: build errors fixed; the école port came up.' },
        { children: [4, 5, 6, 7], summary: 'Turns 5-8: more build errors.' },
        { children: [8, 9, 10, 11], summary: 'Turns 9-12: the last errors.' },
        { children: [12, 13], summary: 'Turns 1-8 condensed: failures and ports.' },
      ],
    });
    const other = writeTree(db, requireSession(db, B).sid, { leaves: [{ first: 1, last: 1_000, summary: 'secret-of-b summary: zebra error' }] });
    tree = { leaves: ids.slice(0, COVERED), parents: ids.slice(COVERED, COVERED + 3), root: ids[COVERED + 3]!, other: other[0]! };
  } finally {
    db.close();
  }
});

after(async () => {
  await d.stop();
});

async function expandAll(node: number, limit: number): Promise<string> {
  let text = '';
  for (let offset: number | null = 0; offset !== null;) {
    const page: Result<'lcm_expand'> = await c.call('lcm_expand', { session: A, node, offset, limit });
    assert.equal(page.offset, offset);
    text += page.text;
    offset = page.next_offset;
  }
  return text;
}

describe('lcm-memory tools over the socket', { timeout: 60_000 }, () => {
  test('lcm_list pages every node in row order with frontier flags and children, matching lcm_describe', async () => {
    const whole = await c.call('lcm_list', { session: A, limit: 500 });
    assert.equal(whole.total, COVERED + 4);
    assert.equal(whole.next_offset, null);
    assert.deepEqual(
      whole.nodes.map((n) => [n.first_seq, n.node]),
      whole.nodes.map((n) => [n.first_seq, n.node]).sort((x, y) => x[0]! - y[0]! || x[1]! - y[1]!),
    );
    assert.deepEqual(whole.nodes.filter((n) => n.frontier).map((n) => n.node).sort(), [tree.parents[2]!, tree.root].sort());
    assert.ok(!whole.nodes.some((n) => n.node === tree.other), 'no node of another session');

    const paged: Result<'lcm_list'>['nodes'] = [];
    for (let offset: number | null = 0; offset !== null;) {
      const page: Result<'lcm_list'> = await c.call('lcm_list', { session: A, offset, limit: 5 });
      assert.equal(page.total, whole.total);
      assert.ok(page.nodes.length > 0 && page.nodes.length <= 5);
      paged.push(...page.nodes);
      offset = page.next_offset;
    }
    assert.deepEqual(paged, whole.nodes);
    assert.deepEqual(await c.call('lcm_list', { session: A, offset: 100 }), { total: whole.total, offset: 100, next_offset: null, nodes: [] });

    for (const n of whole.nodes) {
      const dsc = await c.call('lcm_describe', { session: A, node: n.node });
      assert.deepEqual([dsc.node, dsc.depth, dsc.first_seq, dsc.last_seq, dsc.children, dsc.frontier], [n.node, n.depth, n.first_seq, n.last_seq, n.children, n.frontier]);
      assert.equal(dsc.frontier, dsc.parent === null);
      assert.equal(dsc.backend, 'test');
      assert.ok(dsc.summary.startsWith(n.preview.replace(/…$/, '')));
      for (const child of dsc.children) assert.equal((await c.call('lcm_describe', { session: A, node: child })).parent, n.node);
    }
    const root = await c.call('lcm_describe', { session: A, node: tree.root });
    assert.deepEqual([root.depth, root.first_seq, root.last_seq, root.children], [2, rowsA[0]!.seq, rowsA[31]!.seq, tree.parents.slice(0, 2)]);
  });

  test('all twenty planted facts are found with lcm_grep and read back exactly with lcm_expand', async () => {
    for (const fact of FACTS) {
      const seq = factSeq.get(fact)!;
      const tag = fact.slice(0, 7).toUpperCase();
      const r = await c.call('lcm_grep', { session: A, pattern: tag });
      assert.equal(r.source.total, 1, tag);
      const m = r.source.matches[0]!;
      assert.equal(m.seq, seq);
      const leaf = tree.leaves.find((_, t) => rowsA[t * 4]!.seq <= seq && seq <= rowsA[t * 4 + 3]!.seq)!;
      assert.equal(m.node, leaf, `${tag} names the leaf covering its row`);
      assert.ok(m.preview.includes(fact), m.preview);

      const expanded = await expandAll(leaf, 64);
      const row = rowsA.find((x) => x.seq === seq)!;
      assert.ok(expanded.includes(`#${seq} ${row.label}\n${row.text}`), `${tag} read back whole`);
    }
    for (let t = 0; t < COVERED; t++) {
      const read = await c.call('transcript_read', { session: A, from_seq: rowsA[t * 4]!.seq, to_seq: rowsA[t * 4 + 3]!.seq, limit: 1_000_000 });
      assert.equal(await expandAll(tree.leaves[t]!, 97), read.text, `leaf ${t + 1} expands as transcript_read renders its range`);
    }
  });

  test('lcm_grep pages rows and summaries at the same offset over seq gaps, and scopes both to a node', async () => {
    const whole = await c.call('lcm_grep', { session: A, pattern: 'ERROR', limit: 500 });
    const withError = rowsA.filter((r) => r.text.toLowerCase().includes('error'));
    assert.deepEqual(whole.source.matches.map((m) => m.seq), withError.map((r) => r.seq), "A's rows only, in seq order");
    assert.equal(whole.source.total, withError.length);
    assert.equal(whole.summaries.total, COVERED + 3, 'every summary but the one without "error"; none of B');
    const tailSeqs = new Set(rowsA.slice(COVERED * 4).map((r) => r.seq));
    for (const m of whole.source.matches) assert.equal(m.node === null, tailSeqs.has(m.seq));

    const src: number[] = [];
    const sums: number[] = [];
    for (let offset: number | null = 0; offset !== null;) {
      const page: Result<'lcm_grep'> = await c.call('lcm_grep', { session: A, pattern: 'error', offset, limit: 4 });
      assert.equal(page.source.total, whole.source.total);
      assert.equal(page.summaries.total, whole.summaries.total);
      src.push(...page.source.matches.map((m) => m.seq));
      sums.push(...page.summaries.matches.map((m) => m.node));
      const nexts = [page.source.next_offset, page.summaries.next_offset].filter((n): n is number => n !== null);
      for (const n of nexts) assert.equal(n, offset + 4);
      offset = nexts.length === 0 ? null : Math.max(...nexts);
    }
    assert.deepEqual(src, whole.source.matches.map((m) => m.seq));
    assert.deepEqual(sums, whole.summaries.matches.map((m) => m.node));

    const parent = await c.call('lcm_describe', { session: A, node: tree.parents[1]! });
    const scoped = await c.call('lcm_grep', { session: A, pattern: 'error', node: parent.node, limit: 500 });
    assert.deepEqual(
      scoped.source.matches.map((m) => m.seq),
      withError.filter((r) => r.seq >= parent.first_seq && r.seq <= parent.last_seq).map((r) => r.seq),
    );
    assert.deepEqual(scoped.summaries.matches.map((m) => m.node).sort(), [parent.node, ...parent.children].sort());
    const root = await c.call('lcm_grep', { session: A, pattern: 'error', node: tree.root, limit: 500 });
    assert.equal(root.summaries.total, 8 + 2, 'the root has no "error"; its two parents and eight leaves do');
  });

  test('matching is Unicode case-insensitive in rows and summaries', async () => {
    const r = await c.call('lcm_grep', { session: A, pattern: 'ÉCOLE' });
    const rows = rowsA.filter((x) => x.text.includes('école'));
    assert.ok(rows.length > 0);
    assert.deepEqual(r.source.matches.map((m) => m.seq), rows.map((x) => x.seq));
    // List order: the parent starts at turn 1, the leaf at turn 3.
    assert.deepEqual(r.summaries.matches.map((m) => m.node), [tree.parents[0]!, tree.leaves[2]!]);
    const celik = await c.call('lcm_grep', { session: A, pattern: 'çELIK' });
    assert.equal(celik.source.total, FACTS.filter((f) => f.includes('Çelik')).length);
  });

  test('an unknown node or one of another session is unknown_node, and nothing of it leaks', async () => {
    for (const node of [tree.other, 9_999_999]) {
      for (
        const call of [
          c.call('lcm_describe', { session: A, node }),
          c.call('lcm_expand', { session: A, node }),
          c.call('lcm_grep', { session: A, pattern: 'zebra', node }),
        ]
      ) {
        const err = await failsWith(call, 'unknown_node');
        assert.deepEqual(err.data, { code: 'unknown_node', node });
        assert.ok(!/secret|zebra|lcm-b/.test(err.message), err.message);
      }
    }
    await failsWith(c.call('lcm_list', { session: 'no-such-session' }), 'unknown_session');
  });

  test('bad offsets, limits and node ids are -32602', async () => {
    const bad: Array<[string, Record<string, unknown>]> = [
      ['lcm_list', { session: A, offset: -1 }],
      ['lcm_list', { session: A, limit: 0 }],
      ['lcm_list', { session: A, limit: 501 }],
      ['lcm_grep', { session: A, pattern: 'x', offset: 1.5 }],
      ['lcm_grep', { session: A, pattern: '' }],
      ['lcm_grep', { session: A, pattern: 'x', node: 0 }],
      ['lcm_describe', { session: A, node: -3 }],
      ['lcm_describe', { session: A }],
      ['lcm_expand', { session: A, node: tree.leaves[0], offset: -5 }],
      ['lcm_expand', { session: A, node: tree.leaves[0], limit: 'all' }],
    ];
    for (const [method, params] of bad) {
      await failsWith(c.raw(method, params), 'invalid_params', RpcCode.InvalidParams);
    }
  });

  test('lcm-memory is available and on by default: tools.list describes its four tools with JSON schemas, and tools.call answers as the methods do', async () => {
    const ext = (await c.call('extensions.list', { session: A })).extensions.find((e) => e.name === 'lcm-memory');
    assert.deepEqual([ext?.available, ext?.enabled, ext?.default_enabled, ext?.chosen_by], [true, true, true, 'default']);
    const { tools } = await c.call('tools.list', { session: A });
    const want: Record<string, string[]> = {
      lcm_list: ['limit', 'offset'],
      lcm_grep: ['limit', 'node', 'offset', 'pattern'],
      lcm_describe: ['node'],
      lcm_expand: ['limit', 'node', 'offset'],
    };
    for (const [name, props] of Object.entries(want)) {
      const t = tools.find((x) => x.name === name);
      assert.ok(t !== undefined, `${name} is listed by default`);
      assert.ok(t.description.length > 80, `${name} says what it returns and how to page`);
      assert.equal(t.input_schema.type, 'object');
      assert.deepEqual(Object.keys(t.input_schema.properties as object).sort(), props);
    }
    const calls: Array<[keyof typeof want, Record<string, unknown>]> = [
      ['lcm_list', { offset: 2, limit: 3 }],
      ['lcm_grep', { pattern: 'fact-1', node: tree.parents[0] }],
      ['lcm_describe', { node: tree.parents[2] }],
      ['lcm_expand', { node: tree.leaves[5], offset: 10, limit: 20 }],
    ];
    for (const [name, args] of calls) {
      const viaTool = await c.call('tools.call', { session: A, name, arguments: args });
      assert.equal(viaTool.name, name);
      assert.deepEqual(viaTool.result, await c.call(name as 'lcm_list', { session: A, ...args }));
    }
    await failsWith(c.call('tools.call', { session: A, name: 'lcm_describe', arguments: { node: tree.other } }), 'unknown_node');
    await failsWith(c.call('tools.call', { session: A, name: 'lcm_list', arguments: { offset: -1 } }), 'invalid_tool_arguments');
  });
});
