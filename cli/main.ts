// Entry of the `albedo` CLI (bin/albedo.js runs its built form). Only the client side loads
// here: protocol/, commander and the verbs; nothing of the daemon, no SQLite.
import { runCli } from './program.ts';

process.exitCode = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
