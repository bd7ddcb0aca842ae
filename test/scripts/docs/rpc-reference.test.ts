// docs/rpc.md against a real daemon: the page has one example for every method of the method
// table, and each example request, replayed in order against a fresh daemon, is answered with
// a result the method's schema accepts and with the shape the page recorded.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { methods } from '../../../protocol/methods.ts';
import { examplesOnPage, exampleDaemon, RPC_DOC, runExchanges, shapeOf } from '../../../scripts/docs/rpc-reference.ts';

const page = examplesOnPage(fs.readFileSync(RPC_DOC, 'utf8'));

test('docs/rpc.md has an example for every method, each answer the result schema accepts', () => {
  assert.deepEqual([...new Set(page.map((e) => e.method))].sort(), Object.keys(methods).sort());
  for (const e of page) {
    assert.equal(e.request.method, e.method);
    const schema = methods[e.method as keyof typeof methods].result;
    const parsed = schema.safeParse(e.response.result);
    assert.ok(parsed.success, `${e.method}: the recorded answer does not parse: ${parsed.error?.message}`);
  }
});

test("the page's requests, replayed against a daemon, get answers of the recorded shape", async () => {
  const daemon = await exampleDaemon();
  try {
    const { exchanges, summarize } = await runExchanges(daemon.socket, page.map((e) => ({ method: e.request.method, params: e.request.params })));
    assert.ok(summarize !== undefined, 'the daemon asked the example client for a summary');
    for (const [i, x] of exchanges.entries()) {
      const want = page[i]!;
      assert.equal(x.response.error, undefined, `${want.method}: ${JSON.stringify(x.response.error)}`);
      const parsed = methods[want.method as keyof typeof methods].result.safeParse(x.response.result);
      assert.ok(parsed.success, `${want.method}: ${parsed.error?.message}`);
      assert.deepEqual(shapeOf(x.response.result), shapeOf(want.response.result), `${want.method}: the answer's shape differs from docs/rpc.md (npm run docs:rpc records it again)`);
    }
  } finally {
    await daemon.stop();
  }
});
