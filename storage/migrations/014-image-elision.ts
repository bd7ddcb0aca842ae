// Migration 14: image elision after compaction. A committed compaction records, in its own
// transaction, the seq below which the session's tool-output images are no longer in the
// request (`pending_below`); the elider works through that range in batches, each batch
// marking rows, dropping their payload references and deleting payloads nothing names any
// more in one transaction, and advancing `done_below`. A crash between batches leaves the
// job here for the next start. The counters are what /context shows.

export const sql = `
CREATE TABLE image_elision (
  sid INTEGER PRIMARY KEY REFERENCES sessions(sid) ON DELETE CASCADE,
  -- Elide tool-output images in rows with seq below this; NULL when no job is pending.
  pending_below INTEGER,
  -- Rows below this seq were handled by an earlier batch or job.
  done_below INTEGER NOT NULL DEFAULT 0,
  images_elided INTEGER NOT NULL DEFAULT 0,
  payloads_deleted INTEGER NOT NULL DEFAULT 0,
  bytes_freed INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX image_elision_pending ON image_elision(sid) WHERE pending_below IS NOT NULL;
`;
