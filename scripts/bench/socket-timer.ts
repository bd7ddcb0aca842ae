// The client that times a request over two Unix sockets, the daemon's and the transport floor's
// (transport-floor.ts), in alternating blocks, run as a process of its own: an agent talks to the
// daemon from its own process, and a client inside the bench's process, which holds datasets,
// corpora and kernels, paid for that heap's collections on every round trip (the floor's as much
// as the daemon's, so their ratio looked better than it is). Each side is warmed first, the
// daemon's with as many requests as it takes to reach its steady code (V8 optimizes a function
// after it has run a while; a daemon serving agents runs its request path all day).
//
//   node --import tsx scripts/bench/socket-timer.ts <daemon socket> <floor socket> <request file>
//
// The request file holds {method, params, warm, blocks, per_block}. Prints one JSON line:
// {ours, floor, stringify} in milliseconds, each sample a round trip from the request written to
// the response parsed (stringify: JSON.stringify of that response, for scale).
import fs from 'node:fs';
import { AlbedoClient } from '../../protocol/client.ts';
import { connectToFloor } from './transport-floor.ts';

interface TimerRequest {
  method: string;
  params: unknown;
  warm: number;
  blocks: number;
  per_block: number;
}

async function main(): Promise<void> {
  const [daemonSocket, floorSocket, requestFile] = process.argv.slice(2);
  if (daemonSocket === undefined || floorSocket === undefined || requestFile === undefined) throw new Error('usage: socket-timer.ts <daemon socket> <floor socket> <request file>');
  const r = JSON.parse(fs.readFileSync(requestFile, 'utf8')) as TimerRequest;
  // The daemon's side as an agent's connection (initialized); the floor answers any line.
  const client = await AlbedoClient.connect(daemonSocket, { client: { name: 'albedo-bench-timer', version: '1' } });
  const ours = { request: (method: string, params: unknown) => client.raw(method, params) };
  const floor = await connectToFloor(floorSocket);
  let response: unknown;
  for (let i = 0; i < r.warm; i++) response = await ours.request(r.method, r.params);
  for (let i = 0; i < r.warm; i++) await floor.request(r.method, r.params);
  const out = { ours: [] as number[], floor: [] as number[], stringify: [] as number[] };
  const time = async (peer: { request(method: string, params: unknown): Promise<unknown> }, into: number[]): Promise<void> => {
    for (let i = 0; i < r.per_block; i++) {
      const t0 = performance.now();
      response = await peer.request(r.method, r.params);
      into.push(performance.now() - t0);
    }
  };
  for (let b = 0; b < r.blocks; b++) {
    await time(ours, out.ours);
    await time(floor, out.floor);
    for (let i = 0; i < r.per_block; i++) {
      const t0 = performance.now();
      JSON.stringify(response);
      out.stringify.push(performance.now() - t0);
    }
  }
  await client.close();
  floor.dispose('timed');
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`socket-timer: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
