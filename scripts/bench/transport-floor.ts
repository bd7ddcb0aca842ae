// The transport floor for a request over the daemon's socket: a bare Node process on a Unix
// socket that parses each request line (as any server must) and answers with a reply it holds
// ready, byte for byte the one the daemon sent. No validation, no storage, no work: what one
// round trip of these bytes between two Node processes cannot cost less than, on this machine
// at this moment. Timed by the same client as the daemon, in alternating blocks
// (socket-timer.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { RpcPeer } from '../../protocol/rpc-peer.ts';

// Plain JavaScript run with `node -e`: reads newline-framed requests and answers each with the
// canned result under the request's id. Lines are found in the bytes, as the daemon finds them
// (protocol/framing.ts), and decoded once whole. An earlier version appended each chunk to a
// string and searched that for the newline: the same on a request that arrives in one read, but
// ~3 ms more on a 170 KB append, which arrives in several (V8 flattened and rescanned the growing
// string on every chunk), about half of what the floor then measured.
const SERVER = `
const fs = require('node:fs');
const net = require('node:net');
const [sock, resultFile] = process.argv.slice(1);
const result = fs.readFileSync(resultFile, 'utf8');
const server = net.createServer((c) => {
  let parts = [];
  c.on('data', (d) => {
    let start = 0;
    let nl;
    while ((nl = d.indexOf(10, start)) >= 0) {
      parts.push(d.subarray(start, nl));
      const line = parts.length === 1 ? parts[0] : Buffer.concat(parts);
      parts = [];
      start = nl + 1;
      const m = JSON.parse(line.toString('utf8'));
      if (m.id !== undefined) c.write(Buffer.from('{"jsonrpc":"2.0","id":' + JSON.stringify(m.id) + ',"result":' + result + '}\\n'));
    }
    if (start < d.length) parts.push(d.subarray(start));
  });
  c.on('error', () => {});
});
server.listen(sock, () => process.stdout.write('listening\\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
`;

export interface FloorServer {
  /** Its Unix socket. */
  socket: string;
  stop(): Promise<void>;
}

/** Starts the floor server in `dir`, answering every request with `resultJson`. */
export async function startFloorServer(dir: string, resultJson: string): Promise<FloorServer> {
  const sock = path.join(dir, 'floor.sock');
  const resultFile = path.join(dir, 'floor-result.json');
  fs.writeFileSync(resultFile, resultJson);
  const proc: ChildProcess = spawn(process.execPath, ['-e', SERVER, sock, resultFile], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    proc.stdout?.once('data', () => resolve());
    proc.once('exit', (code) => reject(new Error(`the transport floor server exited (${code})`)));
  });
  return {
    socket: sock,
    async stop() {
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      proc.kill('SIGTERM');
      await exited;
      fs.rmSync(resultFile, { force: true });
    },
  };
}

/** A timing client's connection to the floor server's socket (it answers no requests of its own). */
export async function connectToFloor(socket: string): Promise<RpcPeer> {
  const s = await new Promise<net.Socket>((resolve, reject) => {
    const c = net.connect(socket, () => resolve(c));
    c.once('error', reject);
  });
  return new RpcPeer(s, { onRequest: () => Promise.reject(new Error('the timer answers no requests')) });
}
