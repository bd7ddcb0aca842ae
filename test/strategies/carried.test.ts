// Which rows a request still carries verbatim, found by matching the rows' projections against
// the end of the request: by position, so orphan results and reused call ids count like any
// other row; a cut between exchanges is found where it is; rows before the cached ones are read
// back from the session only as far as the match goes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PlainInput } from '../../protocol/prepared.ts';
import type { StoredRow } from '../../protocol/rows.ts';
import { foldSources } from '../../storage/transcript/history.ts';
import type { Db } from '../../storage/db.ts';
import { openSession } from '../../storage/transcript/sessions.ts';
import { appendRows } from '../../storage/transcript/write.ts';
import { carriedFrom, firstCarriedSeq } from '../../strategies/harness/carried.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';
import { forModel, plainTarget } from '../../strategies/projection.ts';
import { assistant, tempDb, toolResult, user } from '../storage/factories.ts';
import { strategyInput, turn } from './engine-fixtures.ts';

const target = plainTarget('s');
const summary: PlainInput = { role: 'user', content: [{ type: 'text', text: '[summary of the older history]' }] };

function rowsOf(db: Db, session: string): StoredRow[] {
  const out: StoredRow[] = [];
  for (const page of foldSources(db, session, 1, Number.MAX_SAFE_INTEGER)) out.push(...page);
  return out;
}

async function session(t: Parameters<typeof tempDb>[0], rows: Parameters<typeof appendRows>[2]): Promise<{ db: Db; rows: StoredRow[] }> {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  await appendRows(db, 's', rows);
  return { db, rows: rowsOf(db, 's') };
}

test('an orphan result that opens the tail is carried, though no call in the request names it', async (t) => {
  const { rows } = await session(t, [...turn(0), user('a stray result came back'), toolResult('ghost', 'late output'), assistant('noted', ['c9']), toolResult('c9', 'ok')]);
  const orphan = rows.findIndex((r) => r.body.kind === 'tool_result' && r.body.orphan === true);
  assert.equal(orphan, 5, 'the result was stored as an orphan');
  const request = [summary, ...forModel(rows.slice(4), target)];
  assert.equal(carriedFrom(rows, request, target).from, 4);
});

test('a call id reused inside the newest unit: both answers are carried', async (t) => {
  const { rows } = await session(t, [
    ...turn(0),
    user('take a screenshot, then list the files'),
    assistant('shot', ['call_0']),
    toolResult('call_0', 'the page'),
    assistant('ls', ['call_0']),
    toolResult('call_0', 'index.html'),
  ]);
  const request = [summary, ...forModel(rows.slice(4), target)];
  assert.equal(carriedFrom(rows, request, target).from, 4, 'the first answer of call_0 (row 6) is above the start');
});

test('a tail cut between exchanges starts at the first exchange it keeps; nothing or everything carried', async (t) => {
  const { rows } = await session(t, [
    ...turn(0),
    user('one long task'),
    assistant('step 1', ['c1']),
    toolResult('c1', 'out 1'),
    assistant('step 2', ['c2']),
    toolResult('c2', 'out 2'),
    assistant('step 3', ['c3']),
    toolResult('c3', 'out 3'),
  ]);
  // The opener stays, the first exchange is evicted, the second and third are kept.
  const request = [summary, ...forModel([rows[4]!], target), ...forModel(rows.slice(7), target)];
  assert.equal(carriedFrom(rows, request, target).from, 7);
  assert.equal(carriedFrom(rows, [summary], target).from, rows.length, 'nothing carried');
  assert.equal(carriedFrom(rows, forModel(rows, target), target).from, 0, 'everything carried');
});

test("firstCarriedSeq reads back past the cached rows, in steps, skipping other sessions' rows", async (t) => {
  const db = tempDb(t);
  openSession(db, { session: 's' });
  openSession(db, { session: 'other' });
  // 80 turns of four rows, another session's rows between them: the tail spans far more seqs
  // than one step back reads.
  for (let i = 0; i < 80; i++) {
    await appendRows(db, 's', turn(i, 40));
    await appendRows(db, 'other', turn(i, 40));
  }
  const rows = rowsOf(db, 's');
  const from = 40; // turns 10-79 are the tail
  const request = [summary, ...forModel(rows.slice(from), target)];
  const input = strategyInput(db, new KernelCache(), target);
  assert.ok(input.head - rows[from]!.seq > 256, 'the tail is longer than one step');
  assert.equal(firstCarriedSeq(input, request), rows[from]!.seq);
  assert.equal(firstCarriedSeq(input, [summary]), input.head + 1, 'nothing carried: every row is below');
  assert.equal(firstCarriedSeq(input, forModel(rows, target)), rows[0]!.seq, 'everything carried: from the first row');
});
