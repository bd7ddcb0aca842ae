// The replay section and the eval take every transcript under a fixtures folder, and nothing else
// there: not the synthetic schema file, not the proxy fixtures' logs of HTTP requests.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { replayFiles } from '../../../scripts/bench/replay.ts';

test('replayFiles lists the transcripts under a folder, sorted, without the synthetic fixture or request logs', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-replay-files-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const files = ['pi/s.jsonl', 'claude-code/b/sub.jsonl', 'claude-code/a.jsonl', 'swe-agent/t.traj', 'codex/SYNTHETIC-schema.jsonl', 'proxy/claude-code-2.1.332.requests.jsonl', 'proxy/README.md', 'README.md'];
  for (const f of files) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.writeFileSync(path.join(dir, f), '{}\n');
  }
  assert.deepEqual(replayFiles(dir).map((f) => path.relative(dir, f)), ['claude-code/a.jsonl', 'claude-code/b/sub.jsonl', 'pi/s.jsonl', 'swe-agent/t.traj']);
});
