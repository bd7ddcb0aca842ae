// The RPC reference, docs/rpc.md: one recorded request and response per method of
// protocol/methods.ts, written by running a scenario against a real daemon in a temp home
// (`npm run docs:rpc`). test/scripts/docs/rpc-reference.test.ts sends the page's requests to a
// fresh daemon and checks each answer against the method's result schema and the recorded
// answer's shape, so the page cannot drift from the daemon. Values that differ from run to run
// or machine to machine (pids, times, the home's path) are written as fixed stand-ins.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const RPC_DOC = path.join(root, 'docs', 'rpc.md');

/** The extensions.json the examples run under: a small window, so a few rows are enough to compact. */
export const EXAMPLE_CONFIG = { rolling: { contextWindowTokens: 1600 }, lcm: { contextWindowTokens: 1600 }, snapcompact: { contextWindowTokens: 1600 } };
/** What the example client answers to every `summarize` request. */
export const EXAMPLE_SUMMARY = 'The user asked to fix the failing date test in src/date.ts; the fix pads the month to two digits.';

/** A 1x1 PNG, for the image examples. */
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
/** Its payload's id: images are stored by the sha256 of their bytes. */
const PIXEL_HASH = createHash('sha256').update(Buffer.from(PIXEL, 'base64')).digest('hex');

const SOURCE = [
  '// src/date.ts',
  'export function iso(d: Date): string {',
  '  return `${d.getFullYear()}-${d.getMonth() + 1}-${d.getDate()}`;',
  '}',
  '',
  'export function parseIso(s: string): Date {',
  "  const [y, m, day] = s.split('-').map(Number);",
  '  return new Date(y, m - 1, day);',
  '}',
].join('\n');
const TEST_RUN = ['> node --test', '# tests 12', '# pass 12', '# fail 0', '# duration_ms 311'].join('\n');

export interface Step {
  method: string;
  params: unknown;
  /** A sentence on what the example shows, above it. */
  say: string;
}

/** The scenario, in order: later steps use what earlier ones stored. */
function scenario(): Step[] {
  const s = 'demo';
  return [
    {
      method: 'initialize',
      params: { protocol: 1, client: { name: 'my-agent', version: '0.3.0' }, capabilities: { summarize: true } },
      say: 'First on every connection. `capabilities.summarize: true` lets the daemon ask this connection for summaries (see "Reverse request" below).',
    },
    { method: 'session.open', params: { session: s, workspace: '/home/me/src/app' }, say: 'Opens a session, creating it when new; without `session` a fresh id is made.' },
    {
      method: 'transcript.append',
      params: {
        session: s,
        rows: [
          {
            kind: 'user',
            origin: 'user',
            key: 'u1',
            content: [{ type: 'text', text: 'The date test fails: test/date.test.ts expects 2024-03-05 but iso() returns 2024-3-5. Screenshot of the run attached.' }, { type: 'image', media_type: 'image/png', data: PIXEL }],
          },
          {
            kind: 'assistant',
            key: 'a1',
            provider: 'anthropic',
            model: 'claude-sonnet-4-5',
            content: [{ type: 'text', text: 'Reading the function first.' }, { type: 'tool_call', id: 'call_1', name: 'read_file', arguments: { path: 'src/date.ts' } }],
          },
          { kind: 'tool_result', key: 't1', call_id: 'call_1', is_error: false, content: [{ type: 'text', text: SOURCE }] },
          { kind: 'assistant', key: 'a2', content: [{ type: 'text', text: 'iso() joins getMonth() + 1 and getDate() without padding, so single-digit months and days lose their leading zero. padStart(2, "0") on both fixes it.' }] },
          { kind: 'user', origin: 'user', key: 'u2', content: [{ type: 'text', text: 'Pad them and run the tests again.' }] },
          { kind: 'assistant', key: 'a3', content: [{ type: 'tool_call', id: 'call_2', name: 'run', arguments: { command: 'npm test' } }] },
          { kind: 'tool_result', key: 't2', call_id: 'call_2', is_error: false, content: [{ type: 'text', text: TEST_RUN }] },
          { kind: 'assistant', key: 'a4', content: [{ type: 'text', text: 'All 12 tests pass now, including the date test.' }] },
        ],
      },
      say: 'Appends rows (user inputs, assistant turns with tool calls, tool results). A row sent again with the same `key` is not stored twice: its stored seq comes back.',
    },
    { method: 'transcript.rows', params: { session: s, after: 3, limit: 2 }, say: 'Stored rows after a seq, a page at a time (`next_after` null at the end).' },
    {
      method: 'prepare',
      params: {
        session: s,
        model: 'claude-sonnet-4-5',
        instructions: 'You are a careful coding agent.',
        tools: [{ name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } }],
      },
      say:
        'Before each model call: the compacted request as provider-neutral inputs, and the window as the daemon sees it. Here the history is over the trigger of the small example window, so the daemon compacted first (asking this connection for the summary).',
    },
    {
      method: 'usage.report',
      params: { session: s, prepared_id: 'from the prepare above', input_tokens: 812, cached_tokens: 640 },
      say: 'After the provider answered: its measured input tokens for that prepared request, which the next trigger decision uses.',
    },
    { method: 'context', params: { session: s }, say: 'What `albedo context` shows: the window by section, the last compaction, failures. `format: "text"` adds the terminal rendering.' },
    {
      method: 'compact',
      params: { session: s, strategy: 'lcm', focus: 'keep the file names' },
      say: "Compacts now; `strategy` also makes it the session's strategy (as `/extensions enable lcm` would). `dry_run: true` reports the plan and writes nothing.",
    },
    { method: 'lcm_list', params: { session: s }, say: "lcm's summary nodes of the session, in order; `frontier` nodes are the summaries a request shows." },
    { method: 'lcm_describe', params: { session: s, node: 1 }, say: 'One node: its range of source rows, parent and children, and its summary.' },
    { method: 'lcm_grep', params: { session: s, pattern: 'padStart' }, say: "Searches a session's source rows and its summaries (case-insensitive literal text)." },
    { method: 'lcm_expand', params: { session: s, node: 1, limit: 200 }, say: 'The source rows a node stands for, rendered as text and paged by graphemes.' },
    { method: 'transcript_read', params: { session: s, offset: 0, limit: 160 }, say: 'The whole transcript rendered as text, paged by graphemes (`next_offset` null at the end).' },
    { method: 'transcript_grep', params: { pattern: 'date.test' }, say: "Searches rows of every session (or one, with `session`; or a workspace's, with `workspace`)." },
    { method: 'tools.list', params: { session: s }, say: "The memory tools the session's extensions give the model, as JSON schemas to add to the request's tools." },
    { method: 'tools.call', params: { session: s, name: 'transcript_grep', arguments: { pattern: 'getMonth' } }, say: 'Runs one of those tools for the model (the session is bound by the daemon); each tool is also a method of its own.' },
    { method: 'payload.get', params: { hash: PIXEL_HASH }, say: 'The bytes of a stored image, by the hash prepared inputs carry (`images: "ref"`, the default).' },
    { method: 'frames', params: { session: s }, say: 'The snapcompact frames the next request would show, for sessions on snapcompact (none here: the session is on lcm).' },
    { method: 'extensions.list', params: { session: s }, say: 'Every extension, whether it is on for the session, and who chose that.' },
    { method: 'extensions.select', params: { session: s, enable: ['rolling'] }, say: 'Turns extensions on or off for one session, or for all (written to extensions.json) without `session`.' },
    {
      method: 'command',
      params: { session: s, line: '/extensions' },
      say: 'A slash command as an agent UI typed it (`/compact [strategy] [focus]`, `/context`, `/extensions [enable|disable names]`, `/reload`), with its result and its terminal text.',
    },
    { method: 'session.fork', params: { session: s, branch: 'demo-try', excursion: true }, say: "Copies the session into a branch; with `excursion` the parent gets a marker and waits for the branch's report." },
    { method: 'session.return', params: { branch: 'demo-try', outcome: 'Tried dayjs; it pads too but adds a dependency, so kept the hand fix.' }, say: 'The branch reports back: the outcome is appended to the parent after its marker.' },
    { method: 'session.list', params: {}, say: 'Every session with its head, row count and parent.' },
    { method: 'session.delete', params: { session: 'demo-try' }, say: 'Deletes a session and everything stored for it.' },
    { method: 'reload', params: {}, say: 'Rereads extensions.json and models.json (as SIGHUP does); lists what failed to parse.' },
    { method: 'daemon.status', params: {}, say: "The daemon's version, home, uptime and counts, and configuration errors." },
    { method: 'daemon.shutdown', params: {}, say: 'Stops the daemon in order, as SIGTERM does.' },
  ];
}

export interface Exchange {
  request: { jsonrpc: '2.0'; id: number; method: string; params: unknown };
  /** The response as received (result or error), before stand-ins. */
  response: { jsonrpc: '2.0'; id: number; result?: unknown; error?: { code: number; message: string; data?: unknown } };
}

/** A daemon from the sources in a fresh home holding EXAMPLE_CONFIG; `stop` kills it and removes the home. */
export async function exampleDaemon(): Promise<{ socket: string; stop(): Promise<void> }> {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'albedo-rpc-'));
  fs.chmodSync(home, 0o700);
  fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify(EXAMPLE_CONFIG));
  const env: NodeJS.ProcessEnv = { ...process.env, ALBEDO_HOME: home, ALBEDO_CONFIG_WATCH: 'off', ALBEDO_PROXY_PORT: '0' };
  delete env.ALBEDO_SOCKET;
  const proc: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'daemon/main.ts')], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  let err = '';
  proc.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d));
  try {
    await new Promise<void>((resolve, reject) => {
      let out = '';
      proc.stdout?.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        if (out.includes('listening on')) resolve();
      });
      void exited.then(() => reject(new Error(`albedod exited before listening: ${err}`)));
    });
  } catch (e) {
    fs.rmSync(home, { recursive: true, force: true });
    throw e;
  }
  return {
    socket: path.join(home, 'albedod.sock'),
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}

/**
 * Sends `requests` in order on one connection, each after the previous answer, answering the
 * daemon's `summarize` requests with EXAMPLE_SUMMARY. A `prepared_id` in params is replaced by
 * the one the last `prepare` returned (ids are random). Returns every exchange and the first
 * summarize request the daemon sent.
 */
export async function runExchanges(socket: string, requests: Array<{ method: string; params: unknown }>): Promise<{ exchanges: Exchange[]; summarize: unknown }> {
  const sock = net.createConnection(socket);
  await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
  let buf = '';
  let waiting: ((msg: Exchange['response']) => void) | undefined;
  let summarize: unknown;
  let failed: Error | undefined;
  sock.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const msg = JSON.parse(buf.slice(0, i)) as Exchange['response'] & { method?: string };
      buf = buf.slice(i + 1);
      if (msg.method === 'summarize') {
        summarize ??= msg;
        sock.write(`${JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { text: EXAMPLE_SUMMARY } })}\n`);
      } else if (waiting !== undefined) {
        const w = waiting;
        waiting = undefined;
        w(msg);
      } else failed = new Error(`unexpected message: ${JSON.stringify(msg)}`);
    }
  });
  const exchanges: Exchange[] = [];
  let preparedId: string | undefined;
  try {
    for (const [i, r] of requests.entries()) {
      let params = r.params;
      if (preparedId !== undefined && params !== null && typeof params === 'object' && 'prepared_id' in params) params = { ...params, prepared_id: preparedId };
      const request = { jsonrpc: '2.0' as const, id: i + 1, method: r.method, params };
      const response = await new Promise<Exchange['response']>((resolve) => {
        waiting = resolve;
        sock.write(`${JSON.stringify(request)}\n`);
      });
      if (failed !== undefined) throw failed;
      exchanges.push({ request, response });
      const result = response.result as { prepared_id?: unknown } | undefined;
      if (r.method === 'prepare' && typeof result?.prepared_id === 'string') preparedId = result.prepared_id;
    }
  } finally {
    sock.destroy();
  }
  return { exchanges, summarize };
}

/** Fixed stand-ins for what differs between runs and machines. */
function standIns(v: unknown, cut: boolean, key = ''): unknown {
  if (Array.isArray(v)) return v.slice(0, cut && v.some((x) => typeof x === 'object') ? 2 : undefined).map((x) => standIns(x, cut));
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, standIns(x, cut, k)]));
  if (typeof v === 'number') {
    if (key === 'pid') return 4242;
    if (key === 'uptime_ms') return 5310;
    if (key === 'port') return 7788;
    if (/(^|_)at$/.test(key) && v > 1e12) return 1767225600000;
    if (/duration_ms$/.test(key)) return 12;
  }
  if (typeof v === 'string') {
    if (key === 'home') return '/home/me/.albedo';
    // The proxy's base URLs carry the temp home's port and secret token.
    if (/_base_url$/.test(key)) return v.replace(/^http:\/\/127\.0\.0\.1:\d+\/[^/]+\//, 'http://127.0.0.1:7788/<token>/');
    if (/^[0-9a-f]{8}-[0-9a-f]{4}-/.test(v)) return 'b3f1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d';
  }
  return v;
}

/** `a` and `b` have the same keys at every level and the same JSON types (arrays by their first item). */
export function shapeOf(v: unknown): unknown {
  if (Array.isArray(v)) return v.length === 0 ? '[]' : [shapeOf(v[0])];
  if (v === null) return 'null';
  if (typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, shapeOf((v as Record<string, unknown>)[k])]));
  return typeof v;
}

const BLOCK = /<!-- rpc (\S+) -->\n```json\n([\s\S]*?)\n```\n\n```json\n([\s\S]*?)\n```\n<!-- \/rpc -->/g;

/** The examples on the page, in order: each method's request and recorded response. */
export function examplesOnPage(text: string): Array<{ method: string; request: Exchange['request']; response: Exchange['response'] }> {
  return [...text.matchAll(BLOCK)].map((m) => ({
    method: m[1]!,
    request: JSON.parse(m[2]!) as Exchange['request'],
    response: JSON.parse(m[3]!) as Exchange['response'],
  }));
}

/** JSON indented by two, with any object or array that fits in `width` columns on one line. */
export function formatJson(v: unknown, indent = '', width = 100): string {
  const flat = JSON.stringify(v);
  if (flat === undefined || v === null || typeof v !== 'object' || indent.length + flat.length <= width) return flat ?? 'null';
  const inner = `${indent}  `;
  if (Array.isArray(v)) return `[\n${v.map((x) => `${inner}${formatJson(x, inner, width)}`).join(',\n')}\n${indent}]`;
  const entries = Object.entries(v).filter(([, x]) => x !== undefined);
  return `{\n${entries.map(([k, x]) => `${inner}${JSON.stringify(k)}: ${formatJson(x, inner, width - k.length - 4)}`).join(',\n')}\n${indent}}`;
}

function block(e: Exchange): string {
  const request = standIns(e.request, false);
  return `<!-- rpc ${e.request.method} -->\n\`\`\`json\n${JSON.stringify(request)}\n\`\`\`\n\n\`\`\`json\n${formatJson(standIns(e.response, true))}\n\`\`\`\n<!-- /rpc -->`;
}

async function write(): Promise<void> {
  const steps = scenario();
  const d = await exampleDaemon();
  let run: Awaited<ReturnType<typeof runExchanges>>;
  try {
    run = await runExchanges(d.socket, steps);
  } finally {
    await d.stop();
  }
  const failed = run.exchanges.filter((e) => e.response.error !== undefined);
  if (failed.length > 0) throw new Error(`examples failed: ${failed.map((e) => `${e.request.method}: ${JSON.stringify(e.response.error)}`).join('; ')}`);
  const sections = run.exchanges.map((e, i) => `### \`${e.request.method}\`\n\n${steps[i]!.say}\n\n${block(e)}\n`);
  const head = fs.readFileSync(RPC_DOC, 'utf8').split('<!-- examples -->')[0]!;
  const summarize = formatJson(standIns(run.summarize, true));
  const tail = `
## Reverse request: \`summarize\`

When the session's summarizer is the client (the default for a connection that declared
\`capabilities.summarize\`), the daemon sends a request of its own on the same connection while it
compacts, and waits for the answer before it answers \`prepare\` or \`compact\`. The request during
the \`prepare\` above (prompt shortened here):

\`\`\`json
${summarize.replace(/("prompt": ")((?:[^"\\]|\\.){200})(?:[^"\\]|\\.)*"/, '$1$2…"')}
\`\`\`

The client calls its model with \`system\` and \`prompt\`, at most \`max_output_tokens\` out, and
answers with the text (a JSON-RPC error instead makes the compaction fail, and nothing is written):

\`\`\`json
${JSON.stringify({ jsonrpc: '2.0', id: (run.summarize as { id?: unknown }).id, result: { text: EXAMPLE_SUMMARY } })}
\`\`\`
`;
  fs.writeFileSync(RPC_DOC, `${head}<!-- examples -->\n\n${sections.join('\n')}${tail}`);
  process.stdout.write(`docs:rpc: wrote ${path.relative(root, RPC_DOC)} (${run.exchanges.length} methods)\n`);
}

/** The requests of the scenario, for the test to check the page holds every method. */
export function scenarioMethods(): string[] {
  return scenario().map((s) => s.method);
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await write();
