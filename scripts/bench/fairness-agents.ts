// The fairness section's agents (fairness.ts), run as a process of their own, as agents are: a
// client inside the bench's process paid for that heap's collections (datasets, corpus) on its
// own round trips, idle and during alike, and showed the bench's pauses as the daemon's. The
// bench hands over everything the agents send in a file, so this process holds nothing else.
//
//   node --import tsx scripts/bench/fairness-agents.ts <plan file>
//
// Each agent opens its session, appends its first rows and prepares once; then the process
// prints `ready`, and each agent, once a period, appends its next turn and prepares, timing the
// prepare. A line on stdin stops them; the process then prints one JSON line of samples and exits.
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { AlbedoClient } from '../../protocol/client.ts';
import type { RowIn } from '../../protocol/rows.ts';

/** What the bench writes for this process. */
export interface AgentsPlan {
  socket: string;
  period_ms: number;
  /** What every prepare sends besides the session. */
  prompt: { model: string; instructions: string; tools: unknown[] };
  agents: Array<{ session: string; workspace: string; first: RowIn[]; turns: RowIn[][] }>;
}

/** One timed prepare; start and end on the wall clock (ms since the epoch, fractional). */
export interface AgentSample {
  start: number;
  end: number;
  ms: number;
  /** The agent's own session compacted on this prepare: its own cost, left out of the latencies. */
  compacted: boolean;
}

const wallNow = (): number => performance.timeOrigin + performance.now();

async function main(): Promise<void> {
  const file = process.argv[2];
  if (file === undefined) throw new Error('usage: fairness-agents.ts <plan file>');
  const plan = JSON.parse(fs.readFileSync(file, 'utf8')) as AgentsPlan;
  const samples: AgentSample[] = [];
  let running = true;
  const prepare = async (client: AlbedoClient, session: string): Promise<AgentSample> => {
    const start = wallNow();
    const t0 = performance.now();
    const r = (await client.raw('prepare', { session, ...plan.prompt })) as { compacted: boolean };
    return { start, end: wallNow(), ms: performance.now() - t0, compacted: r.compacted };
  };
  const clients = await Promise.all(plan.agents.map(async (a) => {
    const client = await AlbedoClient.connect(plan.socket, { client: { name: a.session, version: '1' } });
    await client.call('session.open', { session: a.session, workspace: a.workspace });
    await client.raw('transcript.append', { session: a.session, rows: a.first });
    await prepare(client, a.session);
    return client;
  }));
  const loops = plan.agents.map(async (a, k) => {
    const client = clients[k]!;
    await sleep((k * plan.period_ms) / plan.agents.length);
    for (let turn = 0; running; turn++) {
      const due = performance.now() + plan.period_ms;
      const rows = a.turns[turn];
      if (rows === undefined) throw new Error(`${a.session} ran out of its ${a.turns.length} turns`);
      await client.raw('transcript.append', { session: a.session, rows });
      samples.push(await prepare(client, a.session));
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
    }
  });
  process.stdout.write('ready\n');
  await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
  running = false;
  await Promise.all(loops);
  await Promise.all(clients.map((c) => c.close()));
  process.stdout.write(`${JSON.stringify(samples)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`fairness-agents: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
