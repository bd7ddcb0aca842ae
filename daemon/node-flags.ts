// The Node flags the daemon's process starts with. They must be given on its command line, so
// they are written out where the daemon is launched: bin/albedod.js's `#!` line, `npm start`,
// and the scripts that start a daemon to measure it (scripts/replay/daemon.ts). A test holds the
// first two to this list (test/e2e/npm-start.test.ts).
//
// --v8-pool-size=1: V8 runs its background work (concurrent marking, the helpers of a parallel
// scavenge, optimizing compiles) on a pool of threads, four by default whatever the host. A long
// compaction allocates fast, and those threads then compete for the CPUs with the main thread
// and with the agents the daemon serves. On the 2-core bench host, with one thread, the other
// sessions' p99 prepare during a compaction went from 19-34 to 16-22 ms, and no compaction took
// clearly longer (docs/performance.md, stop 51).
export const DAEMON_NODE_FLAGS: readonly string[] = ['--v8-pool-size=1'];
