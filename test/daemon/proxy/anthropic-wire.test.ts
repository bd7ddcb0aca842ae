// The Anthropic Messages mapping: messages to rows, prepared inputs back to messages, the
// normalized form hashes are taken over, and the proxy's cache markers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { canonicalMessage, messageRows, placeCacheMarkers, preparedMessages, type WireMessage } from '../../../daemon/proxy/anthropic-wire.ts';
import { placeClientPrompt } from '../../../daemon/proxy/client-prompt.ts';
import type { PlainInput } from '../../../protocol/prepared.ts';

const noImages = (): undefined => undefined;

test('a message moved between its string and block forms, with or without cache markers, hashes the same', () => {
  const a: WireMessage = { role: 'user', content: 'list the root dir' };
  const b: WireMessage = { role: 'user', content: [{ type: 'text', text: 'list the root dir', cache_control: { type: 'ephemeral' } }] };
  assert.equal(canonicalMessage(a), canonicalMessage(b));
  const c: WireMessage = { role: 'user', content: [{ text: 'list the root dir', type: 'text' }] };
  assert.equal(canonicalMessage(a), canonicalMessage(c), 'key order does not matter');
  assert.notEqual(canonicalMessage(a), canonicalMessage({ role: 'user', content: 'list the root dir.' }));
});

test("a user message's tool results become rows of their own ahead of its text; unknown blocks stay opaque", () => {
  const rows = messageRows({
    role: 'user',
    content: [
      { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'a.txt' }], is_error: false, cache_control: { type: 'ephemeral' } },
      { type: 'text', text: 'and now?' },
      { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc' }, title: 'notes' },
    ],
  });
  assert.deepEqual(rows.map((r) => r.kind), ['tool_result', 'user']);
  assert.deepEqual(rows[0], { kind: 'tool_result', call_id: 'toolu_1', is_error: false, content: [{ type: 'text', text: 'a.txt' }] });
  const user = rows[1]!;
  assert.equal(user.kind, 'user');
  assert.deepEqual(user.content[1], { type: 'opaque', wire: 'anthropic', label: 'document (notes)', data: { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc' }, title: 'notes' } });
});

test('an assistant turn keeps signed thinking as reasoning, tool_use as a call, and redacted thinking byte for byte', () => {
  const [row] = messageRows({
    role: 'assistant',
    content: [
      { type: 'thinking', thinking: 'look first', signature: 'sig==' },
      { type: 'redacted_thinking', data: 'EqRedacted' },
      { type: 'text', text: 'reading' },
      { type: 'tool_use', id: 'toolu_2', name: 'Bash', input: { command: 'ls' } },
    ],
  });
  assert.ok(row !== undefined && row.kind === 'assistant');
  assert.deepEqual(row.content, [
    { type: 'reasoning', provider: 'anthropic', text: 'look first', encrypted: 'sig==' },
    { type: 'opaque', wire: 'anthropic', label: 'redacted_thinking', data: { type: 'redacted_thinking', data: 'EqRedacted' } },
    { type: 'text', text: 'reading' },
    { type: 'tool_call', id: 'toolu_2', name: 'Bash', arguments: { command: 'ls' } },
  ]);
});

test('prepared inputs map back with tool results inside user messages, roles merged, opaque parts as they came', () => {
  const inputs: PlainInput[] = [
    { role: 'user', content: [{ type: 'text', text: '[summary]' }] },
    { role: 'user', content: [{ type: 'text', text: 'go on' }] },
    {
      role: 'assistant',
      content: [{ type: 'reasoning', provider: 'anthropic', text: 't', encrypted: 'sig' }, { type: 'opaque', wire: 'anthropic', data: { type: 'redacted_thinking', data: 'x' } }, {
        type: 'tool_call',
        id: 'c1',
        name: 'Bash',
        arguments: { command: 'ls' },
      }],
    },
    { role: 'tool', content: [{ type: 'tool_result', call_id: 'c1', is_error: true, content: [{ type: 'text', text: 'no such file' }] }] },
    { role: 'user', content: [{ type: 'text', text: 'hm' }] },
  ];
  const out = preparedMessages(inputs, noImages);
  assert.deepEqual(out, [
    { role: 'user', content: [{ type: 'text', text: '[summary]' }, { type: 'text', text: 'go on' }] },
    { role: 'assistant', content: [{ type: 'thinking', thinking: 't', signature: 'sig' }, { type: 'redacted_thinking', data: 'x' }, { type: 'tool_use', id: 'c1', name: 'Bash', input: { command: 'ls' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'c1', content: [{ type: 'text', text: 'no such file' }], is_error: true }, { type: 'text', text: 'hm' }] },
  ]);
});

test("the agent's system-role message goes back after the first message", () => {
  const sys: WireMessage = { role: 'system', content: '# Environment' };
  const msgs: WireMessage[] = [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }];
  assert.deepEqual(placeClientPrompt(msgs, [{ message: sys, before: 1 }]).map((m) => m.role), ['user', 'system', 'assistant']);
  assert.deepEqual(placeClientPrompt(msgs, [{ message: sys, before: 0 }]).map((m) => m.role), ['system', 'user', 'assistant']);
});

test("cache markers: the client's in messages are replaced by the proxy's, the system's are kept, 4 at most, no 1h after a 5m", () => {
  const messages: WireMessage[] = [
    { role: 'user', content: [{ type: 'text', text: 'first', cache_control: { type: 'ephemeral', ttl: '1h' } }] },
    { role: 'assistant', content: [{ type: 'text', text: 'ok', cache_control: { type: 'ephemeral' } }] },
    { role: 'user', content: 'newest' },
  ];
  const marks = (ms: WireMessage[]) => ms.map((m) => (typeof m.content === 'string' ? [] : m.content.map((b) => b.cache_control ?? null)));
  // No markers before the messages: the longest ttl the client used, on the first and newest messages.
  let out = placeCacheMarkers(messages, { system: 'sys', tools: [], messages });
  assert.deepEqual(marks(out), [[{ type: 'ephemeral', ttl: '1h' }], [null], [{ type: 'ephemeral', ttl: '1h' }]]);
  // A 5m marker on the system comes first: nothing after it may be 1h.
  const system = [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }];
  out = placeCacheMarkers(messages, { system, tools: [], messages });
  assert.deepEqual(marks(out), [[{ type: 'ephemeral' }], [null], [{ type: 'ephemeral' }]]);
  // Three markers on system and tools leave room for one: the newest message's.
  const tools = [{ name: 'a', cache_control: { type: 'ephemeral' } }, { name: 'b', cache_control: { type: 'ephemeral' } }];
  out = placeCacheMarkers(messages, { system, tools, messages });
  assert.deepEqual(marks(out), [[null], [null], [{ type: 'ephemeral' }]]);
});
