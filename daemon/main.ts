// Entry point of albedod (bin/albedod.js runs its build): the daemon with the shipped extensions.
import { startDaemon } from './start.ts';

startDaemon();
