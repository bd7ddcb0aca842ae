#!/usr/bin/env node
// albedo: the operator CLI, from its bundle in dist/ (npm install builds it; see scripts/build.ts).
import { runBuilt } from './built.js';

await runBuilt('albedo.js');
