// The eval's daemon: albedod with the eval-only baselines (none, single-summary, masking) registered
// before the daemon's modules load (strategies/index.ts addStrategies), then the ordinary entry.
import { addStrategies } from '../../strategies/index.ts';
import { BASELINES } from './baselines.ts';

addStrategies(BASELINES);
await import('../../daemon/main.ts');
