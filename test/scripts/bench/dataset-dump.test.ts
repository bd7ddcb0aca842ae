// The bench's pass over the row texts (scripts/bench/dataset.ts): its statistics equal what SQL
// computes over the stored rows, a dump reused for lcm's summaries holds the same bytes as a
// full pass would write, and a dataset that gained rows is passed over again.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { loadCorpus } from '../../../scripts/bench/corpus.ts';
import { buildDataset, dumpTexts, textPass } from '../../../scripts/bench/dataset.ts';
import { ROW_TEXT_SQL } from '../../../storage/transcript/row-text.ts';
import { appendRows } from '../../../storage/transcript/write.ts';

test('dumpTexts reuses a plain dump for extras, byte for byte, and redumps after an append', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-dump-'));
  try {
    const corpus = loadCorpus(path.join(tmp, 'no-fixtures'));
    const ds = await buildDataset(path.join(tmp, 'a'), 300, corpus, { synchronous: 'NORMAL' });
    const fresh = await buildDataset(path.join(tmp, 'b'), 300, corpus, { synchronous: 'NORMAL' });
    try {
      const extras = ['first summary\nover two lines', 'second summary'];
      const plain = dumpTexts(ds);
      assert.equal(dumpTexts(ds), plain, 'an unchanged dataset is not dumped twice');
      const reused = dumpTexts(ds, { mainExtra: extras });
      const full = dumpTexts(fresh, { mainExtra: extras });
      assert.equal(fs.readFileSync(reused.main, 'utf8'), fs.readFileSync(full.main, 'utf8'));
      assert.equal(reused.mainBytes, full.mainBytes);
      assert.ok(fs.readFileSync(reused.main, 'utf8').endsWith('first summary over two lines\nsecond summary\n'));
      assert.equal(fs.readFileSync(plain.main, 'utf8').includes('second summary'), false, 'main.txt stays the rows only');

      await appendRows(ds.db, ds.main.name, [{ kind: 'user', origin: 'user', content: [{ type: 'text', text: 'one more row' }] }]);
      const again = dumpTexts(ds);
      assert.ok(fs.readFileSync(again.main, 'utf8').endsWith('one more row\n'), 'a dataset with a new row is dumped again');
      assert.ok(again.mainBytes > plain.mainBytes);
    } finally {
      ds.db.close();
      fresh.db.close();
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('the text pass counts what SQL counts: code points, the rendered estimate, the non-ASCII share', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-text-'));
  try {
    const ds = await buildDataset(path.join(tmp, 'a'), 400, loadCorpus(path.join(tmp, 'no-fixtures')), { synchronous: 'NORMAL' });
    try {
      // Astral characters (two UTF-16 units, one code point) and a CR, which the share counts.
      await appendRows(ds.db, ds.main.name, [{ kind: 'user', origin: 'user', content: [{ type: 'text', text: 'emoji 😀😀 and größe\r\n' }] }]);
      const { stats } = textPass(ds);
      const sql = <T>(q: string, ...args: unknown[]): T => ds.db.prepare(q).pluck().get(...args) as T;
      assert.equal(stats.textChars, sql<number>(`SELECT sum(length(${ROW_TEXT_SQL})) FROM transcript`));
      assert.equal(
        stats.mainRendered,
        sql<number>(
          `SELECT sum(length(${ROW_TEXT_SQL}) + 1 + length(seq) + 1 + CASE kind WHEN 'user' THEN 4 WHEN 'assistant' THEN 9
                  WHEN 'tool_result' THEN 12 + length(call_id) ELSE 20 END + 2) FROM transcript WHERE sid = ?`,
          ds.main.sid,
        ),
      );
      assert.equal(stats.mainNonAsciiShare, sql<number>(`SELECT avg(CASE WHEN ${ROW_TEXT_SQL} GLOB '*[^\x01-\x0c\x0e-\x7f]*' THEN 1.0 ELSE 0.0 END) FROM transcript WHERE sid = ?`, ds.main.sid));
      assert.ok(stats.mainNonAsciiShare > 0);
      assert.equal(stats.textBytes, textPass(ds).dump.textBytes);
    } finally {
      ds.db.close();
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
