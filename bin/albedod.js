#!/usr/bin/env -S node --v8-pool-size=1
// albedod: the daemon, from the built JavaScript in dist/ (npm install builds it). Signals go
// straight to this process: there is no wrapper between it and whoever starts it. The flags on
// the first line are daemon/node-flags.ts's (run it as `node --v8-pool-size=1 bin/albedod.js`
// when not by its own name).
import { runBuilt } from './built.js';

await runBuilt('daemon/main.js');
