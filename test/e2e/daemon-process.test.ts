// The albedod process: its home, socket, lock, signals and crash safety, run as a real child
// process against a real SQLite file.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { logState } from '../../storage/log-checkpoint.ts';
import { spawnDaemon, startEach, tempHome } from './harness.ts';

/** Daemons this file starts; each is killed when the file's tests end. */
const start = startEach();

describe('albedod process', () => {
  test('creates a private home and a 0600 socket', async () => {
    const parent = tempHome();
    const home = path.join(parent, 'nested', 'home');
    const d = await start({ home });
    assert.equal(fs.statSync(home).mode & 0o777, 0o700);
    assert.equal(fs.statSync(d.socket).mode & 0o777, 0o600);
    assert.ok(fs.statSync(d.socket).isSocket());
    assert.ok(fs.existsSync(path.join(home, 'albedo.db')));
    const c = await d.connect();
    const status = await c.call('daemon.status', {});
    assert.equal(status.home, home);
    assert.equal(status.pid, d.proc.pid);
    assert.equal(status.storage.file_bytes, fs.statSync(path.join(home, 'albedo.db')).size);
    assert.equal(status.storage.parts, null, 'no page walk unless asked for');
    const { storage } = await c.call('daemon.status', { storage_parts: true });
    assert.ok(storage.parts !== null && storage.parts.rows > 0 && storage.parts.engine > 0, JSON.stringify(storage));
    assert.equal(await d.stop(), 0);
  });

  test('a second daemon on the same home refuses to start and leaves the first one serving', async () => {
    const d = await start();
    const second = spawnDaemon(d.home);
    const code = await second.exited;
    assert.equal(code, 1);
    assert.match(second.stderr(), /another albedod \(pid \d+\) is already running with home/);
    const c = await d.connect();
    assert.equal((await c.call('daemon.status', {})).pid, d.proc.pid);
    await d.stop();
  });

  test('refuses a home that is a symlink or open to other users', async () => {
    const parent = tempHome();
    const real = path.join(parent, 'real');
    fs.mkdirSync(real, { mode: 0o700 });
    const link = path.join(parent, 'link');
    fs.symlinkSync(real, link);
    const viaLink = spawnDaemon(link);
    assert.equal(await viaLink.exited, 1);
    assert.match(viaLink.stderr(), /is a symlink/);

    const open = path.join(parent, 'open');
    fs.mkdirSync(open);
    fs.chmodSync(open, 0o755);
    const opened = spawnDaemon(open);
    assert.equal(await opened.exited, 1);
    assert.match(opened.stderr(), /open to other users \(mode 755\)/);
    assert.equal(fs.existsSync(path.join(open, 'albedod.sock')), false);
  });

  test('a stale socket left by a killed daemon is replaced', async () => {
    const d = await start();
    assert.equal(await d.stop('SIGKILL'), null);
    assert.ok(fs.existsSync(d.socket), 'SIGKILL leaves the socket file behind');
    await assert.rejects(
      new Promise((resolve, reject) => net.createConnection(d.socket).on('connect', resolve).on('error', reject)),
      /ECONNREFUSED/,
    );
    const again = await start({ home: d.home });
    const c = await again.connect();
    assert.equal((await c.call('daemon.status', {})).pid, again.proc.pid);
    await again.stop();
  });

  test('refuses to replace a socket path that is not a socket', async () => {
    const home = tempHome();
    const bogus = path.join(home, 'not-a-socket');
    fs.writeFileSync(bogus, 'keep me');
    const p = spawnDaemon(home, { ALBEDO_SOCKET: bogus });
    assert.equal(await p.exited, 1);
    assert.match(p.stderr(), /exists and is not a socket/);
    // The refusal is the only thing said: no crash of the logger on the way out.
    assert.doesNotMatch(p.stderr(), /sonic boom|Error:|at /);
    assert.equal(fs.readFileSync(bogus, 'utf8'), 'keep me');
  });

  test('SIGKILL after acknowledged appends loses none of them', async () => {
    const d = await start();
    const c = await d.connect();
    const { session } = await c.call('session.open', { session: 'crash' });
    const acked: number[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await c.call('transcript.append', {
        session,
        rows: [{ kind: 'user', content: [{ type: 'text', text: `message ${i}` }] }],
      });
      acked.push(...r.seqs);
    }
    assert.equal(await d.stop('SIGKILL'), null);
    const again = await start({ home: d.home });
    const c2 = await again.connect();
    const page = await c2.call('transcript.rows', { session, limit: 100 });
    assert.deepEqual(
      page.rows.map((r) => r.seq),
      acked,
    );
    assert.deepEqual(
      page.rows.map((r) => (r.body.kind === 'user' && r.body.content[0]?.type === 'text' ? r.body.content[0].text : '')),
      acked.map((_, i) => `message ${i}`),
    );
    await again.stop();
  });

  test('SIGTERM answers the request in flight, checkpoints the WAL and removes the socket', async () => {
    const d = await start();
    const c = await d.connect();
    await c.call('session.open', { session: 'term' });
    const rows = Array.from({ length: 10_000 }, (_, i) => ({
      kind: 'user' as const,
      content: [{ type: 'text' as const, text: `row ${i} `.repeat(20) }],
    }));
    const pending = c.call('transcript.append', { session: 'term', rows });
    // The daemon reads a connection's lines in order and runs them concurrently, so once a status
    // sent after the append (about 2 MB) is answered, the append has been read and started; storing
    // 10k rows takes far longer than a status, so the signal lands while it is in flight. (A fixed
    // sleep here was too short on a loaded machine: the signal came before the line was read.)
    await c.call('daemon.status', {});
    d.proc.kill('SIGTERM');
    const appended = await pending;
    assert.equal(appended.seqs.length, 10_000);
    const exitCode = await new Promise((resolve) => d.proc.once('exit', resolve));
    assert.equal(exitCode, 0);
    assert.equal(fs.existsSync(d.socket), false);
    const wal = path.join(d.home, 'albedo.db-wal');
    assert.ok(!fs.existsSync(wal) || fs.statSync(wal).size === 0, 'the WAL was checkpointed');
    const again = await start({ home: d.home });
    const c2 = await again.connect();
    const list = await c2.call('session.list', {});
    assert.equal(list.sessions.find((s) => s.session === 'term')?.rows, 10_000);
    await again.stop();
  });

  test("a running daemon keeps its write-ahead log checkpointed (its own checkpointer, SQLite's is off)", async () => {
    // The indexer off: its units would write on after the append, and the check wants a log that stops growing.
    const d = await start({ env: { ALBEDO_SEARCH_INDEXER: 'off' } });
    const c = await d.connect();
    await c.call('session.open', { session: 'log' });
    // Text that does not compress, so that the rows' pages take the log past SQLite's 1,000-frame threshold.
    const rows = Array.from({ length: 10_000 }, (_, i) => ({ kind: 'user' as const, content: [{ type: 'text' as const, text: `row ${i} ${crypto.randomBytes(300).toString('hex')}` }] }));
    await c.call('transcript.append', { session: 'log', rows });
    const db = path.join(d.home, 'albedo.db');
    const grown = logState(db);
    assert.ok(grown.frames > 1000, `the append wrote ${grown.frames} frames`);
    // Copied into the database file while the daemon runs: past the threshold, or in the quiet after.
    const copiedAll = (): boolean => {
      const now = logState(db);
      return now.frames >= grown.frames && now.copied === now.frames;
    };
    for (let i = 0; i < 200 && !copiedAll(); i++) await sleep(25);
    assert.ok(copiedAll(), JSON.stringify(logState(db)));
    await d.stop();
  });

  test('SIGHUP lifts the automatic-compaction pause, as /reload does', async () => {
    const home = tempHome();
    // A client backend with no connection to answer it: every compaction fails.
    fs.writeFileSync(path.join(home, 'extensions.json'), JSON.stringify({ rolling: { contextWindowTokens: 2000 }, summarizer: { provider: 'client' } }));
    const d = await start({ home });
    const c = await d.connect();
    await c.call('session.open', { session: 'hup' });
    const rows = Array.from({ length: 40 }, (_, i) => [
      { kind: 'user' as const, content: [{ type: 'text' as const, text: `step ${i}: change src/file${i}.ts `.repeat(4) }] },
      { kind: 'assistant' as const, content: [{ type: 'text' as const, text: `changed src/file${i}.ts `.repeat(4) }] },
    ]).flat();
    await c.call('transcript.append', { session: 'hup', rows });
    const prepare = () => c.call('prepare', { session: 'hup', model: 'm', instructions: 'work' });
    for (let i = 1; i <= 3; i++) assert.equal((await prepare()).observation.auto_failures, i);
    assert.equal((await prepare()).observation.latched, true);

    d.proc.kill('SIGHUP');
    const log = path.join(home, 'albedod.log');
    while (!(fs.existsSync(log) && fs.readFileSync(log, 'utf8').includes('SIGHUP received'))) await new Promise((r) => setTimeout(r, 20));
    const after = await prepare();
    assert.equal(after.observation.latched, false);
    assert.equal(after.observation.auto_failures, 1, 'the next request tried again (and failed again)');
    assert.match(after.observation.failure ?? '', /summarize/);
  });

  test('daemon.shutdown stops the daemon cleanly', async () => {
    const d = await start();
    const c = await d.connect();
    assert.deepEqual(await c.call('daemon.shutdown', {}), { ok: true });
    const code = await new Promise((resolve) => d.proc.once('exit', resolve));
    assert.equal(code, 0);
  });

  test('an invalid environment setting stops the start with a clear message', async () => {
    const p = spawnDaemon(tempHome(), { ALBEDO_MAX_LINE_BYTES: 'lots' });
    assert.equal(await p.exited, 1);
    assert.match(p.stderr(), /invalid environment: .*ALBEDO_MAX_LINE_BYTES/);
  });
});
