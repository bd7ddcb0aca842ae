// Writes the eval's shipped corpus: three coding sessions, one per transcript format (Claude
// Code, Codex, pi), each long enough to compact several times at the default eval window. The
// sessions are made up but shaped like real ones (reads of source files, greps, failing and
// passing test runs with error names, git logs with hashes, edits), so every kind of identifier
// the retention metric counts occurs in them. Some requests set a constraint (must, never, ...)
// and the agent keeps a plan with its own plan tool (Claude Code's TodoWrite, Codex's
// update_plan; pi has none), so every kind of probe has something to find. Deterministic:
// `npx tsx scripts/eval/corpus/generate.ts` rewrites the same bytes.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Prng } from '../../stress/prng.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

type Step =
  | { kind: 'user'; text: string }
  | { kind: 'assistant'; text: string; calls: Array<{ id: string; name: string; args: Record<string, unknown>; output: string; error?: boolean }> };

interface Project {
  name: string;
  root: string;
  modules: string[];
  errors: string[];
  asks: string[];
}

const PROJECTS: Project[] = [
  {
    name: 'shop',
    root: '/home/dev/shop',
    modules: ['src/cart/total.ts', 'src/cart/discounts.ts', 'src/checkout/payment.ts', 'src/checkout/address.ts', 'src/api/orders.ts', 'src/db/orderRepository.ts', 'test/cart.test.ts', 'test/checkout.test.ts'],
    errors: ["TypeError: Cannot read properties of undefined (reading 'qty')", 'AssertionError [ERR_ASSERTION]: 1180 !== 1062', 'ECONNREFUSED 127.0.0.1:5432'],
    asks: [
      'The cart total ignores per-item discounts. Fix it in src/cart/total.ts and run the tests. Never change the exported signature of computeTotal.',
      'Now make applyCoupon reject expired coupons; COUPON_GRACE_DAYS should be 3. Old coupon codes must keep working.',
      'Checkout fails against the staging database with ECONNREFUSED. Find out why.',
      'Add an orders endpoint that returns the last 20 orders with their totals.',
      'Clean up: run the linter and commit with a good message.',
    ],
  },
  {
    name: 'ingest',
    root: '/srv/ingest',
    modules: ['ingest/reader.py', 'ingest/parser.py', 'ingest/schema.py', 'ingest/sink/postgres.py', 'ingest/sink/s3.py', 'tests/test_parser.py', 'tests/test_reader.py', 'pyproject.toml'],
    errors: ["KeyError: 'event_ts'", "ValueError: invalid literal for int() with base 10: 'N/A'", 'psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "events_pkey"'],
    asks: [
      'The nightly import dies on the 2025-11 files. Reproduce with tests/test_parser.py and fix parse_row. Do not edit the fixtures, they are generated.',
      'Rows with event_ts missing should go to a dead-letter file, not crash the batch. Always log the source file name with the row number.',
      'Postgres sink hits UniqueViolation on re-runs; make write_batch idempotent with ON CONFLICT.',
      'Bump the batch size to 5000 and measure the import of fixtures/big.csv.',
      'Write a short CHANGELOG entry and commit.',
    ],
  },
  {
    name: 'router',
    root: '/Users/sam/code/router',
    modules: ['src/router.rs', 'src/matcher.rs', 'src/params.rs', 'src/middleware/auth.rs', 'src/middleware/log.rs', 'tests/routes.rs', 'benches/match_bench.rs', 'Cargo.toml'],
    errors: [
      "thread 'routes::nested_params' panicked at src/params.rs:88:14: index out of bounds: the len is 2 but the index is 2",
      'error[E0502]: cannot borrow `self.routes` as mutable because it is also borrowed as immutable',
      'error[E0308]: mismatched types',
    ],
    asks: [
      'Nested params like /users/:id/posts/:post_id panic. Fix PathParams::parse and add a test.',
      'Route matching is slow with 500 routes; look at match_bench and make Matcher use a radix tree. Keep the public Router API instead of adding a new one.',
      'AuthLayer should skip /healthz. Add it and a test.',
      'Run clippy and the whole test suite, fix what it finds.',
      'Commit everything with a message that explains the radix change.',
    ],
  },
];

function hex(r: Prng, n: number): string {
  let s = '';
  while (s.length < n) s += Math.floor(r.next() * 16).toString(16);
  return s;
}

function ident(r: Prng, base: string): string {
  const parts = ['load', 'parse', 'apply', 'build', 'check', 'resolve', 'merge', 'total', 'format', 'validate'];
  const nouns = ['Order', 'Item', 'Coupon', 'Row', 'Batch', 'Route', 'Param', 'Token', 'Header', 'Segment'];
  return `${r.pick(parts)}${r.pick(nouns)}${base.length % 3 === 0 ? 'Async' : ''}`;
}

function source(r: Prng, file: string, lines: number): string {
  const out: string[] = [];
  const ext = path.extname(file);
  for (let i = 1; i <= lines; i++) {
    const fn = ident(r, file + i);
    let line: string;
    if (ext === '.py') line = i % 6 === 1 ? `def ${fn.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}(rows, limit=${100 + Math.floor(r.next() * 900)}):` : `    value_${i} = rows[${i % 7}].get("field_${i % 11}", None)`;
    else if (ext === '.rs') line = i % 6 === 1 ? `pub fn ${fn.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}(&self, path: &str) -> Option<Match> {` : `        let seg_${i} = self.routes.get(${i % 9}).map(|r| r.weight * ${i % 5});`;
    else if (ext === '.toml') line = `dep_${i} = "${i % 4}.${i % 10}.${i % 3}"`;
    else line = i % 6 === 1 ? `export function ${fn}(items: Item[], opts: Options = {}): number {` : `  const v${i} = items.filter((x) => x.qty > ${i % 5}).reduce((s, x) => s + x.price * x.qty, 0);`;
    out.push(`${String(i).padStart(5)}\t${line}`);
  }
  return out.join('\n');
}

function testRun(r: Prng, p: Project, fail: boolean): string {
  const tests = p.modules.filter((m) => /test/.test(m));
  const out: string[] = [];
  for (const t of tests) for (let k = 0; k < 6; k++) out.push(`${fail && k === 2 ? 'FAIL' : 'ok  '} ${t} > case ${k + 1} (${Math.floor(r.next() * 90) + 3} ms)`);
  if (fail) {
    out.push('', r.pick(p.errors), `    at ${ident(r, 'x')} (${p.root}/${p.modules[0]}:${40 + Math.floor(r.next() * 60)}:${5 + Math.floor(r.next() * 20)})`, `    at processTicksAndRejections (node:internal/process/task_queues:95:5)`);
  }
  out.push('', `${tests.length * 6} tests, ${fail ? 1 : 0} failed, duration ${(r.next() * 9 + 1).toFixed(2)} s`);
  return out.join('\n');
}

function session(p: Project, seed: number): Step[] {
  const r = new Prng(seed);
  const steps: Step[] = [];
  let call = 0;
  const id = (): string => `${p.name}_call_${String(++call).padStart(4, '0')}`;
  for (const [n, ask] of p.asks.entries()) {
    steps.push({ kind: 'user', text: ask });
    // The plan: every request so far, the current one in progress.
    const items = p.asks.map((a, k) => ({ text: a.split('.')[0]!, status: k < n ? 'completed' : k === n ? 'in_progress' : 'pending' }));
    steps.push({ kind: 'assistant', text: `Updating the plan for step ${n + 1}.`, calls: [{ id: id(), name: 'plan', args: { items }, output: 'Plan updated.' }] });
    const turns = 8 + Math.floor(r.next() * 4);
    for (let t = 0; t < turns; t++) {
      const file = r.pick(p.modules);
      const roll = r.next();
      let c: Step & { kind: 'assistant' };
      if (roll < 0.35) {
        c = { kind: 'assistant', text: `Reading ${file} to see how ${ident(r, file)} is used.`, calls: [{ id: id(), name: 'read', args: { path: `${p.root}/${file}` }, output: source(r, file, 30 + Math.floor(r.next() * 50)) }] };
      } else if (roll < 0.5) {
        const sym = ident(r, 'g' + t);
        const hits = Array.from({ length: 6 + Math.floor(r.next() * 10) }, () => `${r.pick(p.modules)}:${Math.floor(r.next() * 300) + 1}:  ${sym}(${r.pick(['items', 'rows', 'path', 'opts'])})`);
        c = { kind: 'assistant', text: `Searching for callers of ${sym}.`, calls: [{ id: id(), name: 'grep', args: { pattern: sym, path: p.root }, output: hits.join('\n') }] };
      } else if (roll < 0.7) {
        const fail = t < turns - 2 && r.next() < 0.6;
        c = {
          kind: 'assistant',
          text: 'Running the tests.',
          calls: [{ id: id(), name: 'bash', args: { command: p.name === 'ingest' ? 'pytest -q' : p.name === 'router' ? 'cargo test' : 'npm test' }, output: testRun(r, p, fail), error: fail }],
        };
      } else if (roll < 0.85) {
        const fn = ident(r, 'e' + t);
        c = {
          kind: 'assistant',
          text: `Changing ${fn} in ${file}: the loop must skip entries whose qty is 0 and use the discounted price.`,
          calls: [{
            id: id(),
            name: 'edit',
            args: { path: `${p.root}/${file}`, old_string: `  const v${t} = items.filter((x) => x.qty > 0)`, new_string: `  const v${t} = items.filter((x) => x.qty > 0 && !x.removed)` },
            output: `Edited ${p.root}/${file}: 1 replacement (line ${20 + t * 3}).`,
          }],
        };
      } else {
        const log = Array.from({ length: 8 }, (_, k) => `${hex(r, 40)} ${['fix', 'feat', 'chore', 'refactor'][k % 4]}: ${ident(r, 'l' + k)} in ${r.pick(p.modules)} (#${300 + k * 7})`);
        c = { kind: 'assistant', text: 'Checking the recent history of this area.', calls: [{ id: id(), name: 'bash', args: { command: 'git log --oneline -8 --no-abbrev' }, output: log.join('\n') }] };
      }
      steps.push(c);
    }
    steps.push({
      kind: 'assistant',
      text: `Done with step ${n + 1}: ${ask.split('.')[0]!.toLowerCase()}. The relevant change is in ${p.modules[n % p.modules.length]}; tests pass (${30 + n * 6} of ${30 + n * 6}). Commit ${hex(r, 7)} holds it.`,
      calls: [],
    });
  }
  return steps;
}

type Call = (Step & { kind: 'assistant' })['calls'][number];
type PlanArgs = { items: Array<{ text: string; status: string }> };

/** A call as Claude Code names it: Read, Edit, Bash, Grep, and the plan as TodoWrite. */
function claudeTool(c: Call): { name: string; input: Record<string, unknown> } {
  if (c.name === 'plan') return { name: 'TodoWrite', input: { todos: (c.args as PlanArgs).items.map((i) => ({ content: i.text, status: i.status, activeForm: i.text })) } };
  return { name: c.name[0]!.toUpperCase() + c.name.slice(1), input: c.args };
}

function claudeCode(p: Project, steps: Step[]): string {
  const lines: unknown[] = [];
  let n = 0;
  let parent: string | null = null;
  const sessionId = '3f6c2a1e-8b4d-4f7a-9c2e-5d1b7a9e4c21';
  const base = (type: string, extra: Record<string, unknown>): Record<string, unknown> => {
    const uuid = `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`;
    const rec = { parentUuid: parent, isSidechain: false, userType: 'external', cwd: p.root, sessionId, version: '2.1.40', gitBranch: 'main', type, uuid, timestamp: new Date(Date.UTC(2026, 0, 12, 10, 0, n)).toISOString(), ...extra };
    parent = uuid;
    return rec;
  };
  let msg = 0;
  for (const s of steps) {
    if (s.kind === 'user') {
      lines.push(base('user', { message: { role: 'user', content: s.text } }));
      continue;
    }
    const mid = `msg_01${String(++msg).padStart(20, '0')}`;
    const blocks = [{ type: 'text', text: s.text }, ...s.calls.map((c) => ({ type: 'tool_use', id: `toolu_${c.id}`, ...claudeTool(c) }))];
    for (const b of blocks) {
      lines.push(base('assistant', { requestId: `req_${msg}`, message: { id: mid, type: 'message', role: 'assistant', model: 'claude-sonnet-4-5-20250929', content: [b], stop_reason: null, usage: { input_tokens: 3, output_tokens: 60 } } }));
    }
    for (const c of s.calls) lines.push(base('user', { message: { role: 'user', content: [{ tool_use_id: `toolu_${c.id}`, type: 'tool_result', content: c.output, ...(c.error === true ? { is_error: true } : {}) }] } }));
  }
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

function codex(p: Project, steps: Step[]): string {
  const ts = '2025-11-17T21:30:45.025Z';
  const lines: unknown[] = [
    {
      timestamp: ts,
      type: 'session_meta',
      payload: { id: '019a93b9-0000-7000-8000-00000000e7a1', timestamp: ts, cwd: p.root, originator: 'codex_cli_rs', cli_version: '0.58.0', instructions: null, source: 'cli', model_provider: 'openai' },
    },
    { timestamp: ts, type: 'turn_context', payload: { cwd: p.root, approval_policy: 'on-request', sandbox_policy: { mode: 'workspace-write' }, model: 'gpt-5-codex', effort: 'medium', summary: 'auto' } },
  ];
  for (const s of steps) {
    if (s.kind === 'user') {
      lines.push({ timestamp: ts, type: 'response_item', payload: { type: 'message', role: 'user', content: [{ type: 'input_text', text: s.text }] } });
      lines.push({ timestamp: ts, type: 'event_msg', payload: { type: 'user_message', message: s.text, images: [] } });
      continue;
    }
    lines.push({ timestamp: ts, type: 'response_item', payload: { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: s.text }] } });
    for (const c of s.calls) {
      if (c.name === 'plan') {
        const plan = (c.args as PlanArgs).items.map((i) => ({ step: i.text, status: i.status }));
        lines.push({ timestamp: ts, type: 'response_item', payload: { type: 'function_call', name: 'update_plan', arguments: JSON.stringify({ plan }), call_id: `call_${c.id}` } });
        continue;
      }
      // An edit is a patch, run the way Codex runs it: apply_patch with the patch as its argument.
      const command = c.name === 'edit'
        ? ['apply_patch', `*** Begin Patch\n*** Update File: ${String(c.args.path)}\n@@\n-${String(c.args.old_string)}\n+${String(c.args.new_string)}\n*** End Patch\n`]
        : ['bash', '-lc', c.name === 'bash' ? String(c.args.command) : c.name === 'read' ? `sed -n 1,200p ${String(c.args.path)}` : `rg -n ${String(c.args.pattern)} ${String(c.args.path)}`];
      lines.push({ timestamp: ts, type: 'response_item', payload: { type: 'function_call', name: 'shell', arguments: JSON.stringify({ command, workdir: p.root }), call_id: `call_${c.id}` } });
    }
    for (const c of s.calls) {
      lines.push({
        timestamp: ts,
        type: 'response_item',
        payload: { type: 'function_call_output', call_id: `call_${c.id}`, output: JSON.stringify({ output: c.output, metadata: { exit_code: c.error === true ? 1 : 0, duration_seconds: 0.4 } }) },
      });
    }
  }
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

function pi(p: Project, steps: Step[]): string {
  const lines: unknown[] = [{ type: 'session', id: 'b7d0c9e2-41aa-4e55-9a3c-0c2f9e6d1a77', timestamp: '2025-12-09T00:53:29.825Z', cwd: p.root, provider: 'anthropic', modelId: 'claude-opus-4-5', thinkingLevel: 'off' }];
  let t = 1765234000000;
  for (const s of steps) {
    // pi has no plan tool: its plan steps are left out.
    if (s.kind === 'assistant' && s.calls.some((c) => c.name === 'plan')) continue;
    t += 1000;
    if (s.kind === 'user') {
      lines.push({ type: 'message', timestamp: new Date(t).toISOString(), message: { role: 'user', content: [{ type: 'text', text: s.text }], timestamp: t } });
      continue;
    }
    const content = [{ type: 'text', text: s.text }, ...s.calls.map((c) => ({ type: 'toolCall', id: `toolu_${c.id}`, name: c.name, arguments: c.args }))];
    lines.push({
      type: 'message',
      timestamp: new Date(t).toISOString(),
      message: { role: 'assistant', content, api: 'anthropic-messages', provider: 'anthropic', model: 'claude-opus-4-5', stopReason: s.calls.length > 0 ? 'toolUse' : 'stop', timestamp: t },
    });
    for (const c of s.calls) {
      lines.push({
        type: 'message',
        timestamp: new Date(t).toISOString(),
        message: { role: 'toolResult', toolCallId: `toolu_${c.id}`, toolName: c.name, content: [{ type: 'text', text: c.output }], isError: c.error === true, timestamp: t },
      });
    }
  }
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

const [shop, ingest, router] = PROJECTS as [Project, Project, Project];
fs.writeFileSync(path.join(here, 'claude-code-shop.jsonl'), claudeCode(shop, session(shop, 11)));
fs.writeFileSync(path.join(here, 'codex-ingest.jsonl'), codex(ingest, session(ingest, 23)));
fs.writeFileSync(path.join(here, 'pi-router.jsonl'), pi(router, session(router, 37)));
