// The client that times appends over the daemon's socket against the two floors an append over a
// socket cannot cost less than together (issue 35, target 5), run as a process of its own for the
// reason socket-timer.ts gives: the transport floor (transport-floor.ts: a bare server that parses
// each request line and answers with an append's reply held ready) and the SQLite floor
// (floor.ts: the same rows stored plainly, in this process). Each block times the same number of
// batches on the three sides, in an order that rotates from block to block. The three get the
// same rows; the daemon sees each key once (a repeated key would be answered from its key index),
// and the floors keep no keys.
//
//   node --import tsx scripts/bench/append-timer.ts <request file>
//
// The request file holds AppendTimerRequest. Prints one JSON line: AppendTimerBlocks.
import fs from 'node:fs';
import { AlbedoClient } from '../../protocol/client.ts';
import type { RowIn } from '../../protocol/rows.ts';
import { EncodedJson } from '../../protocol/rpc-message.ts';
import { AppendFloor } from './floor.ts';
import { nowMs, ownCpuMs, processCpuMs } from './timing.ts';
import { connectToFloor } from './transport-floor.ts';

export interface AppendTimerRequest {
  daemon_socket: string;
  daemon_pid: number;
  floor_socket: string;
  /** A folder of its own for the SQLite floor's file, already filled with the prefill. */
  sqlite_dir: string;
  session: string;
  /** Batches each side gets untimed first, for this process's connections and code to warm up. */
  warm: RowIn[][];
  /** blocks[b][i]: the i-th batch of block b. */
  blocks: RowIn[][][];
}

/** Milliseconds per block and side, and CPU milliseconds over all blocks. */
export interface AppendTimerBlocks {
  ours: number[];
  transport: number[];
  sqlite: number[];
  /** The daemon's during our side, this process's during the SQLite floor and during our side. */
  cpu_ms?: { daemon: number; sqlite: number; client: number };
}

async function main(): Promise<void> {
  const file = process.argv[2];
  if (file === undefined) throw new Error('usage: append-timer.ts <request file>');
  const r = JSON.parse(fs.readFileSync(file, 'utf8')) as AppendTimerRequest;
  const client = await AlbedoClient.connect(r.daemon_socket, { client: { name: 'albedo-bench-append-timer', version: '1' } });
  const transport = await connectToFloor(r.floor_socket);
  const sqlite = new AppendFloor(r.sqlite_dir);
  const out: AppendTimerBlocks = { ours: [], transport: [], sqlite: [] };
  const cpu = { daemon: 0, sqlite: 0, client: 0 };
  let cpuReadable = true;
  // Every side's input made before any timing: the client's serialization is the client's work.
  const encode = (rows: RowIn[]): EncodedJson => new EncodedJson(Buffer.from(JSON.stringify({ session: r.session, rows })));
  const sides = [
    {
      name: 'ours' as const,
      run: async (batches: readonly EncodedJson[]) => {
        const c0 = processCpuMs(r.daemon_pid);
        const k0 = ownCpuMs();
        const t0 = nowMs();
        for (const b of batches) await client.raw('transcript.append', b);
        const ms = nowMs() - t0;
        cpu.client += ownCpuMs() - k0;
        const c1 = processCpuMs(r.daemon_pid);
        if (c0 === undefined || c1 === undefined) cpuReadable = false;
        else cpu.daemon += c1 - c0;
        return ms;
      },
    },
    {
      name: 'transport' as const,
      run: async (batches: readonly EncodedJson[]) => {
        const t0 = nowMs();
        for (const b of batches) await transport.request('transcript.append', b);
        return nowMs() - t0;
      },
    },
  ];
  try {
    for (const rows of r.warm) {
      await client.raw('transcript.append', encode(rows));
      await transport.request('transcript.append', encode(rows));
      sqlite.append(AppendFloor.flatten(rows));
    }
    for (let b = 0; b < r.blocks.length; b++) {
      const rows = r.blocks[b]!;
      const forOurs = rows.map(encode);
      const forTransport = rows.map(encode);
      const flat = rows.map((x) => AppendFloor.flatten(x));
      const timed: Record<'ours' | 'transport' | 'sqlite', number> = { ours: 0, transport: 0, sqlite: 0 };
      const runSqlite = (): number => {
        const k0 = ownCpuMs();
        const ms = flat.reduce((sum, x) => sum + sqlite.append(x), 0);
        cpu.sqlite += ownCpuMs() - k0;
        return ms;
      };
      const order = [0, 1, 2].map((i) => (i + b) % 3);
      for (const i of order) {
        if (i === 2) timed.sqlite = runSqlite();
        else {
          const side = sides[i]!;
          timed[side.name] = await side.run(side.name === 'ours' ? forOurs : forTransport);
        }
      }
      out.ours.push(timed.ours);
      out.transport.push(timed.transport);
      out.sqlite.push(timed.sqlite);
    }
  } finally {
    sqlite.close();
    await client.close();
    transport.dispose('timed');
  }
  if (cpuReadable) out.cpu_ms = cpu;
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`append-timer: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
