#!/usr/bin/env node
// albedod: runs the daemon's TypeScript entry through tsx (no build step).
import { register } from 'tsx/esm/api';

register();
await import('../daemon/main.ts');
