// `npm run agents:install`: installs the pinned real agent CLIs (Claude Code, pi, Codex) into the
// git-ignored `.agents/` folder, or does nothing when they are there already. The e2e tests call
// the same ensureAgents() themselves; this is for warming the cache ahead of them.
import { ensureAgents, pinnedAgents } from '../../test/support/agents.ts';

const start = Date.now();
const res = await ensureAgents({ log: (line) => console.error(line) });
const pins = Object.entries(pinnedAgents)
  .map(([name, version]) => `${name}@${version}`)
  .join(', ');
console.log(res.installed ? `installed ${pins} in ${res.installMs} ms` : `${pins} already installed (checked in ${Date.now() - start} ms)`);
console.log(`claude: ${res.claude}`);
console.log(`pi: ${res.pi}`);
console.log(`codex: ${res.codex}`);
