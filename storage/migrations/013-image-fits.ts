// Migration 13: image fitting. `image_fits` remembers, per source image and limits, the fitted
// payload made for it, so an image is resized once however many sessions or prepares need it;
// `image_fit_checked` remembers how far a session's rows are known to be within one set of
// limits, so a restart does not rescan a long session. Both are caches: dropping their rows
// loses nothing but work. See storage/images/fit.ts.

export const sql = `
CREATE TABLE image_fits (
  source_hash TEXT NOT NULL REFERENCES payloads(hash) ON DELETE CASCADE,
  -- The canonical limits (strategies/image-limits.ts limitsKey), e.g. 'edge=8000;px=-;bytes=3932160'.
  limits TEXT NOT NULL,
  fitted_hash TEXT NOT NULL REFERENCES payloads(hash) ON DELETE CASCADE,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (source_hash, limits)
) STRICT, WITHOUT ROWID;
-- Deleting a payload looks up the fits made from it (the primary key) and to it (this index).
CREATE INDEX image_fits_fitted ON image_fits(fitted_hash);

CREATE TABLE image_fit_checked (
  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
  limits TEXT NOT NULL,
  -- Every image in the session's rows with seq <= through reads within the limits.
  through INTEGER NOT NULL,
  -- sessions.rewrites when it was checked: a rewrite (settling) may move rows below through.
  rewrites INTEGER NOT NULL,
  PRIMARY KEY (sid, limits)
) STRICT, WITHOUT ROWID;
`;
