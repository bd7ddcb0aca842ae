// Entry of the search indexer thread: registers tsx inside the worker (loader flags of the main
// thread do not reach workers on Node 20), then runs the TypeScript worker. Built code gets its
// own entry (scripts/build.ts).
import { register } from 'tsx/esm/api';

register();
await import('./index-worker-thread.ts');
