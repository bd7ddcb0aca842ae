#!/usr/bin/env node
// albedo: the operator CLI, from the built JavaScript in dist/ (npm install builds it).
import { runBuilt } from './built.js';

await runBuilt('cli/main.js');
