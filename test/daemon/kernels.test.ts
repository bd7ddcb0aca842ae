// Session kernels in-process: forget (after session.delete) never lets a session have two
// queues at once. Issue 11, defect 12: forget deleted the slot while tasks waited on it, so the
// next request for the same session started a second queue and ran beside the first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SessionKernels, type Kernel } from '../../daemon/kernels.ts';
import { approxBytes, cacheSlot } from '../../strategies/harness/kernel-cache.ts';

function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

test('a task for a forgotten session that is still busy waits for the tasks before it', async () => {
  const kernels = new SessionKernels();
  const order: string[] = [];
  const release = gate();
  const kernelsSeen: Kernel[] = [];
  const first = kernels.run('s', async (k) => {
    kernelsSeen.push(k);
    order.push('first start');
    // As session.delete does: forget from inside the session's own task.
    kernels.forget('s');
    await release.opened;
    order.push('first end');
  });
  const queued = kernels.run('s', () => void order.push('queued'));
  await new Promise((resolve) => setImmediate(resolve));
  const later = kernels.run('s', (k) => {
    kernelsSeen.push(k);
    order.push('later');
  });
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(order, ['first start'], 'nothing runs beside the busy task');
  release.open();
  await Promise.all([first, queued, later]);
  assert.deepEqual(order, ['first start', 'first end', 'queued', 'later']);
  assert.notEqual(kernelsSeen[1], kernelsSeen[0], 'a task after forget gets a fresh kernel');
  assert.equal(kernels.loaded, 1, 'taken up again after forget, the session stays loaded');
});

test('a forgotten busy slot is dropped once its queue drains; an idle one at once', async () => {
  const kernels = new SessionKernels();
  const release = gate();
  const busy = kernels.run('s', async () => {
    kernels.forget('s');
    await release.opened;
  });
  assert.equal(kernels.loaded, 1);
  release.open();
  await busy;
  await kernels.idle();
  assert.equal(kernels.loaded, 0);

  await kernels.run('t', () => undefined);
  assert.equal(kernels.loaded, 1);
  kernels.forget('t');
  assert.equal(kernels.loaded, 0);
  kernels.forget('never-loaded');
});

test('an append lane task never waits behind an engine task of the same session; each lane keeps its order; all waits for both', async () => {
  const kernels = new SessionKernels();
  const order: string[] = [];
  const summarizer = gate();
  const prepare = kernels.run('s', async () => {
    order.push('prepare start');
    await summarizer.opened; // a model call
    order.push('prepare end');
  });
  const appends = [1, 2, 3].map((i) =>
    kernels.run('s', async () => {
      await new Promise((resolve) => setImmediate(resolve));
      order.push(`append ${i}`);
    }, 'transcript')
  );
  const context = kernels.run('s', () => void order.push('context'));
  const remove = kernels.run('s', () => void order.push('delete'), 'all');
  const afterDelete = kernels.run('s', () => void order.push('append after delete'), 'transcript');
  await Promise.all(appends);
  assert.deepEqual(order, ['prepare start', 'append 1', 'append 2', 'append 3'], 'appends ran while the model call was out, in order');
  summarizer.open();
  await Promise.all([prepare, context, remove, afterDelete]);
  assert.deepEqual(order.slice(4), ['prepare end', 'context', 'delete', 'append after delete']);
});

test('idle kernels are unloaded least recently used first once their caches hold more than the byte bound', async () => {
  const kernels = new SessionKernels({ maxLoaded: 100, maxBytes: 250_000 });
  const slot = cacheSlot<string[]>('test.text');
  const fill = (k: Kernel): void => k.cache.set(slot, Array.from({ length: 1000 }, (_, i) => `row ${i} `.repeat(5)));
  const seen = new Map<string, Kernel>();
  for (const s of ['a', 'b', 'c']) await kernels.run(s, (k) => void (fill(k), seen.set(s, k)));
  // About 100 KB each: the third one puts the total over 250 KB, and the oldest goes.
  assert.ok(kernels.cacheBytes > 150_000 && kernels.cacheBytes <= 250_000, `${kernels.cacheBytes} bytes`);
  assert.equal(kernels.loaded, 2);
  await kernels.run('b', (k) => assert.equal(k, seen.get('b'), 'b kept its kernel'));
  await kernels.run('a', (k) => assert.notEqual(k, seen.get('a'), 'a was unloaded'));
  // The most recently used kernel stays even when it alone is over the bound.
  const big = new SessionKernels({ maxBytes: 1000 });
  let first: Kernel | undefined;
  await big.run('x', (k) => void (fill(k), (first = k)));
  await big.run('x', (k) => assert.equal(k, first));
  assert.equal(big.loaded, 1);
});

test('a large cache that grew in place is measured by the sweep that follows its task, and the byte bound applies to it', async () => {
  // Many objects, so that measuring it is not cheap and re-measuring waits for the sweep.
  const make = (): { many: Array<Array<{ s: string }>>; grow: string[] } => ({
    many: Array.from({ length: 64 }, () => Array.from({ length: 64 }, () => ({ s: 'x' }))),
    grow: [],
  });
  const fill = (v: { grow: string[] }): void => void v.grow.push(...Array.from({ length: 2000 }, (_, i) => `row ${i} `.repeat(20)));
  const sample = make();
  const base = approxBytes(sample);
  fill(sample);
  const grown = approxBytes(sample);
  const maxBytes = Math.floor(2.5 * grown);
  assert.ok(3 * base <= maxBytes && 3 * grown > maxBytes, `${base} / ${grown}`);
  const kernels = new SessionKernels({ maxLoaded: 100, maxBytes });
  const slot = cacheSlot<ReturnType<typeof make>>('test.growing');
  for (const s of ['a', 'b', 'c']) {
    await kernels.run(s, (k) => k.cache.set(slot, make()));
    // The same value, filled after it was stored: no store tells the kernels it changed.
    await kernels.run(s, (k) => fill(k.cache.get(slot)!));
  }
  const deadline = Date.now() + 5000;
  while (kernels.loaded > 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(kernels.loaded, 2, 'the oldest kernel went once the growth was measured');
  assert.ok(kernels.cacheBytes > grown && kernels.cacheBytes <= maxBytes, `${kernels.cacheBytes} bytes`);
});

test('approxBytes counts strings by length, samples long arrays and maps, and counts shared values once', () => {
  assert.ok(approxBytes('x'.repeat(1000)) >= 2000);
  const long = Array.from({ length: 100_000 }, () => 'y'.repeat(10));
  const estimate = approxBytes(long);
  assert.ok(estimate > 100_000 * 36 && estimate < 100_000 * 60, `${estimate}`);
  assert.ok(approxBytes(new Map([[1, 'z'.repeat(500)]])) >= 1000);
  const shared = { text: 'w'.repeat(10_000) };
  assert.ok(approxBytes([shared, shared]) < 1.5 * approxBytes([shared]));
});
