// The bench's text dumps (scripts/bench/dataset.ts): a dump reused for lcm's summaries holds the
// same bytes as a full pass would write, and a dataset that gained rows is dumped again.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { loadCorpus } from '../../../scripts/bench/corpus.ts';
import { buildDataset, dumpTexts } from '../../../scripts/bench/dataset.ts';
import { appendRows } from '../../../storage/transcript.ts';

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
