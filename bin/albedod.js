#!/usr/bin/env node
// albedod: the daemon, from the built JavaScript in dist/ (npm install builds it). Signals go
// straight to this process: there is no wrapper between it and whoever starts it.
import { runBuilt } from './built.js';

await runBuilt('daemon/main.js');
