// A generated but realistic coding session for the demo: a user asks for features and fixes in
// a small TypeScript API, the agent reads files, runs tests, hits errors and fixes them.
// Deterministic, so every demo run shows the same thing.
import type { ParamsIn } from '../protocol/methods.ts';

type Rows = ParamsIn<'transcript.append'>['rows'];

const TASKS = [
  { ask: 'Add a PATCH /todos/:id endpoint that updates the title and the done flag.', file: 'src/routes/todos.ts', err: "TypeError: Cannot read properties of undefined (reading 'title')" },
  { ask: 'The tests for PATCH fail with a 500 when the body is empty; return 400 with a ValidationError instead.', file: 'src/validation.ts', err: 'ValidationError: body must have title or done' },
  { ask: 'Add pagination to GET /todos with ?limit and ?cursor; default limit 50, max 200.', file: 'src/routes/todos.ts', err: 'AssertionError: expected 200 items, got 50' },
  { ask: 'Store todos in SQLite instead of memory; keep the repository interface unchanged.', file: 'src/store/sqlite-repo.ts', err: 'SqliteError: no such table: todos' },
  { ask: 'Write a migration for the todos table with created_at and updated_at columns.', file: 'migrations/001_todos.sql', err: 'SqliteError: table todos already exists' },
  { ask: 'Add an index on (done, created_at) and check the query plan for the list endpoint.', file: 'migrations/002_index.sql', err: 'expected USING INDEX todos_done_created, got SCAN todos' },
  { ask: 'Return 404 with a JSON error body for unknown todo ids instead of an empty 200.', file: 'src/routes/todos.ts', err: 'AssertionError: expected 404, got 200' },
  { ask: 'Make the server shut down cleanly on SIGTERM: stop accepting, finish requests, close the db.', file: 'src/server.ts', err: 'Error: database is locked (SQLITE_BUSY) during shutdown' },
  { ask: 'Add a request id header (x-request-id) and log it with every line.', file: 'src/middleware/request-id.ts', err: 'TypeError: logger.child is not a function' },
  { ask: 'Rate-limit POST /todos to 10 requests per minute per client IP.', file: 'src/middleware/rate-limit.ts', err: 'AssertionError: expected 429 on the 11th request, got 201' },
  { ask: 'Document the API in docs/api.md with one example per endpoint.', file: 'docs/api.md', err: 'markdownlint: MD040 fenced code blocks should have a language' },
  { ask: 'Bump the Node engines field to >=20.9 and fix the CI matrix accordingly.', file: '.github/workflows/ci.yml', err: 'npm ERR! engine Unsupported engine for todo-api@1.4.0' },
];

function code(task: number, step: number): string {
  const lines: string[] = [];
  for (let l = 0; l < 14; l++) lines.push(`  ${l === 0 ? 'export function' : 'const'} handler${task}_${step}_${l} = (req, res) => validate(req.body, schema${task});`);
  return lines.join('\n');
}

export function demoSession(): Rows[] {
  const turns: Rows[] = [];
  TASKS.forEach((t, i) => {
    turns.push([
      { kind: 'user', content: [{ type: 'text', text: t.ask }] },
      {
        kind: 'assistant',
        content: [
          { type: 'text', text: `I'll start by reading ${t.file}.` },
          { type: 'tool_call', id: `read_${i}`, name: 'read_file', arguments: { path: t.file } },
        ],
      },
      { kind: 'tool_result', call_id: `read_${i}`, content: [{ type: 'text', text: `// ${t.file}\n${code(i, 0)}` }] },
      {
        kind: 'assistant',
        content: [
          { type: 'text', text: `Changed ${t.file}; running the test suite.` },
          { type: 'tool_call', id: `test_${i}`, name: 'bash', arguments: { cmd: 'npm test -- --reporter=dot' } },
        ],
      },
      { kind: 'tool_result', call_id: `test_${i}`, is_error: true, content: [{ type: 'text', text: `FAIL test/todos.test.ts\n  ${t.err}\n    at ${t.file}:42:13\n1 failed, 37 passed` }] },
    ]);
    turns.push([
      {
        kind: 'assistant',
        content: [
          { type: 'text', text: `The failure is "${t.err}". Fixing it in ${t.file} and re-running.` },
          { type: 'tool_call', id: `fix_${i}`, name: 'bash', arguments: { cmd: `npm test -- test/todos.test.ts` } },
        ],
      },
      { kind: 'tool_result', call_id: `fix_${i}`, content: [{ type: 'text', text: `PASS test/todos.test.ts\n38 passed\n${code(i, 1)}` }] },
      { kind: 'assistant', content: [{ type: 'text', text: `Done: ${t.ask.split('.')[0]}. Decision: kept the change inside ${t.file}; all 38 tests pass.` }] },
    ]);
  });
  return turns;
}
