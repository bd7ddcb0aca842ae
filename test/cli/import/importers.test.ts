// The transcript importers over small hand-written files in each format: rows in order, one
// assistant row per model response, calls and results paired by id, images, reasoning with its
// provider, the entries skipped and why; every row valid on the wire.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { detectFormat, ImportError, importTranscript, rowCounts, type ImportedTranscript } from '../../../cli/import/index.ts';
import { jsonlLines } from '../../../cli/import/common.ts';
import { RowIn } from '../../../protocol/rows.ts';

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../fixtures/transcripts');
const read = (name: string): string => fs.readFileSync(path.join(dir, name), 'utf8');
const load = (name: string): ImportedTranscript => importTranscript(read(name), { path: name });

function shape(t: ImportedTranscript): string[] {
  return t.rows.map((r) => (r.kind === 'tool_result' ? `r:${r.call_id}` : r.kind === 'assistant' ? `a:${r.content.map((p) => (p.type === 'tool_call' ? `call(${p.id})` : p.type)).join('+')}` : `u:${r.content.map((p) => p.type).join('+')}`));
}

function assertWireRows(t: ImportedTranscript): void {
  for (const r of t.rows) assert.deepEqual(RowIn.parse(r), r);
  const keys = t.rows.map((r) => r.key);
  assert.equal(new Set(keys).size, keys.length, 'keys are unique');
}

test('JSONL lines are found one at a time, trimmed, blank ones skipped, numbered as the file numbers them', () => {
  assert.deepEqual([...jsonlLines('{"a":1}\r\n\n  \n {"b":2} \n{"c":3}')], [
    { line: 1, raw: '{"a":1}' },
    { line: 4, raw: '{"b":2}' },
    { line: 5, raw: '{"c":3}' },
  ]);
  assert.deepEqual([...jsonlLines('{"a":1}\n')], [{ line: 1, raw: '{"a":1}' }]);
  assert.deepEqual([...jsonlLines('')], []);
  // The first line alone is taken without reading the rest (a format's first record).
  const lines = jsonlLines(`{"first":true}\n${'x'.repeat(1000)}`);
  assert.deepEqual(lines.next().value, { line: 1, raw: '{"first":true}' });
});

describe('format detection', () => {
  test('each fixture is recognised from its content', () => {
    assert.equal(detectFormat(read('claude-code.jsonl')), 'claude-code');
    assert.equal(detectFormat(read('claude-code-v1.0.98.jsonl')), 'claude-code');
    assert.equal(detectFormat(read('codex-rollout.jsonl')), 'codex');
    assert.equal(detectFormat(read('pi-session-v1.jsonl')), 'pi');
    assert.equal(detectFormat(read('swe-agent-function-calling.traj')), 'swe-agent');
    assert.equal(detectFormat(read('swe-agent-classic.traj'), 'x.traj'), 'swe-agent');
    assert.equal(detectFormat('{"hello": 1}\n'), null);
  });

  test('an unknown format and a malformed line are reported, the line by number', () => {
    assert.throws(() => importTranscript('{"hello": 1}\n'), ImportError);
    const broken = read('pi-session-v1.jsonl').split('\n');
    broken[3] = '{"type":"message",';
    assert.throws(() => importTranscript(broken.join('\n')), (e: unknown) => e instanceof ImportError && e.line === 4);
  });

  test('--format forces the importer', () => {
    assert.equal(importTranscript(read('claude-code.jsonl'), { format: 'claude-code' }).format, 'claude-code');
  });
});

describe('Claude Code', () => {
  test('lines sharing message.id are one assistant row; its interleaved results follow it', () => {
    const t = load('claude-code.jsonl');
    assertWireRows(t);
    assert.deepEqual(shape(t), [
      'u:text',
      'a:reasoning+text+call(toolu_01)+call(toolu_02)',
      'r:toolu_01',
      'r:toolu_02',
      'a:call(toolu_03)',
      'r:toolu_03',
      'a:call(toolu_04)',
      'r:toolu_04',
      'a:text',
      'u:text+image',
      'a:text',
      'u:text',
      'a:call(toolu_05)',
      'r:toolu_05',
      'u:text',
    ]);
    assert.equal(t.model, 'claude-sonnet-4-5-20250929');
    assert.equal(t.provider, 'anthropic');
  });

  test('thinking becomes anthropic reasoning with its signature; tool input is the arguments', () => {
    const t = load('claude-code.jsonl');
    const a = t.rows[1]!;
    assert.equal(a.kind, 'assistant');
    assert.deepEqual(a.content[0], { type: 'reasoning', provider: 'anthropic', text: 'Read the cart module first, then the tests.', encrypted: 'EqQBCkYIBxgCKkD0sig' });
    assert.deepEqual(a.content[2], { type: 'tool_call', id: 'toolu_01', name: 'Read', arguments: { file_path: '/home/dev/shop/src/cart.ts' } });
  });

  test('tool results: string content, error flag, text+image arrays with base64 images', () => {
    const t = load('claude-code.jsonl');
    const r2 = t.rows[3]!;
    assert.ok(r2.kind === 'tool_result' && r2.is_error && r2.content[0]?.type === 'text');
    const r4 = t.rows[7]!;
    assert.ok(r4.kind === 'tool_result');
    assert.deepEqual(r4.content.map((p) => p.type), ['text', 'image']);
    assert.equal(r4.content[1]?.type === 'image' && 'media_type' in r4.content[1] ? r4.content[1].media_type : null, 'image/png');
    assert.deepEqual(rowCounts(t.rows), { rows: 15, user: 4, assistant: 6, tool_result: 5, tool_calls: 5, images: 2 });
  });

  test('UI records, the compaction summary and empty text blocks are skipped and counted', () => {
    const t = load('claude-code.jsonl');
    assert.deepEqual(t.skipped, { 'file-history-snapshot': 1, 'queue-operation': 1, progress: 2, empty_text: 1, system: 2, compact_summary: 1 });
    assert.ok(!t.rows.some((r) => r.content.some((p) => p.type === 'text' && p.text.startsWith('This session is being continued'))));
  });

  test('the old v1.0.98 schema imports the same way', () => {
    const t = load('claude-code-v1.0.98.jsonl');
    assertWireRows(t);
    assert.deepEqual(shape(t), ['u:text', 'a:text+call(toolu_v1)', 'r:toolu_v1', 'a:text']);
    assert.deepEqual(t.skipped, { summary: 1 });
    assert.equal(t.model, 'claude-sonnet-4-20250514');
  });

  test('inline sidechains of a main session are skipped; a subagent file is kept whole', () => {
    const lines = read('claude-code-v1.0.98.jsonl').trimEnd().split('\n');
    const side = JSON.parse(lines[2]!) as Record<string, unknown>;
    const main = importTranscript([...lines.slice(0, 2), JSON.stringify({ ...side, isSidechain: true, message: { ...(side.message as object), id: 'msg_side' } }), ...lines.slice(2)].join('\n'));
    assert.equal(main.skipped.sidechain, 1);
    assert.equal(main.rows.length, 4);
    const sub = importTranscript(lines.slice(1).map((l) => JSON.stringify({ ...(JSON.parse(l) as object), isSidechain: true })).join('\n'));
    assert.equal(sub.rows.length, 4);
  });
});

describe('Codex rollout', () => {
  test('response items become rows; reasoning and calls of one response are one assistant row', () => {
    const t = load('codex-rollout.jsonl');
    assertWireRows(t);
    assert.deepEqual(shape(t), [
      'u:text',
      'u:text+image',
      'a:reasoning+call(call_A1)+call(call_A2)',
      'r:call_A1',
      'r:call_A2',
      'a:reasoning+call(call_A3)',
      'r:call_A3',
      'a:text',
      'u:text',
    ]);
    assert.equal(t.model, 'gpt-5.1-codex');
    assert.equal(t.provider, 'openai');
    assert.equal(t.instructions, 'You are Codex, a coding agent. Be concise.');
  });

  test('arguments are parsed; a freeform input becomes {input}; reasoning keeps summary and encrypted content', () => {
    const t = load('codex-rollout.jsonl');
    const a = t.rows[2]!;
    assert.ok(a.kind === 'assistant');
    assert.deepEqual(a.content[0], { type: 'reasoning', provider: 'openai', text: '**Planning repository inspection**', encrypted: 'gAAAAABpG5SBkoDzu8k8' });
    assert.deepEqual(a.content[1], { type: 'tool_call', id: 'call_A1', name: 'shell', arguments: { command: ['bash', '-lc', 'ls'], workdir: '/home/dev/app' } });
    const b = t.rows[5]!;
    assert.ok(b.kind === 'assistant' && b.content[0]?.type === 'reasoning');
    assert.equal(b.content[0].text, '**Editing the provider**\n\nReplace the base URL.');
    assert.ok(b.content[1]?.type === 'tool_call' && typeof b.content[1].arguments.input === 'string' && b.content[1].arguments.input.startsWith('*** Begin Patch'));
    const out = t.rows[6]!;
    assert.ok(out.kind === 'tool_result');
    assert.deepEqual(out.content, [{ type: 'text', text: 'Success. Updated lib/llm.ts' }]);
  });

  test('events, turn context, compaction records and unpaired items are skipped and counted', () => {
    const t = load('codex-rollout.jsonl');
    assert.deepEqual(t.skipped, { session_meta: 1, turn_context: 1, event_msg: 3, 'response_item:ghost_snapshot': 1, compacted: 1, 'response_item:web_search_call': 1 });
  });
});

describe('pi session', () => {
  test('messages, tool results and bash executions become rows; aborted empty turns are skipped', () => {
    const t = load('pi-session-v1.jsonl');
    assertWireRows(t);
    assert.deepEqual(shape(t), ['u:text', 'a:reasoning+text+call(toolu_p1)', 'r:toolu_p1', 'u:text', 'u:text+image', 'a:call(toolu_p2)', 'r:toolu_p2', 'u:text', 'a:text']);
    assert.deepEqual(t.skipped, { header: 1, thinking_level_change: 1, 'empty_assistant:aborted': 1, compaction: 1, model_change: 1 });
    assert.equal(t.model, 'claude-sonnet-4-5');
    assert.equal(t.provider, 'anthropic');
  });

  test('thinking keeps its signature for its provider; errors and shell commands are kept', () => {
    const t = load('pi-session-v1.jsonl');
    const a = t.rows[1]!;
    assert.ok(a.kind === 'assistant');
    assert.deepEqual(a.content[0], { type: 'reasoning', provider: 'anthropic', text: 'Start with main.ts.', encrypted: 'EoECCkYIChgC' });
    const failed = t.rows[6]!;
    assert.ok(failed.kind === 'tool_result' && failed.is_error);
    const bash = t.rows[7]!;
    assert.ok(bash.kind === 'user' && bash.content[0]?.type === 'text');
    assert.match(bash.content[0].text, /^Ran `git status --short`\n```\n M src\/main\.ts/);
  });
});

describe('SWE-agent trajectory', () => {
  test('function calling: system prompt is the instructions; reused call ids are kept as they are', () => {
    const t = load('swe-agent-function-calling.traj');
    assertWireRows(t);
    assert.equal(t.format, 'swe-agent');
    assert.match(t.instructions ?? '', /^SETTING: You are an autonomous programmer/);
    assert.deepEqual(shape(t), ['u:text', 'a:text+call(call_1)', 'r:call_1', 'a:text+call(call_2)', 'r:call_2', 'a:text+call(call_2)', 'r:call_2', 'a:text+call(call_submit)', 'r:call_submit']);
    const a = t.rows[3]!;
    assert.ok(a.kind === 'assistant' && a.content[1]?.type === 'tool_call');
    assert.deepEqual(a.content[1].arguments, { command: 'python reproduce.py' });
    assert.equal(t.model, 'gpt-4o');
  });

  test('classic thought/action: assistant text, observations as user rows', () => {
    const t = load('swe-agent-classic.traj');
    assertWireRows(t);
    assert.deepEqual(shape(t), ['u:text', 'u:text', 'a:text', 'u:text', 'a:text']);
    const last = t.rows[4]!;
    assert.ok(last.kind === 'assistant' && last.content[0]?.type === 'text');
    assert.equal(last.content[0].text, 'The fix is done; submit.\n\nsubmit\n');
    assert.deepEqual(t.skipped, { system: 1 });
  });
});
