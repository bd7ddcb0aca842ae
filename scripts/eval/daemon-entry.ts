// The eval's daemon: albedod with the eval-only baselines (none, single-summary, masking) added
// to the shipped extensions.
import { startDaemon } from '../../daemon/start.ts';
import { BASELINES } from './baselines.ts';

startDaemon({ extensions: BASELINES });
