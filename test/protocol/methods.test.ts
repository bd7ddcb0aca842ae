// The method table builds each method's schemas on first use (a CLI start speaks two methods and
// should not pay zod for thirty), while still listing every method up front.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isMethodName, methods, reverseMethods } from '../../protocol/methods.ts';

const built = (table: object, name: string) => Object.getOwnPropertyDescriptor(table, name)?.get === undefined;

test('an entry is built when first read, once, and the others stay unbuilt', () => {
  assert.equal(built(methods, 'daemon.status'), false);
  assert.equal(built(methods, 'prepare'), false);
  const first = methods['daemon.status'];
  assert.equal(built(methods, 'daemon.status'), true);
  assert.equal(methods['daemon.status'], first, 'the same schemas on every read');
  assert.equal(built(methods, 'prepare'), false, 'reading one method builds no other');
  assert.ok(
    first.result.safeParse({
      version: '1',
      pid: 1,
      home: '/h',
      uptime_ms: 0,
      sessions: 0,
      loaded_kernels: 0,
      connections: 0,
      config_errors: [],
      payloads: { count: 0, bytes: 0 },
      storage: { file_bytes: 4096, wal_bytes: 0, free_bytes: 0, parts: null, measured_at: null },
      memory: { rss_bytes: 1, heap_used_bytes: 1, external_bytes: 1, queued_output_bytes: 0, partial_line_bytes: 0, partial_line_budget_bytes: 1 },
      search: { indexer: true, rows_behind: 0 },
      proxy: { listening: false, port: null, error: 'off', anthropic_base_url: null, openai_base_url: null },
    }).success,
  );
});

test('every method is listed and named without being built', () => {
  assert.ok(Object.keys(methods).length >= 28);
  assert.ok(isMethodName('lcm_expand') && !isMethodName('toString'));
  assert.equal(built(methods, 'lcm_expand'), false);
  assert.deepEqual(Object.keys(reverseMethods), ['summarize']);
  assert.equal(built(reverseMethods, 'summarize'), false);
});
