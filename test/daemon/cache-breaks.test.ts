// The cache-break record a kernel keeps of its session's last request: its long texts as
// digests, so a loaded session does not hold a second copy of its instructions and tools, and
// a change of either is still found.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { notePrefix } from '../../daemon/cache-breaks.ts';
import type { Kernel } from '../../daemon/kernels.ts';
import type { Observation } from '../../protocol/prepared.ts';
import { openDb } from '../../storage/db.ts';
import { KernelCache } from '../../strategies/harness/kernel-cache.ts';

function request(instructions: string, tools: string) {
  const observation = { sections: [], estimated_input_tokens: 1000 } as unknown as Observation;
  return { preparedId: 'p', instructions, context: '', tools: [{ name: 'read', description: tools, input_schema: {} }], model: 'm', provider: undefined, inputs: [], compacted: false, observation };
}

test('the last request is kept as digests, and a change of instructions or tools is still a break', () => {
  const db = openDb(':memory:');
  try {
    const kernel: Kernel = { session: 's', loadedAt: 0, cache: new KernelCache() };
    const big = 'Follow the rules. '.repeat(5000);
    const tools = 'Reads a file. '.repeat(3000);
    notePrefix(kernel, db, 1, request(big, tools));
    assert.ok(kernel.cache.measure() < 4096, `the kernel holds ${kernel.cache.bytes} bytes after a ${big.length}-character prompt`);
    assert.deepEqual(notePrefix(kernel, db, 1, request(big, tools)), [], 'the same request again breaks nothing');
    const parts = notePrefix(kernel, db, 1, request(`${big}!`, `${tools}!`)).map((b) => b.part);
    assert.deepEqual(parts, ['system', 'tools']);
  } finally {
    db.close();
  }
});

test('instructions that differ only in the middle are a break, and going back to the old ones is one too', () => {
  const db = openDb(':memory:');
  try {
    const kernel: Kernel = { session: 's', loadedAt: 0, cache: new KernelCache() };
    // Same length and the same first and last 720 characters: only the text tells them apart.
    const edge = 'Follow the rules. '.repeat(40);
    const a = `${edge}use tabs${edge}`;
    const b = `${edge}use tab!${edge}`;
    notePrefix(kernel, db, 1, request(a, 'Reads a file.'));
    assert.deepEqual(notePrefix(kernel, db, 1, request(b, 'Reads a file.')).map((x) => x.part), ['system']);
    assert.deepEqual(notePrefix(kernel, db, 1, request(a, 'Reads a file.')).map((x) => x.part), ['system', 'system']);
    assert.equal(notePrefix(kernel, db, 1, request(a.slice(0, 10) + a.slice(10), 'Reads a file.')).length, 2, 'the same text as a new string breaks nothing');
  } finally {
    db.close();
  }
});
