#!/usr/bin/env node
// albedo: the operator CLI, from its bundle in dist/ (npm install builds it; see scripts/build.ts).
import { runBundle } from './built.js';

runBundle('albedo.cjs');
