// The fairness section's compacting client, in a process of its own so that its work (the big
// reply, and the summarize requests it answers as a client summarizer) never delays the timed
// agents in the bench's process. Usage: fairness-compactor.ts SOCKET SESSION MODEL [client].
// Prepares SESSION once, answering `summarize` at once when `client` is given, and prints
// {ms, compacted, backend} as one JSON line.
import { AlbedoClient } from '../../protocol/client.ts';
import { agentPrompt } from './prepare.ts';
import { nowMs } from './timing.ts';

const [socket, session, model, mode] = process.argv.slice(2);
if (socket === undefined || session === undefined || model === undefined) throw new Error('usage: fairness-compactor.ts SOCKET SESSION MODEL [client]');
const client = await AlbedoClient.connect(socket, {
  client: { name: 'fairness-compactor', version: '1' },
  ...(mode === 'client' ? { summarize: () => Promise.resolve({ text: 'The agent built the project, fixed the failing tests and left the release notes open.' }) } : {}),
});
const { instructions, tools } = agentPrompt();
const t = nowMs();
const r = (await client.raw('prepare', { session, model, instructions, tools })) as { compacted: boolean; observation: { last_compaction: { backend: string | null } | null } };
const ms = nowMs() - t;
await client.close();
process.stdout.write(`${JSON.stringify({ ms, compacted: r.compacted, backend: r.observation.last_compaction?.backend ?? null })}\n`);
