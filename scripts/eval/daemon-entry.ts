// The eval's daemon: albedod with the eval-only baselines (none, single-summary, masking) registered
// before the daemon's modules load (strategies/index.ts addExtensions), then the ordinary entry.
import { addExtensions } from '../../strategies/index.ts';
import { BASELINES } from './baselines.ts';

addExtensions(BASELINES);
await import('../../daemon/main.ts');
