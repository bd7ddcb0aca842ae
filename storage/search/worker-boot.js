// Entry of the search worker thread: registers tsx inside the worker (loader flags of the main
// thread do not reach workers on Node 20), then runs the TypeScript worker.
import { register } from 'tsx/esm/api';

register();
await import('./worker-thread.ts');
