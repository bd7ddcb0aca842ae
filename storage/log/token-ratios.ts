// The ratio of provider-measured input tokens to the daemon's local estimate, learned from
// usage reports per session and model. The estimate itself stays local and byte-based; the
// engine multiplies by this ratio where the real size matters (the trigger, the tail budget).
import { type Db, perDb } from '../db.ts';

/** Ratios are kept within these bounds, whatever a report says. */
export const RATIO_MIN = 0.5;
export const RATIO_MAX = 3;
/** Requests estimated below this many tokens say too little about the ratio to learn from. */
export const MIN_ESTIMATE_FOR_RATIO = 200;
/** Weight of a new report against the ratio so far (exponential moving average). */
const NEW_WEIGHT = 0.5;

const stmts = perDb((db: Db) => ({
  own: db.prepare<[number, string], { ratio: number; reports: number }>('SELECT ratio, reports FROM token_ratios WHERE sid = ? AND model = ?'),
  model: db.prepare<[string], { ratio: number }>('SELECT ratio FROM token_ratios WHERE model = ? ORDER BY updated_at DESC LIMIT 1'),
  upsert: db.prepare<[number, string, number, number, number]>(
    `INSERT INTO token_ratios (sid, model, ratio, reports, updated_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (sid, model) DO UPDATE SET ratio = excluded.ratio, reports = excluded.reports, updated_at = excluded.updated_at`,
  ),
}));

export function clampRatio(r: number): number {
  return Math.min(RATIO_MAX, Math.max(RATIO_MIN, r));
}

/**
 * The ratio for a session's requests to `model`: the session's own once it has a report, else
 * the latest any session learned for that model (a new session starts calibrated), else 1.
 */
export function tokenRatio(db: Db, sid: number, model: string | null): number {
  const st = stmts(db);
  const key = model ?? '';
  return st.own.get(sid, key)?.ratio ?? (key === '' ? undefined : st.model.get(key)?.ratio) ?? 1;
}

/**
 * Folds one report into the session's ratio for `model`. Returns the ratio now in force, or
 * undefined when the request was too small to learn from.
 */
export function learnTokenRatio(db: Db, sid: number, model: string | null, estimate: number, measured: number, now = Date.now()): number | undefined {
  if (estimate < MIN_ESTIMATE_FOR_RATIO || measured <= 0) return undefined;
  const st = stmts(db);
  const key = model ?? '';
  const sample = clampRatio(measured / estimate);
  const prior = st.own.get(sid, key);
  const ratio = prior === undefined ? sample : clampRatio(prior.ratio * (1 - NEW_WEIGHT) + sample * NEW_WEIGHT);
  st.upsert.run(sid, key, ratio, (prior?.reports ?? 0) + 1, now);
  return ratio;
}
