// The `albedo` operator CLI: slash commands (/compact, /context, /extensions, /reload) and a few
// inspection verbs, sent to the running albedod over its socket. Exit 0 on success, 1 on a
// daemon error (printed as "albedo: <message> [code]"), 2 on bad usage.
import { parseArgs } from 'node:util';
import { AlbedoClient } from '../protocol/client.ts';
import { RpcRemoteError } from '../protocol/rpc-peer.ts';
import { resolvePaths } from './home.ts';
import { packageVersion } from './daemon.ts';

const USAGE = `usage: albedo [--session ID] [--json] <command>

commands:
  /compact [strategy] [focus…]   compact the session now (strategy: rolling, …)
  /context                       show the prepared request and compaction status
  /extensions [list|enable X…|disable X…]
                                 list or select extensions (global without --session)
  /reload                        re-read extensions.json and models.json
  status                         daemon status
  sessions                       list sessions
  grep PATTERN                   search transcripts (the session with --session, else all)
  read [--offset N] [--limit N]  print the session's transcript
  stop                           stop the daemon

The session also comes from ALBEDO_SESSION; the socket from ALBEDO_SOCKET or ALBEDO_HOME.`;

function fail(message: string, code: number): never {
  process.stderr.write(`albedo: ${message}\n`);
  process.exit(code);
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      session: { type: 'string', short: 's' },
      json: { type: 'boolean' },
      offset: { type: 'string' },
      limit: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean' },
    },
  });
  if (values.version === true) return void process.stdout.write(`${packageVersion()}\n`);
  if (values.help === true || positionals.length === 0) return void process.stdout.write(`${USAGE}\n`);
  const session = values.session ?? process.env.ALBEDO_SESSION;
  const socket = resolvePaths().socket;
  let client: AlbedoClient;
  try {
    client = await AlbedoClient.connect(socket, { client: { name: 'albedo-cli', version: packageVersion() } });
  } catch (err) {
    fail(`cannot reach albedod at ${socket} (${(err as Error).message}); start it with: npm start`, 1);
  }
  const print = (json: unknown, text: string) => process.stdout.write(`${values.json === true ? JSON.stringify(json, null, 2) : text}\n`);
  const [verb = '', ...rest] = positionals;
  try {
    if (verb.startsWith('/')) {
      const r = await client.call('command', { session, line: [verb, ...rest].join(' ') });
      print(r.result, r.text);
      // A /compact that compacted nothing is a failed command for scripts; the text says why.
      if (r.command === 'compact' && (r.result as { compacted?: boolean }).compacted === false) process.exitCode = 1;
    } else if (verb === 'status') {
      const s = await client.call('daemon.status', {});
      const errors = s.config_errors.map((e) => `\nconfig error in ${e.file}: ${e.message}`).join('');
      print(s, `albedod ${s.version} pid ${s.pid} · home ${s.home} · up ${Math.round(s.uptime_ms / 1000)} s · ${s.sessions} sessions · ${s.loaded_kernels} loaded · ${s.connections} connections${errors}`);
    } else if (verb === 'sessions') {
      const r = await client.call('session.list', {});
      print(r, r.sessions.map((s) => `${s.session}\t${s.rows} rows\thead #${s.head}${s.parent === null ? '' : `\tfork of ${s.parent}`}`).join('\n'));
    } else if (verb === 'grep') {
      const pattern = rest.join(' ');
      if (pattern === '') fail('grep needs a pattern', 2);
      const r = await client.call('transcript_grep', { pattern, session, limit: 100 });
      print(r, [`${r.total} matching row(s)`, ...r.matches.map((m) => `${m.session} #${m.seq}: ${m.preview}`)].join('\n'));
    } else if (verb === 'read') {
      if (session === undefined) fail('read needs --session', 2);
      const r = await client.call('transcript_read', {
        session,
        offset: values.offset === undefined ? 0 : Number(values.offset),
        limit: values.limit === undefined ? 20_000 : Number(values.limit),
      });
      print(r, r.next_offset === null ? r.text : `${r.text}\n[… continue with --offset ${r.next_offset}]`);
    } else if (verb === 'stop') {
      await client.call('daemon.shutdown', {});
      print({ ok: true }, 'albedod is stopping');
    } else {
      fail(`unknown command "${verb}"\n${USAGE}`, 2);
    }
  } catch (err) {
    if (err instanceof RpcRemoteError) {
      const code = (err.data as { code?: string } | undefined)?.code;
      fail(`${err.message}${code === undefined ? '' : ` [${code}]`}`, 1);
    }
    throw err;
  } finally {
    await client.close();
  }
}

main(process.argv.slice(2)).catch((err: unknown) => fail(err instanceof Error ? err.message : String(err), 1));
