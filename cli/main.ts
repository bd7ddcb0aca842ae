// Entry of the `albedo` CLI (bin/albedo.js runs its built form, a CommonJS bundle, so no
// top-level await here). Only the client side loads: protocol/, commander and the verbs;
// nothing of the daemon, no SQLite.
import { runCli } from './program.ts';

void runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }).then((code) => {
  process.exitCode = code;
});
