#!/usr/bin/env node
// albedo: the operator CLI, run through tsx (no build step).
import { register } from 'tsx/esm/api';

register();
await import('../daemon/cli.ts');
